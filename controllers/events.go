/*
Copyright The capo-sharednet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
)

// administratorEvent records an Event about a SharedNetwork in the
// extension's namespace, not in `default` where the API server puts the
// Events of a cluster-scoped object by default: they may carry the VM
// project's errors, and `default` is often readable by tenants
// (docs/monitoring.md).
func administratorEvent(recorder record.EventRecorder, namespace string, sn *sharednetv1.SharedNetwork, eventType, reason, message string) {
	if recorder == nil {
		return
	}
	recorder.Event(&corev1.ObjectReference{
		APIVersion: sharednetv1.GroupVersion.String(), Kind: "SharedNetwork", Name: sn.Name, UID: sn.UID,
		ResourceVersion: sn.ResourceVersion, Namespace: extensionNamespace(namespace),
	}, eventType, reason, message)
}

// extensionNamespace is the extension's namespace as configured
// (--namespace), install.Namespace when not set.
func extensionNamespace(namespace string) string {
	if namespace == "" {
		return install.Namespace
	}
	return namespace
}

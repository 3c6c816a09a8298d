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
*/package controllers

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
)

// TestSharedNetworksOnOneSecretOpenTheirOwnCloud: two SharedNetworks whose
// credential is one Secret, each naming another cloud of its clouds.yaml,
// are read each in its own project (the session is keyed by the Secret's
// UID, the cloud and the region, as everywhere else), not in whichever the
// first one opened.
func TestSharedNetworksOnOneSecretOpenTheirOwnCloud(t *testing.T) {
	g := NewWithT(t)
	east := fakekeystone.Start(t, fakekeystone.Options{Project: "vm-east"})
	west := fakekeystone.Start(t, fakekeystone.Options{Project: "vm-west"})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-sharednet-system", Name: "vm", UID: "secret-uid"},
		Data: map[string][]byte{openstack.CloudsSecretKey: append(east.CloudsYAML("east"), bytes.TrimPrefix(west.CloudsYAML("west"), []byte("clouds:\n"))...)}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	r := &SharedNetworkReconciler{Client: c, Namespace: "capo-sharednet-system",
		Clouds: &credentials.Source{Client: c, Namespace: "capo-sharednet-system", Sessions: &openstack.Sessions{}}}
	for _, cloud := range []string{"east", "west", "east", "west"} {
		sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: cloud},
			Spec: sharednetv1.SharedNetworkSpec{Identity: sharednetv1.VMProjectIdentity{SecretName: "vm", CloudName: cloud}, NetworkID: "net-" + cloud}}
		r.refresh(context.Background(), sn, secret)
	}
	g.Expect(east.Requests.Load()).To(BeEquivalentTo(1), "SharedNetwork east authenticated once, at its own cloud")
	g.Expect(west.Requests.Load()).To(BeEquivalentTo(1), "SharedNetwork west authenticated once, at its own cloud, not with east's session")
}

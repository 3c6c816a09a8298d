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
	"context"
	"slices"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
)

// RecordGuard says whether an attachment's status is the extension's own
// record: true only while nobody else can write it. The detach unshares the
// recorded project only then; otherwise only the project the VM project's
// Keystone vouches for (fail closed: a forged status never points the VM
// credential at another project's share).
type RecordGuard interface {
	Protected(ctx context.Context) bool
}

// PolicyGuard is the RecordGuard of an installed extension: the shipped
// ValidatingAdmissionPolicy (config/policy) and its Deny binding are in
// place. It reads them at most once a minute, uncached (no informer for two
// objects); a failed read is "not protected".
type PolicyGuard struct {
	Reader client.Reader

	mu        sync.Mutex
	checkedAt time.Time
	protected bool
}

// policyRecheck is how long an answer of PolicyGuard holds.
const policyRecheck = time.Minute

// Protected implements RecordGuard.
func (g *PolicyGuard) Protected(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.checkedAt) < policyRecheck {
		return g.protected
	}
	g.protected, g.checkedAt = g.read(ctx), time.Now()
	if !g.protected {
		ctrl.LoggerFrom(ctx).Info("the admission policy that protects SharedNetworkAttachments is not in place: the detach unshares only the project the VM project's Keystone vouches for, never the one an attachment records; apply config/policy",
			"policy", install.AttachmentsPolicy)
	}
	return g.protected
}

func (g *PolicyGuard) read(ctx context.Context) bool {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	key := client.ObjectKey{Name: install.AttachmentsPolicy}
	if g.Reader.Get(ctx, key, policy) != nil || g.Reader.Get(ctx, key, binding) != nil {
		return false
	}
	return binding.Spec.PolicyName == install.AttachmentsPolicy &&
		slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny) &&
		binding.Spec.MatchResources == nil && binding.Spec.ParamRef == nil
}

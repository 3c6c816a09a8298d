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
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/records"
)

// RecordGuard says whether an attachment's status can be written by nobody
// but the extension now (PolicyGuard). It is one of the two conditions on
// which the detach trusts a record (trustedRecord); the other, the record's
// seal, says that the extension wrote it, whenever that was.
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

// sealShare seals a's record of its share on sn (status.share.seal) with the
// extension's key, whenever the extension writes that record. Without the
// key the record stays unsealed, so the detach does not trust it (it falls
// back to the verified project); that is logged, and a later observation
// seals it once the cluster's project is verified (observeProject). A
// seal already there is kept when the key cannot be read: a passing failure
// never unseals a record.
func (r *AttachmentReconciler) sealShare(ctx context.Context, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) {
	if r.Seals == nil {
		return
	}
	sealer, err := r.Seals.Sealer(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the share record cannot be sealed: the detach does not trust it until it is", "attachment", klog.KObj(a))
		return
	}
	a.Status.Share.Seal = sealer.Seal(records.Of(a, sn))
}

// sealed says whether a's share record on sn carries the extension's seal;
// why says otherwise.
func (r *AttachmentReconciler) sealed(ctx context.Context, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) (ok bool, why string) {
	if r.Seals == nil {
		return false, "this extension seals no records"
	}
	sealer, err := r.Seals.Sealer(ctx)
	switch {
	case err != nil:
		ctrl.LoggerFrom(ctx).Error(err, "no attachment's record is trusted: the key that seals them cannot be read", "attachment", klog.KObj(a))
		return false, "the key that seals records cannot be read: " + err.Error()
	case a.Status.Share.Seal == "":
		return false, "it carries no seal (written before records were sealed, or not by the extension)"
	case !sealer.Verify(records.Of(a, sn), a.Status.Share.Seal):
		return false, "its seal does not match it (the extension did not write it as it is: edited, copied from another attachment, or sealed with another key)"
	}
	return true, ""
}

// trustedRecord is the project a's record names when the detach may
// unshare it on the record's word alone: the record carries the extension's
// seal over this attachment, SharedNetwork, network and project (the
// extension wrote it, so no forgery counts, whenever it was made), and the
// shipped admission policy is in place. The policy stays a condition: a
// seal proves who wrote a record, not that it is the attachment's latest, and
// without the policy a tenant could put back an older sealed record of the
// same attachment. Otherwise project is "" and why says what failed.
func (r *AttachmentReconciler) trustedRecord(ctx context.Context, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) (project, why string) {
	if a.Status.Share == nil {
		return "", ""
	}
	var not []string
	if ok, why := r.sealed(ctx, sn, a); !ok {
		not = append(not, why)
	}
	if r.Records == nil || !r.Records.Protected(ctx) {
		not = append(not, "the admission policy "+install.AttachmentsPolicy+" that protects attachments is not installed")
	}
	if len(not) > 0 {
		return "", strings.Join(not, "; ")
	}
	return a.Status.Share.ProjectID, ""
}

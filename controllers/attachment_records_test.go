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
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

// TestRecordsAreTrustedOnlyUnderTheShippedPolicy: the detach uses an
// attachment's record only while the policy that keeps tenants from
// writing it denies; anything less (missing, audit-only, narrowed to some
// namespaces) is "not protected".
func TestRecordsAreTrustedOnlyUnderTheShippedPolicy(t *testing.T) {
	policy := func() *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: install.AttachmentsPolicy}}
	}
	binding := func(change func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: install.AttachmentsPolicy},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: install.AttachmentsPolicy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
		change(b)
		return b
	}
	same := func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {}
	for _, tt := range []struct {
		name    string
		objects []client.Object
		want    bool
	}{
		{name: "as shipped", objects: []client.Object{policy(), binding(same)}, want: true},
		{name: "not installed", want: false},
		{name: "the binding without its policy", objects: []client.Object{binding(same)}, want: false},
		{name: "the policy without its binding", objects: []client.Object{policy()}, want: false},
		{name: "audit only", objects: []client.Object{policy(), binding(func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
		})}, want: false},
		{name: "narrowed to some namespaces", objects: []client.Object{policy(), binding(func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		})}, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			guard := &PolicyGuard{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tt.objects...).Build()}
			g.Expect(guard.Protected(context.Background())).To(Equal(tt.want))
		})
	}
}

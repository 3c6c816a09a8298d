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

package records

import (
	"bytes"
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

func record() Record {
	return Record{Namespace: "team-a", Name: "demo-md-a", UID: "uid-1", SharedNetwork: "vm", NetworkID: "net-1", ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}
}

// TestASealCoversEveryFieldThatDecidesAnUnshare: a seal verifies for the
// record it was made for, with the key it was made with, and for nothing
// else: no field of the record can be changed, moved into another field or
// sealed with another key.
func TestASealCoversEveryFieldThatDecidesAnUnshare(t *testing.T) {
	g := NewWithT(t)
	s, err := NewSealer(bytes.Repeat([]byte{1}, KeySize))
	g.Expect(err).NotTo(HaveOccurred())
	seal := s.Seal(record())
	g.Expect(s.Verify(record(), seal)).To(BeTrue())
	g.Expect(len(seal)).To(BeNumerically("<=", 128), "status.share.seal's MaxLength")

	for name, change := range map[string]func(*Record){
		"namespace":          func(r *Record) { r.Namespace = "team-b" },
		"name":               func(r *Record) { r.Name = "demo-md-b" },
		"UID":                func(r *Record) { r.UID = "uid-2" },
		"SharedNetwork":      func(r *Record) { r.SharedNetwork = "vm2" },
		"network":            func(r *Record) { r.NetworkID = "net-2" },
		"project":            func(r *Record) { r.ProjectID = "victim-project" },
		"policy":             func(r *Record) { r.RBACPolicyID = "" },
		"a field boundary":   func(r *Record) { r.Namespace, r.Name = "team-ad", "emo-md-a" },
		"project and policy": func(r *Record) { r.ProjectID, r.RBACPolicyID = "cluster-projectrbac-1", "" },
	} {
		r := record()
		change(&r)
		g.Expect(s.Verify(r, seal)).To(BeFalse(), name)
	}
	other, _ := NewSealer(bytes.Repeat([]byte{2}, KeySize))
	g.Expect(other.Verify(record(), seal)).To(BeFalse(), "another key")
	for _, bad := range []string{"", "v1:", seal[len("v1:"):], "v2:" + seal[len("v1:"):], seal + "A", "v1:!!!"} {
		g.Expect(s.Verify(record(), bad)).To(BeFalse(), "%q", bad)
	}
	_, err = NewSealer([]byte("short"))
	g.Expect(err).To(HaveOccurred())
}

// TestTheKeyringMakesTheKeyOnceAndKeepsIt: a missing key is made (32 random
// bytes) and read back; one made by another replica first is used; an
// unusable one is an error and is never replaced; a failed read is not
// retried for a minute.
func TestTheKeyringMakesTheKeyOnceAndKeepsIt(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "capo-sharednet-system", Name: KeySecret}
	t.Run("missing: made", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
		k := &Keyring{Reader: c, Writer: c, Namespace: key.Namespace}
		g.Expect(k.Start(ctx)).To(Succeed())
		secret := &corev1.Secret{}
		g.Expect(c.Get(ctx, key, secret)).To(Succeed())
		g.Expect(secret.Data[KeyField]).To(HaveLen(KeySize))
		g.Expect(secret.Data[KeyField]).NotTo(Equal(make([]byte, KeySize)))

		// Another process reads the same key: its seals verify here.
		other := &Keyring{Reader: c, Writer: c, Namespace: key.Namespace}
		a, err := k.Sealer(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := other.Sealer(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Verify(record(), a.Seal(record()))).To(BeTrue())
	})
	t.Run("made by another replica first", func(t *testing.T) {
		g := NewWithT(t)
		theirs := bytes.Repeat([]byte{9}, KeySize)
		backing := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
		reads := 0
		c := interceptor.NewClient(backing, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if reads++; reads == 1 {
					// Not there yet when read, there when made.
					if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{KeyField: theirs}}); err != nil {
						return err
					}
					return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		k := &Keyring{Reader: c, Writer: c, Namespace: key.Namespace}
		s, err := k.Sealer(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		want, _ := NewSealer(theirs)
		g.Expect(want.Verify(record(), s.Seal(record()))).To(BeTrue(), "the replica's key, not a second one")
	})
	t.Run("unusable: an error, never replaced", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: KeySecret}, Data: map[string][]byte{KeyField: []byte("short")}}).Build()
		k := &Keyring{Reader: c, Writer: c, Namespace: key.Namespace}
		_, err := k.Sealer(ctx)
		g.Expect(err).To(MatchError(And(ContainSubstring(KeySecret), ContainSubstring("delete the Secret"))))
		secret := &corev1.Secret{}
		g.Expect(c.Get(ctx, key, secret)).To(Succeed())
		g.Expect(string(secret.Data[KeyField])).To(Equal("short"))
	})
	t.Run("a failed read is the answer for a minute", func(t *testing.T) {
		g := NewWithT(t)
		reads := 0
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				reads++
				return errors.New("the API server is away")
			},
		}).Build()
		k := &Keyring{Reader: c, Writer: c, Namespace: key.Namespace}
		for range 3 {
			_, err := k.Sealer(ctx)
			g.Expect(err).To(HaveOccurred())
		}
		g.Expect(reads).To(Equal(1))
	})
}

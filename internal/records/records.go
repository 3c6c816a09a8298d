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

// Package records seals the extension's record of a share (an attachment's
// status.share) with a key only the extension holds, so that the detach can
// tell its own record from one anybody else wrote, whenever it was written:
// a record forged while nothing kept tenants from writing attachments stays
// unverifiable once something does.
package records

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

const (
	// KeySecret is the Secret, in the extension's namespace, that holds the
	// key; the manager creates it when it is missing.
	KeySecret = "capo-sharednet-record-key" //nolint:gosec // a Secret name, not a credential
	// KeyField is the key's entry in KeySecret's data.
	KeyField = "key"
	// KeySize is the key's length: 32 random bytes (crypto/rand).
	KeySize = 32

	// sealVersion prefixes every seal, so that another scheme (or key) can
	// be told apart later.
	sealVersion = "v1:"
	// domain separates these MACs from any other use of the key.
	domain = "capo-sharednet share record v1"
)

// Record is what decides an unshare: which attachment recorded a share of
// which network with which project.
type Record struct {
	Namespace, Name string
	UID             types.UID
	SharedNetwork   string
	NetworkID       string
	ProjectID       string
	RBACPolicyID    string
}

// Of is the record attachment a holds of its share on sn (a.Status.Share
// must be set).
func Of(a *sharednetv1.SharedNetworkAttachment, sn *sharednetv1.SharedNetwork) Record {
	return Record{
		Namespace: a.Namespace, Name: a.Name, UID: a.UID,
		SharedNetwork: sn.Name, NetworkID: sn.Spec.NetworkID,
		ProjectID: a.Status.Share.ProjectID, RBACPolicyID: a.Status.Share.RBACPolicyID,
	}
}

// Sealer seals records with one key.
type Sealer struct{ key []byte }

// NewSealer is the Sealer of key, which must be KeySize bytes.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the record key has %d bytes, not %d", len(key), KeySize)
	}
	return &Sealer{key: append([]byte(nil), key...)}, nil
}

// Sealer makes a Sealer its own Source (one fixed key).
func (s *Sealer) Sealer(context.Context) (*Sealer, error) { return s, nil }

// Seal is the seal of r: HMAC-SHA256 over its fields, each prefixed by its
// length (no two records share an encoding).
func (s *Sealer) Seal(r Record) string {
	return sealVersion + base64.RawURLEncoding.EncodeToString(s.mac(r))
}

// Verify says whether seal is this key's seal of r, in constant time.
func (s *Sealer) Verify(r Record, seal string) bool {
	encoded, ok := strings.CutPrefix(seal, sealVersion)
	if !ok {
		return false
	}
	sum, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return false
	}
	return hmac.Equal(sum, s.mac(r))
}

func (s *Sealer) mac(r Record) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, field := range []string{domain, r.Namespace, r.Name, string(r.UID), r.SharedNetwork, r.NetworkID, r.ProjectID, r.RBACPolicyID} {
		_ = binary.Write(m, binary.BigEndian, uint32(len(field)))
		_, _ = m.Write([]byte(field))
	}
	return m.Sum(nil)
}

// Source gives the Sealer of the extension's key.
type Source interface {
	Sealer(ctx context.Context) (*Sealer, error)
}

// keyRetry is how long a failed read of the key is the answer: a broken
// key costs one uncached read a minute, not one per reconcile.
const keyRetry = time.Minute

// Keyring is the Source of an installed extension: the key in Secret
// KeySecret of Namespace, read through Reader (the API reader: Secrets are
// never served from a cache here) and created with Writer, from crypto/rand,
// when it is missing. Once read the key is kept for the life of the
// process. A Secret without a KeySize-byte key is an error, never replaced:
// nothing is trusted until an administrator deletes it (the manager then
// makes a new key at its next read, at most a minute later).
//
// As a manager Runnable (leader only) it makes the key at start.
type Keyring struct {
	Reader    client.Reader
	Writer    client.Writer
	Namespace string

	mu       sync.Mutex
	sealer   *Sealer
	failure  error
	failedAt time.Time
}

// Start makes (or reads) the key when the manager starts; a failure is
// logged, not fatal: the records are then not trusted until it can be read.
func (k *Keyring) Start(ctx context.Context) error {
	if _, err := k.Sealer(ctx); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the key that seals the extension's share records cannot be read or made; no attachment's record is trusted until it can")
	}
	return nil
}

// Sealer implements Source.
func (k *Keyring) Sealer(ctx context.Context) (*Sealer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sealer != nil {
		return k.sealer, nil
	}
	if k.failure != nil && time.Since(k.failedAt) < keyRetry {
		return nil, k.failure
	}
	s, err := k.read(ctx)
	if err != nil {
		k.failure, k.failedAt = fmt.Errorf("the record key (Secret %s/%s): %w", k.Namespace, KeySecret, err), time.Now()
		return nil, k.failure
	}
	k.sealer, k.failure = s, nil
	return s, nil
}

func (k *Keyring) read(ctx context.Context) (*Sealer, error) {
	secret := &corev1.Secret{}
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: KeySecret}, secret)
	if apierrors.IsNotFound(err) {
		if err = k.create(ctx); apierrors.IsAlreadyExists(err) { // another replica made it first
			err = nil
		}
		if err == nil {
			err = k.Reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: KeySecret}, secret)
		}
	}
	if err != nil {
		return nil, err
	}
	s, err := NewSealer(secret.Data[KeyField])
	if err != nil {
		return nil, errors.Join(err, errors.New("delete the Secret: the manager makes a new key, and seals each attached nodegroup's record again once its cluster's project is verified"))
	}
	return s, nil
}

func (k *Keyring) create(ctx context.Context) error {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	return k.Writer.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: KeySecret,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "capo-sharednet"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KeyField: key},
	})
}

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

package preflight

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
)

// What one namespace's admissions may ask of the clouds: a tenant's dry
// runs (or a loop of them) make the VM project's Keystone validate tokens
// and its Neutron answer, with the VM credential. Past the budget an
// admission that needs the cloud is refused as cannot-verify (fail closed);
// the attachment controller's own questions are not counted.
const (
	// DefaultAdmissionsPerMinute refill a namespace's budget.
	DefaultAdmissionsPerMinute = 30
	// DefaultAdmissionBurst is the budget of a namespace that asked nothing
	// for a while: a Cluster with many nodegroups, or a few Clusters applied
	// at once.
	DefaultAdmissionBurst = 20
	// vouchedFor is how long the VM project's Keystone's answer about a
	// token is reused: the cluster's session keeps its token for hours, and
	// each admission would otherwise validate it again.
	vouchedFor = time.Minute
	// maxBudgets bounds the namespaces remembered; idle ones are forgotten first.
	maxBudgets = 4096
)

// budgets are the namespaces' admission budgets.
type budgets struct {
	mu     sync.Mutex
	limits map[string]*rate.Limiter
}

// take spends one cloud look of namespace's budget (perMin a minute, burst
// at once; the defaults when zero), or says why not.
func (b *budgets) take(namespace string, perMin, burst int, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if perMin <= 0 {
		perMin = DefaultAdmissionsPerMinute
	}
	if burst <= 0 {
		burst = DefaultAdmissionBurst
	}
	if b.limits == nil {
		b.limits = map[string]*rate.Limiter{}
	}
	l, ok := b.limits[namespace]
	if !ok {
		if len(b.limits) >= maxBudgets {
			b.forgetIdle(now)
		}
		l = rate.NewLimiter(rate.Limit(float64(perMin)/60), burst)
		b.limits[namespace] = l
	}
	if !l.AllowN(now, 1) {
		return fmt.Errorf("namespace %s has asked the cloud for more admissions than its budget (%d, then %d a minute); nothing was changed, retry in a few seconds",
			namespace, burst, perMin)
	}
	return nil
}

// forgetIdle drops the budgets that are full again (they decide nothing),
// or all of them when none is.
func (b *budgets) forgetIdle(now time.Time) {
	for ns, l := range b.limits {
		if l.TokensAt(now) >= float64(l.Burst()) {
			delete(b.limits, ns)
		}
	}
	if len(b.limits) >= maxBudgets {
		clear(b.limits)
	}
}

// vouches remembers the VM project's Keystone's answers about tokens for
// vouchedFor: a Voucher in front of the real one. Failures are not kept.
type vouches struct {
	mu      sync.Mutex
	answers map[[sha256.Size]byte]vouched
}

type vouched struct {
	project string
	at      time.Time
}

// cachedVoucher asks vm once per token per vouchedFor.
type cachedVoucher struct {
	credentials.Voucher
	cache *vouches
	now   time.Time
}

// ProjectOfToken implements credentials.Voucher.
func (v cachedVoucher) ProjectOfToken(ctx context.Context, token string) (string, error) {
	// Keyed by the VM project's Keystone and the token: never the token
	// itself in memory longer than the session holds it.
	key := sha256.Sum256([]byte(v.Keystone() + "\x00" + v.Region() + "\x00" + token))
	v.cache.mu.Lock()
	if a, ok := v.cache.answers[key]; ok && v.now.Sub(a.at) < vouchedFor {
		v.cache.mu.Unlock()
		return a.project, nil
	}
	v.cache.mu.Unlock()
	project, err := v.Voucher.ProjectOfToken(ctx, token)
	if err != nil {
		return "", err
	}
	v.cache.mu.Lock()
	defer v.cache.mu.Unlock()
	if v.cache.answers == nil || len(v.cache.answers) >= maxBudgets {
		v.cache.answers = map[[sha256.Size]byte]vouched{} // bounded: start again
	}
	v.cache.answers[key] = vouched{project: project, at: v.now}
	return project, nil
}

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

package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/quotas"
)

// PortQuota reads the cluster project's port quota and usage. Used with the
// cluster project's credential.
type PortQuota interface {
	Ports(ctx context.Context) (Quota, error)
}

// RBACPolicyQuota reads the VM project's quota of RBAC policies: every
// share takes one, across all the project's networks. Used with the VM
// project's credential.
type RBACPolicyQuota interface {
	// RBACPolicies is the quota and its usage; a *NotReadableError when the
	// cloud's policy does not let the credential read it.
	RBACPolicies(ctx context.Context) (Quota, error)
}

// NotReadableError says the cloud's policy does not let the credential
// read something (Neutron answered 403), or it does not exist there (404:
// no quota extension): asking again will not help.
type NotReadableError struct{ What string }

func (e *NotReadableError) Error() string { return e.What + ": not readable with this credential" }

// Quota is a limit and its usage; Limit -1 means unlimited.
type Quota struct {
	Limit, Used, Reserved int
}

// Free is what may still be created, or nil when unlimited.
func (q Quota) Free() *int {
	if q.Limit < 0 {
		return nil
	}
	free := max(q.Limit-q.Used-q.Reserved, 0)
	return &free
}

// Ports implements PortQuota.
func (s *Session) Ports(ctx context.Context) (Quota, error) {
	detail, err := s.quotaDetail(ctx, "the port quota")
	if err != nil {
		return Quota{}, err
	}
	return Quota{Limit: detail.Port.Limit, Used: detail.Port.Used, Reserved: detail.Port.Reserved}, nil
}

// RBACPolicies implements RBACPolicyQuota.
func (s *Session) RBACPolicies(ctx context.Context) (Quota, error) {
	const what = "the RBAC policy quota"
	detail, err := s.quotaDetail(ctx, what)
	if err != nil {
		return Quota{}, s.notReadable(err, what)
	}
	q := detail.RBACPolicy
	return Quota{Limit: q.Limit, Used: q.Used, Reserved: q.Reserved}, nil
}

// quotaDetail reads the session project's Neutron quotas with their usage.
func (s *Session) quotaDetail(ctx context.Context, what string) (*quotas.QuotaDetailSet, error) {
	var detail *quotas.QuotaDetailSet
	err := s.retry.do(ctx, func(ctx context.Context) (err error) {
		detail, err = quotas.GetDetail(ctx, s.network, s.projectID).Extract()
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "reading %s", what)
	}
	return detail, nil
}

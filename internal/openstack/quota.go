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
	var detail *quotas.QuotaDetailSet
	err := s.retry.do(ctx, func(ctx context.Context) (err error) {
		detail, err = quotas.GetDetail(ctx, s.network, s.projectID).Extract()
		return err
	})
	if err != nil {
		return Quota{}, s.wrap(err, "reading the port quota")
	}
	return Quota{Limit: detail.Port.Limit, Used: detail.Port.Used, Reserved: detail.Port.Reserved}, nil
}

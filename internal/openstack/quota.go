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

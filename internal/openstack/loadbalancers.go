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
	"errors"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
)

// LoadBalancers finds and removes Octavia load balancers with their VIP on a
// shared subnet. Used with the cluster project's credential.
type LoadBalancers interface {
	OnSubnet(ctx context.Context, subnetID string) ([]LoadBalancer, error)
	// DeleteCascade asks Octavia to delete the LB with its listeners and pools.
	DeleteCascade(ctx context.Context, id string) error
}

// LoadBalancer is one Octavia load balancer. Whose it is comes from its name
// and tags (internal/ccm), never from the project alone: several clusters
// may share a project.
type LoadBalancer struct {
	ID, Name, VIP, Status string
	Tags                  []string
}

// loadBalancer is what the extension reads of an Octavia load balancer
// (see subnet).
type loadBalancer struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	VipAddress         string   `json:"vip_address"`
	VipSubnetID        string   `json:"vip_subnet_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	Tags               []string `json:"tags"`
}

// OnSubnet implements LoadBalancers.
func (s *Session) OnSubnet(ctx context.Context, subnetID string) ([]LoadBalancer, error) {
	if s.lb == nil {
		return nil, fmt.Errorf("project %s: listing load balancers: %w", s.projectID, errNoLoadBalancer)
	}
	var all []loadBalancer
	err := s.retry.do(ctx, func(ctx context.Context) error {
		query, err := loadbalancers.ListOpts{VipSubnetID: subnetID, ProjectID: s.projectID}.ToLoadBalancerListQuery()
		if err != nil {
			return err
		}
		all, err = listAll[loadBalancer](ctx, s.lb, s.lb.ServiceURL("lbaas", "loadbalancers")+query, "loadbalancers")
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "listing load balancers on subnet %s", subnetID)
	}
	out := make([]LoadBalancer, 0, len(all))
	for _, lb := range all {
		if lb.VipSubnetID != subnetID {
			continue
		}
		out = append(out, LoadBalancer{ID: lb.ID, Name: lb.Name, VIP: lb.VipAddress, Status: lb.ProvisioningStatus, Tags: lb.Tags})
	}
	return out, nil
}

// DeleteCascade implements LoadBalancers. Already gone is success; an LB busy
// with another change (409 while PENDING_*, e.g. already being deleted) is a
// *BusyError: "retry later", never a failure.
func (s *Session) DeleteCascade(ctx context.Context, id string) error {
	if s.lb == nil {
		return fmt.Errorf("project %s: deleting load balancer %s: %w", s.projectID, id, errNoLoadBalancer)
	}
	err := s.retry.do(ctx, func(ctx context.Context) error {
		return loadbalancers.Delete(ctx, s.lb, id, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
	})
	switch {
	case err == nil, gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return nil
	case gophercloud.ResponseCodeIs(err, http.StatusConflict):
		return &BusyError{ID: id}
	}
	return s.wrap(err, "deleting load balancer %s (cascade)", id)
}

// BusyError is Octavia refusing a change because the load balancer is in a
// PENDING_* state (409): ask again later.
type BusyError struct{ ID string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("load balancer %s is busy with another change (PENDING_*): retry later", e.ID)
}

// IsBusy says whether err is a *BusyError.
func IsBusy(err error) bool {
	var busy *BusyError
	return errors.As(err, &busy)
}

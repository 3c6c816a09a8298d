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
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/rbacpolicies"
)

// Sharer shares a VM-project network with a cluster's project (a Neutron RBAC
// policy access_as_shared) and unshares it. Used with the VM project's credential.
type Sharer interface {
	// Share finds or creates the policy for (network, project); it never
	// creates a second one, even when an earlier answer was lost.
	Share(ctx context.Context, networkID, projectID string) (policyID string, err error)
	// FindShare returns the policy for (network, project), or "" when none.
	FindShare(ctx context.Context, networkID, projectID string) (string, error)
	// Shares are every access_as_shared policy of the network, by target project.
	Shares(ctx context.Context, networkID string) (map[string]string, error)
	// Unshare deletes the policy. While the project still has ports on the
	// network Neutron refuses (409): that is an *InUseError, never success.
	Unshare(ctx context.Context, policyID string) error
}

// InUseError is Neutron refusing an unshare because the project still has
// ports (nodes, load balancer VIPs) on the network.
type InUseError struct {
	PolicyID string
	Answer   string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("RBAC policy %s is still in use (ports of the project remain on the network): %s", e.PolicyID, e.Answer)
}

// OverQuotaError is Neutron refusing a share because the VM project has
// used its quota of RBAC policies (409 OverQuota): asking again will not
// help until someone raises the quota or unshares.
type OverQuotaError struct{ Err error }

func (e *OverQuotaError) Error() string { return e.Err.Error() }
func (e *OverQuotaError) Unwrap() error { return e.Err }

// overQuota tells Neutron's quota refusal from its other conflicts.
func overQuota(err error) bool {
	var unexpected gophercloud.ErrUnexpectedResponseCode
	return errors.As(err, &unexpected) && unexpected.Actual == http.StatusConflict && strings.Contains(string(unexpected.Body), "OverQuota")
}

// IsInUse says whether err is an *InUseError.
func IsInUse(err error) bool {
	var inUse *InUseError
	return errors.As(err, &inUse)
}

// FindShare implements Sharer.
func (s *Session) FindShare(ctx context.Context, networkID, projectID string) (string, error) {
	shares, err := s.listShares(ctx, networkID, projectID)
	return shares[projectID], err
}

// Shares implements Sharer.
func (s *Session) Shares(ctx context.Context, networkID string) (map[string]string, error) {
	return s.listShares(ctx, networkID, "")
}

func (s *Session) listShares(ctx context.Context, networkID, projectID string) (map[string]string, error) {
	var found []rbacpolicies.RBACPolicy
	err := s.retry.do(ctx, func(ctx context.Context) error {
		query, err := rbacpolicies.ListOpts{
			ObjectType: "network", ObjectID: networkID, Action: rbacpolicies.ActionAccessShared, TargetTenant: projectID,
		}.ToRBACPolicyListQuery()
		if err != nil {
			return err
		}
		found, err = listAll[rbacpolicies.RBACPolicy](ctx, s.network, s.network.ServiceURL("rbac-policies")+query, "rbac_policies")
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "listing shares of network %s", networkID)
	}
	out := map[string]string{}
	for _, p := range found {
		// Filter again: a server ignoring a query parameter must not make us
		// believe in a share that is not there.
		if p.ObjectID == networkID && p.Action == rbacpolicies.ActionAccessShared && (projectID == "" || p.TargetTenant == projectID) {
			out[p.TargetTenant] = p.ID
		}
	}
	return out, nil
}

// Share implements Sharer. It creates first: an attach's share is new
// almost always, and this request is on the path to the nodegroup's
// rollout. Neutron refuses a duplicate policy (409), and a create whose
// answer was lost may have been made: both are then looked up instead of
// made twice. A quota refusal is looked up too (Neutron counts the quota
// before it finds the duplicate), so a share that exists is never reported
// over quota.
func (s *Session) Share(ctx context.Context, networkID, projectID string) (string, error) {
	var lastErr error
	for range s.retry.attempts {
		policy, err := rbacpolicies.Create(ctx, s.network, rbacpolicies.CreateOpts{
			ObjectType: "network", ObjectID: networkID, Action: rbacpolicies.ActionAccessShared, TargetTenant: projectID,
		}).Extract()
		if err == nil {
			return policy.ID, nil
		}
		if !transient(err) && !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			return "", s.wrap(err, "sharing network %s with project %s", networkID, projectID)
		}
		id, findErr := s.FindShare(ctx, networkID, projectID)
		if findErr != nil {
			if overQuota(err) { // the refusal says what to do; the lookup why it is not sure
				return "", &OverQuotaError{Err: errors.Join(s.wrap(err, "sharing network %s with project %s", networkID, projectID), findErr)}
			}
			return "", findErr
		}
		if id != "" {
			return id, nil
		}
		if overQuota(err) {
			return "", &OverQuotaError{Err: s.wrap(err, "sharing network %s with project %s", networkID, projectID)}
		}
		lastErr = err
	}
	return "", s.wrap(lastErr, "sharing network %s with project %s", networkID, projectID)
}

// Unshare implements Sharer. A policy already gone is success: deleting by
// its ID can only ever delete that policy.
func (s *Session) Unshare(ctx context.Context, policyID string) error {
	err := s.retry.do(ctx, func(ctx context.Context) error {
		return rbacpolicies.Delete(ctx, s.network, policyID).ExtractErr()
	})
	switch {
	case err == nil, gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return nil
	case gophercloud.ResponseCodeIs(err, http.StatusConflict):
		var unexpected gophercloud.ErrUnexpectedResponseCode
		_ = errors.As(err, &unexpected)
		return &InUseError{PolicyID: policyID, Answer: string(unexpected.Body)}
	default:
		return s.wrap(err, "unsharing (deleting RBAC policy %s)", policyID)
	}
}

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

// Package fakecloud is an in-memory OpenStack, a FAKE for fast tests: it
// implements the narrow interfaces of internal/openstack (ClusterCloud,
// VMCloud) and credentials.Clouds over one shared state, with fault
// injection. It models only what the extension's decisions depend on:
// projects and their Keystone, networks and subnets, RBAC shares (409 while
// the project has ports), ports with their subnets, security groups and
// port security, security group rules, and load balancers with their
// names, tags and provisioning status. The real behaviour is proven on the
// test bed (hack/openstack-testbed).
package fakecloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// DefaultKeystone is the Keystone every project authenticates at unless a
// Project says otherwise.
const DefaultKeystone = "http://127.0.0.1:5000/"

// Cloud is the shared state of the fake.
type Cloud struct {
	mu       sync.Mutex
	networks map[string]*network
	shares   map[string]share // by policy ID
	lbs      map[string]*openstack.LoadBalancer
	lbSubnet map[string]string
	ports    map[string][]port // by project
	nextID   int

	// Calls counts every call by method name.
	Calls map[string]int
	// Fail, when set, is asked before every call; a non-nil answer is
	// returned as that call's error (fault injection).
	Fail func(method string) error
}

type network struct {
	openstack.Network
	subnets []openstack.Subnet
}

type share struct{ network, project string }

// port is a port of the fake: the project's index-th, on network.
type port struct {
	openstack.Port
	network string
}

// New returns an empty cloud.
func New() *Cloud {
	return &Cloud{networks: map[string]*network{}, shares: map[string]share{}, lbs: map[string]*openstack.LoadBalancer{},
		lbSubnet: map[string]string{}, ports: map[string][]port{}, Calls: map[string]int{}}
}

func (c *Cloud) call(method string) error {
	c.mu.Lock()
	c.Calls[method]++
	fail := c.Fail
	c.mu.Unlock()
	if fail != nil {
		return fail(method)
	}
	return nil
}

// enter counts a call, injects its fault, and locks the state; the caller
// defers the unlock.
func (c *Cloud) enter(method string) (unlock func(), err error) {
	if err := c.call(method); err != nil {
		return nil, err
	}
	c.mu.Lock()
	return c.mu.Unlock, nil
}

// findShare is the policy of (network, project), or "".
func (c *Cloud) findShare(networkID, projectID string) string {
	for id, s := range c.shares {
		if s.network == networkID && s.project == projectID {
			return id
		}
	}
	return ""
}

func (c *Cloud) id(kind string) string {
	c.nextID++
	return fmt.Sprintf("%s-%d", kind, c.nextID)
}

// AddNetwork adds a network owned by project with one subnet of cidr.
func (c *Cloud) AddNetwork(project string, mtu int, cidr string) (networkID, subnetID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := netip.MustParsePrefix(cidr)
	n := &network{Network: openstack.Network{ID: c.id("net"), ProjectID: project, MTU: mtu}}
	s := openstack.Subnet{ID: c.id("subnet"), NetworkID: n.ID, CIDR: p, IPVersion: 4,
		AllocationPools: []openstack.Pool{{Start: p.Addr().Next(), End: lastAddr(p)}}}
	n.SubnetIDs = []string{s.ID}
	n.subnets = []openstack.Subnet{s}
	c.networks[n.ID] = n
	return n.ID, s.ID
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	for next := a.Next(); next.IsValid() && p.Contains(next.Next()); next = next.Next() {
		a = next
	}
	return a
}

// AddLoadBalancer adds a load balancer of project with its VIP on subnet.
func (c *Cloud) AddLoadBalancer(subnet, name string, tags ...string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.id("lb")
	c.lbs[id] = &openstack.LoadBalancer{ID: id, Name: name, VIP: "192.0.2.1", Status: "ACTIVE", Tags: tags}
	c.lbSubnet[id] = subnet
	return id
}

// SetLoadBalancerStatus sets a load balancer's provisioning status.
func (c *Cloud) SetLoadBalancerStatus(id, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lbs[id].Status = status
}

// LoadBalancerIDs are the load balancers that exist, sorted.
func (c *Cloud) LoadBalancerIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.lbs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// AddPort gives project a port on a network (Neutron then keeps its share).
func (c *Cloud) AddPort(project, networkID string) {
	c.AddSubnetPort(networkID, openstack.Port{ProjectID: project})
}

// AddSubnetPort gives p.ProjectID a port on a network with p's fixed IPs'
// subnets, device owner, security groups and port security, and returns
// its ID (port-<project>-<n>, or p.ID when set).
func (c *Cloud) AddSubnetPort(networkID string, p openstack.Port) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.ID == "" {
		p.ID = fmt.Sprintf("port-%s-%d", p.ProjectID, len(c.ports[p.ProjectID]))
	}
	c.ports[p.ProjectID] = append(c.ports[p.ProjectID], port{Port: p, network: networkID})
	return p.ID
}

// Shares are (network, project) pairs shared, by policy ID.
func (c *Cloud) Shares() map[string][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][2]string{}
	for id, s := range c.shares {
		out[id] = [2]string{s.network, s.project}
	}
	return out
}

// DeleteShare removes a policy behind the extension's back.
func (c *Cloud) DeleteShare(policy string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.shares, policy)
}

// Project is one credential's view of the cloud: a session of that project.
type Project struct {
	Cloud *Cloud
	ID    string
	// KeystoneURL and RegionName are where it authenticated; DefaultKeystone
	// and "" when empty.
	KeystoneURL, RegionName string
	// TokenProject is the project Keystone says its token is for; ID when empty
	// (a Keystone that lies in its answer makes them differ).
	TokenProject string
	// OpenStackCluster is what ForCluster returns for the cluster (an empty
	// one when nil: no cluster network yet).
	OpenStackCluster *infrav1.OpenStackCluster
	// PortQuota is the project's port quota; unlimited when nil.
	PortQuota *openstack.Quota
	// SecurityGroupRules are the project's ingress security group rules,
	// of all its groups (IngressRules answers those of the groups asked).
	SecurityGroupRules []openstack.IngressRule
	// SecurityGroupRulesHidden: the cloud's policy does not let the project
	// list its security group rules.
	SecurityGroupRulesHidden bool
	// PortsHidden: the cloud's policy does not let the project list its
	// ports on a subnet (PortsOnSubnets).
	PortsHidden bool
	// RBACPolicyLimit is the project's quota of RBAC policies (each share
	// made with its credential uses one, as in Neutron); unlimited when nil.
	RBACPolicyLimit *int
	// RBACPolicyQuotaHidden: the cloud's policy does not let the project
	// read its quota.
	RBACPolicyQuotaHidden bool
}

var (
	_ openstack.ClusterCloud = &Project{}
	_ openstack.VMCloud      = &Project{}
)

// ProjectID implements openstack.Identity.
func (p *Project) ProjectID() string { return p.ID }

// Keystone implements openstack.Identity.
func (p *Project) Keystone() string {
	if p.KeystoneURL == "" {
		return DefaultKeystone
	}
	return p.KeystoneURL
}

// Region implements openstack.Identity.
func (p *Project) Region() string { return p.RegionName }

// Token implements openstack.Identity.
func (p *Project) Token() string {
	if p.TokenProject != "" {
		return "token-of-" + p.TokenProject
	}
	return "token-of-" + p.ID
}

// ProjectOfToken implements openstack.VMCloud.
func (p *Project) ProjectOfToken(_ context.Context, token string) (string, error) {
	if err := p.Cloud.call("ProjectOfToken"); err != nil {
		return "", err
	}
	project, ok := strings.CutPrefix(token, "token-of-")
	if !ok {
		return "", errors.New("401 the token is not valid")
	}
	return project, nil
}

// Network implements openstack.NetworkFacts.
func (p *Project) Network(_ context.Context, id string) (openstack.Network, error) {
	unlock, err := p.Cloud.enter("Network")
	if err != nil {
		return openstack.Network{}, err
	}
	defer unlock()
	if n, ok := p.Cloud.networks[id]; ok && p.visible(n) {
		return n.Network, nil
	}
	return openstack.Network{}, &openstack.NotFoundError{What: "network " + id}
}

// visible: own networks and networks shared with the project.
func (p *Project) visible(n *network) bool {
	if n.ProjectID == p.ID {
		return true
	}
	for _, s := range p.Cloud.shares {
		if s.network == n.ID && s.project == p.ID {
			return true
		}
	}
	return false
}

// Subnets implements openstack.NetworkFacts.
func (p *Project) Subnets(_ context.Context, networkID string) ([]openstack.Subnet, error) {
	unlock, err := p.Cloud.enter("Subnets")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if n, ok := p.Cloud.networks[networkID]; ok && p.visible(n) {
		return append([]openstack.Subnet(nil), n.subnets...), nil
	}
	return nil, nil
}

// AddressesOnNetwork implements openstack.NetworkFacts (the fake holds no addresses).
func (p *Project) AddressesOnNetwork(context.Context, string) (map[string]openstack.Addresses, error) {
	return map[string]openstack.Addresses{}, p.Cloud.call("AddressesOnNetwork")
}

// RBACPolicies implements openstack.RBACPolicyQuota: every share of the
// cloud counts (the fake has one VM project).
func (p *Project) RBACPolicies(context.Context) (openstack.Quota, error) {
	unlock, err := p.Cloud.enter("RBACPolicies")
	if err != nil {
		return openstack.Quota{}, err
	}
	defer unlock()
	if p.RBACPolicyQuotaHidden {
		return openstack.Quota{}, &openstack.NotReadableError{What: "the RBAC policy quota"}
	}
	return openstack.Quota{Limit: ptr.Deref(p.RBACPolicyLimit, -1), Used: len(p.Cloud.shares)}, nil
}

// Ports implements openstack.PortQuota: PortQuota, unlimited when nil.
func (p *Project) Ports(context.Context) (openstack.Quota, error) {
	if p.PortQuota != nil {
		return *p.PortQuota, p.Cloud.call("Ports")
	}
	return openstack.Quota{Limit: -1}, p.Cloud.call("Ports")
}

// OnSubnet implements openstack.LoadBalancers: the project's LBs on the
// subnet (the fake keeps one project's LBs; tests use one cluster project
// per Cloud for load balancers).
func (p *Project) OnSubnet(_ context.Context, subnetID string) ([]openstack.LoadBalancer, error) {
	unlock, err := p.Cloud.enter("OnSubnet")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []openstack.LoadBalancer
	for id, lb := range p.Cloud.lbs {
		if p.Cloud.lbSubnet[id] == subnetID {
			out = append(out, *lb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteCascade implements openstack.LoadBalancers: the LB goes to
// PENDING_DELETE and is gone from OnSubnet after Settle.
func (p *Project) DeleteCascade(_ context.Context, id string) error {
	unlock, err := p.Cloud.enter("DeleteCascade")
	if err != nil {
		return err
	}
	defer unlock()
	lb, ok := p.Cloud.lbs[id]
	if !ok {
		return nil
	}
	if lb.Status != "ACTIVE" && lb.Status != "ERROR" {
		return &openstack.BusyError{ID: id}
	}
	lb.Status = "PENDING_DELETE"
	return nil
}

// Settle finishes every pending deletion (Octavia's worker, done).
func (c *Cloud) Settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, lb := range c.lbs {
		if lb.Status == "PENDING_DELETE" {
			delete(c.lbs, id)
		}
	}
}

// Share implements openstack.Sharer.
func (p *Project) Share(ctx context.Context, networkID, projectID string) (string, error) {
	unlock, err := p.Cloud.enter("Share")
	if err != nil {
		return "", err
	}
	defer unlock()
	if id := p.Cloud.findShare(networkID, projectID); id != "" {
		return id, nil
	}
	if p.RBACPolicyLimit != nil && len(p.Cloud.shares) >= *p.RBACPolicyLimit {
		return "", &openstack.OverQuotaError{Err: fmt.Errorf("project %s: sharing network %s: OpenStack answered 409 {\"NeutronError\": {\"type\": \"OverQuota\"}}", p.ID, networkID)}
	}
	id := p.Cloud.id("rbac")
	p.Cloud.shares[id] = share{network: networkID, project: projectID}
	return id, nil
}

// FindShare implements openstack.Sharer.
func (p *Project) FindShare(_ context.Context, networkID, projectID string) (string, error) {
	unlock, err := p.Cloud.enter("FindShare")
	if err != nil {
		return "", err
	}
	defer unlock()
	return p.Cloud.findShare(networkID, projectID), nil
}

// Shares implements openstack.Sharer.
func (p *Project) Shares(_ context.Context, networkID string) (map[string]string, error) {
	unlock, err := p.Cloud.enter("Shares")
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := map[string]string{}
	for id, s := range p.Cloud.shares {
		if s.network == networkID {
			out[s.project] = id
		}
	}
	return out, nil
}

// Unshare implements openstack.Sharer: 409 while the project has ports on the network.
func (p *Project) Unshare(_ context.Context, policyID string) error {
	unlock, err := p.Cloud.enter("Unshare")
	if err != nil {
		return err
	}
	defer unlock()
	s, ok := p.Cloud.shares[policyID]
	if !ok {
		return nil
	}
	for _, port := range p.Cloud.ports[s.project] {
		if port.network == s.network {
			return &openstack.InUseError{PolicyID: policyID, Answer: "RbacPolicyInUse"}
		}
	}
	delete(p.Cloud.shares, policyID)
	return nil
}

// PortIDsOnNetwork implements openstack.ProjectPorts.
func (p *Project) PortIDsOnNetwork(_ context.Context, networkID string) ([]string, error) {
	unlock, err := p.Cloud.enter("PortIDsOnNetwork")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var ids []string
	for _, port := range p.Cloud.ports[p.ID] {
		if port.network == networkID {
			ids = append(ids, port.ID)
		}
	}
	return ids, nil
}

// PortsOnSubnets implements openstack.SecurityGroups: the project's ports
// on the network with a fixed IP on one of the subnets, or a
// *NotReadableError when PortsHidden.
func (p *Project) PortsOnSubnets(_ context.Context, networkID string, subnetIDs []string) ([]openstack.Port, error) {
	unlock, err := p.Cloud.enter("PortsOnSubnets")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if p.PortsHidden {
		return nil, &openstack.NotReadableError{What: "the project's ports on the shared subnets"}
	}
	var out []openstack.Port
	for _, port := range p.Cloud.ports[p.ID] {
		if port.network == networkID && slices.ContainsFunc(port.SubnetIDs, func(s string) bool { return slices.Contains(subnetIDs, s) }) {
			out = append(out, port.Port)
		}
	}
	return out, nil
}

// IngressRules implements openstack.SecurityGroups: the SecurityGroupRules
// of groupIDs (no call without groups), or a *NotReadableError when
// SecurityGroupRulesHidden.
func (p *Project) IngressRules(_ context.Context, groupIDs []string) ([]openstack.IngressRule, error) {
	if len(groupIDs) == 0 {
		return nil, nil
	}
	if err := p.Cloud.call("IngressRules"); err != nil {
		return nil, err
	}
	if p.SecurityGroupRulesHidden {
		return nil, &openstack.NotReadableError{What: "the ingress security group rules"}
	}
	var out []openstack.IngressRule
	for _, r := range p.SecurityGroupRules {
		if slices.Contains(groupIDs, r.SecurityGroupID) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Clouds is a fake credentials.Clouds: each Cluster (by namespace/name) and
// SharedNetwork (by name) maps to a Project.
type Clouds struct {
	Clusters       map[string]*Project
	SharedNetworks map[string]*Project
	// ClusterErr, when set, is returned for every cluster (a project that
	// cannot be reached).
	ClusterErr error
}

// ForCluster implements credentials.Clouds.
func (c *Clouds) ForCluster(_ context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	if c.ClusterErr != nil {
		return nil, nil, c.ClusterErr
	}
	p, ok := c.Clusters[cluster.Namespace+"/"+cluster.Name]
	if !ok {
		return nil, nil, fmt.Errorf("fakecloud: no project for cluster %s/%s", cluster.Namespace, cluster.Name)
	}
	if p.OpenStackCluster != nil {
		return p, p.OpenStackCluster, nil
	}
	return p, &infrav1.OpenStackCluster{}, nil
}

// ForSharedNetwork implements credentials.Clouds.
func (c *Clouds) ForSharedNetwork(_ context.Context, sn *sharednetv1.SharedNetwork) (openstack.VMCloud, error) {
	p, ok := c.SharedNetworks[sn.Name]
	if !ok {
		return nil, fmt.Errorf("fakecloud: no VM project for SharedNetwork %s", sn.Name)
	}
	return p, nil
}

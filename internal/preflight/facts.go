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
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/networkfacts"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// Resolution is what a `sharedNetwork` value names for a cluster's
// namespace, read from the cache: the SharedNetwork, the subnet and the
// grant. GeneratePatches and the attachment controller act on it; a
// question reuses it.
type Resolution struct {
	// SharedNetwork is nil when none has the value's name.
	SharedNetwork *sharednetv1.SharedNetwork
	// Subnet is the subnet the value uses on the SharedNetwork's facts;
	// "" when the one-subnet rule refuses (NoSubnet says why).
	Subnet   string
	NoSubnet *rules.Violation
	// NamespaceLabels are the labels grants select on.
	NamespaceLabels map[string]string
	// NotGranted says why the namespace may not use the subnet; nil when
	// it may.
	NotGranted *rules.Violation
}

// Granted says whether the namespace may use the value's subnet now.
func (r Resolution) Granted() bool { return r.SharedNetwork != nil && r.NotGranted == nil }

// Resolve reads what value names for the clusters of namespace. An error
// is an object that could not be read.
func (c *Checker) Resolve(ctx context.Context, namespace string, value sharednetv1.SharedNetworkVariable) (Resolution, error) {
	return c.resolve(ctx, namespace, value, true)
}

// resolve reads the value's SharedNetwork and subnet and, withGrant, the
// namespace's grant.
func (c *Checker) resolve(ctx context.Context, namespace string, value sharednetv1.SharedNetworkVariable, withGrant bool) (Resolution, error) {
	var r Resolution
	sn := &sharednetv1.SharedNetwork{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: value.Name}, sn); err != nil {
		if apierrors.IsNotFound(err) {
			return r, nil
		}
		return r, fmt.Errorf("reading SharedNetwork %s: %w", value.Name, err)
	}
	r.SharedNetwork = sn
	r.Subnet, r.NoSubnet = rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
	if !withGrant {
		return r, nil
	}
	ns := &corev1.Namespace{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return r, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	r.NamespaceLabels = ns.Labels
	subnet := value.Subnet
	if subnet == "" {
		subnet = r.Subnet // chosen among the allowed ones
	}
	r.NotGranted = rules.Granted(sn.Name, sn.Spec.NamespaceSelector, namespace, ns.Labels, sn.Spec.Subnets, subnet)
	return r, nil
}

// gathering is one question's facts as they are gathered.
type gathering struct {
	q     Question
	facts Fact
	n     rules.Nodegroup
	res   *Resolution
	// subnet is the subnet judged, on the network facts judged (status).
	subnet  string
	status  *sharednetv1.SharedNetworkStatus
	network *clusterNetwork // read once, when first needed
	// The cluster's project, opened once per question.
	opened  bool
	cloud   openstack.ClusterCloud
	osc     *infrav1.OpenStackCluster
	openErr error
	project string
	waiting string
	skipped bool
	spent   bool // the namespace's budget paid for this question's cloud looks
}

// spend takes one look at the clouds (the cluster's project, or the VM
// project's Neutron for stale facts) from the namespace's budget when an
// admission asks; the controller's own questions follow what was admitted
// and are not counted. Refused past the budget: cannot-verify.
func (c *Checker) spend(g *gathering) string {
	if g.spent || g.q.Ask != Attach && g.q.Ask != Grow && g.q.Ask != Detach {
		return ""
	}
	g.spent = true
	if err := c.budgets.take(g.q.Cluster.Namespace, c.AdmissionsPerMinute, c.AdmissionBurst, c.now()); err != nil {
		return err.Error()
	}
	return ""
}

// gather runs the gatherers of q's facts in order.
func (c *Checker) gather(ctx context.Context, q Question) (*gathering, error) {
	need := needs[q.Ask]
	g := &gathering{q: q, facts: need.facts, res: q.Resolved, n: rules.Nodegroup{Name: q.Nodegroup, Check: need.check,
		Namespace: q.Cluster.Namespace, Cluster: q.Cluster.Name, SharedNetwork: q.Value.Name, Subnet: q.Value.Subnet}}
	if need.facts&(Grant|NetworkStatus|NetworkCurrent|NetworkIfCurrent) != 0 {
		if g.res == nil {
			res, err := c.resolve(ctx, q.Cluster.Namespace, q.Value, need.facts&Grant != 0)
			if err != nil {
				return g, err
			}
			g.res = &res
		}
		if g.res.SharedNetwork == nil {
			// The granted rule refuses it (as not offered); a cloud that changed
			// under an attached nodegroup is not this rule's business.
			g.skipped = q.Ask == StillFits
			return g, nil
		}
	}
	for _, step := range gatherers {
		if step.facts&need.facts == 0 {
			continue
		}
		more, err := step.gather(c, ctx, g)
		if err != nil || !more {
			return g, err
		}
	}
	return g, nil
}

// decision is what the gathering found, before the rules run.
func (g *gathering) decision() Decision {
	d := Decision{Facts: g.n, Project: g.project, Waiting: g.waiting, Skipped: g.skipped}
	if g.res != nil {
		d.Resolution = *g.res
	}
	if g.subnet != "" {
		d.Subnet = g.subnet
	}
	return d
}

// clusterNetworkMade waits for the cluster network CAPO makes.
func (c *Checker) clusterNetworkMade(ctx context.Context, g *gathering) (bool, error) {
	network, err := c.clusterNetwork(ctx, g)
	if err != nil {
		return false, err
	}
	if network.osc == nil || network.osc.Status.Network == nil || network.osc.Status.Network.ID == "" || g.q.Cluster.Spec.InfrastructureRef.Name == "" {
		g.waiting = fmt.Sprintf("waiting for CAPO to create the cluster network (OpenStackCluster of cluster %s) before the rules can be checked", g.q.Cluster.Name)
		return false, nil
	}
	return true, nil
}

// grant records the grant; nothing else of a network the namespace may
// not use is looked at (not even its subnets' CIDRs in a message).
func (c *Checker) grant(_ context.Context, g *gathering) (bool, error) {
	sn := g.res.SharedNetwork
	g.n.NamespaceLabels = g.res.NamespaceLabels
	g.n.Network = &rules.Network{Name: sn.Name, NamespaceSelector: sn.Spec.NamespaceSelector, AllowedSubnets: sn.Spec.Subnets}
	return g.res.NotGranted == nil, nil
}

// network records the SharedNetwork's facts and the subnet the nodegroup
// uses on them.
func (c *Checker) network(ctx context.Context, g *gathering) (bool, error) {
	sn := g.res.SharedNetwork
	status := &sn.Status
	switch {
	case g.facts&NetworkCurrent != 0:
		if !c.fresh(sn) {
			if g.n.CannotVerify = c.spend(g); g.n.CannotVerify != "" {
				return false, nil
			}
		}
		if status, g.n.CannotVerify = c.statusFor(ctx, sn); g.n.CannotVerify != "" {
			return false, nil
		}
	case g.facts&NetworkIfCurrent != 0 && !c.fresh(sn):
		g.skipped = true // stale facts are not judged
		return false, nil
	}
	if g.n.Network, g.n.CannotVerify = networkOf(sn, status); g.n.CannotVerify != "" {
		return false, nil
	}
	if len(status.Subnets) == 0 {
		g.n.CannotVerify = fmt.Sprintf("facts of SharedNetwork %s are not known yet (its controller has not read them from Neutron: see `kubectl get sharednetwork %s`); nothing was changed, retry when it is Ready", sn.Name, sn.Name)
		return false, nil
	}
	subnet, v := rules.OneSubnet(sn.Name, status.SubnetIDs(), sn.Spec.Subnets, g.n.Subnet)
	g.subnet, g.status = subnet, status
	return v == nil, nil // the rules report v
}

// networkOf is what the rules know of a SharedNetwork with status.
func networkOf(sn *sharednetv1.SharedNetwork, status *sharednetv1.SharedNetworkStatus) (*rules.Network, string) {
	nw := &rules.Network{Name: sn.Name, NamespaceSelector: sn.Spec.NamespaceSelector, AllowedSubnets: sn.Spec.Subnets, MTU: int(status.MTU)}
	for _, s := range status.Subnets {
		cidr, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return nw, fmt.Sprintf("SharedNetwork %s status: subnet %s has CIDR %q (%v); nothing was changed, retry when its controller has read it again", sn.Name, s.ID, s.CIDR, err)
		}
		nw.Subnets = append(nw.Subnets, rules.Subnet{ID: s.ID, CIDR: cidr, FreeAddresses: int(ptr.Deref(s.FreeAddresses, 0)),
			KeptForLoadBalancers: sn.Spec.KeptForLoadBalancers(s.ID)})
	}
	return nw, ""
}

// statusFor is the SharedNetwork's facts to decide on: its status when it
// is Ready, for its current spec, and refreshed within MaxFactAge;
// otherwise Neutron's answer now, with the VM project's credential and
// bounded by CloudTimeout. A decision is never made on stale facts: when
// Neutron cannot be asked either, the second result says why.
func (c *Checker) statusFor(ctx context.Context, sn *sharednetv1.SharedNetwork) (*sharednetv1.SharedNetworkStatus, string) {
	if c.fresh(sn) {
		return &sn.Status, ""
	}
	cannotVerify := fmt.Sprintf("the facts of SharedNetwork %s are not current (see `kubectl get sharednetwork %s`) and its network cannot be read right now; nothing was changed, retry later", sn.Name, sn.Name)
	if c.Cloud == nil {
		return nil, cannotVerify
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	vm, err := c.Cloud.ForSharedNetwork(ctx, sn)
	if err == nil {
		var facts sharednetv1.SharedNetworkStatus
		facts, err = networkfacts.Read(ctx, vm, sn)
		var notOnNetwork *networkfacts.SubnetsNotOnNetworkError
		if err == nil || errors.As(err, &notOnNetwork) {
			return &facts, ""
		}
	}
	// The VM project's errors are the administrator's, not the tenant's.
	ctrl.LoggerFrom(ctx).Info("reading a SharedNetwork's facts for a decision", "sharedNetwork", sn.Name, "error", err.Error())
	return nil, cannotVerify
}

// openCluster opens the cluster's project once per question.
func (c *Checker) openCluster(ctx context.Context, g *gathering) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	if !g.opened {
		g.cloud, g.osc, g.openErr = credentials.In(ctx, c.Cloud).ForCluster(ctx, g.q.Cluster)
		g.opened = true
	}
	return g.cloud, g.osc, g.openErr
}

// clusterProject asks the cluster's project, with a short timeout, for
// what only it knows: that the SharedNetwork's Keystone vouches for it,
// its network's MTU and its port quota. A cluster whose OpenStackCluster
// does not exist yet (it is being created) has no project to ask: the
// MTU it asks for is judged, and the attachment controller asks before it
// shares. A project that cannot be asked, or belongs to another cloud,
// ends the gathering: an unchecked change is never admitted.
func (c *Checker) clusterProject(ctx context.Context, g *gathering) (bool, error) {
	network, err := c.clusterNetwork(ctx, g)
	if err != nil {
		return false, err
	}
	g.n.ClusterMTU = network.requestedMTU
	if c.Cloud == nil || g.q.Cluster.Spec.InfrastructureRef.Name == "" {
		return true, nil
	}
	if g.n.CannotAsk = c.spend(g); g.n.CannotAsk != "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	cloud, osc, err := c.openCluster(ctx, g)
	if err != nil {
		g.n.CannotAsk = fmt.Sprintf("cannot ask the cluster's OpenStack project, so the change cannot be checked; nothing was changed, retry when it answers: %v", err)
		return false, nil
	}
	answers, reused := c.admitted.take(g, cloud, osc, c.now())
	if !reused {
		answers = c.askClusterProject(ctx, g, cloud, osc)
	}
	if g.q.Ask == Attach && answers.complete() {
		c.admitted.keep(g, cloud, answers, c.now())
	}
	if g.project, g.n.ForeignCloud, g.n.CannotAsk = answers.project, answers.foreign, answers.cannotVerify; answers.foreign != "" || answers.cannotVerify != "" {
		g.project = ""
		return false, nil
	}
	if answers.readMTU() {
		if answers.mtuErr != nil {
			g.n.CannotAsk = fmt.Sprintf("cannot read the cluster network's MTU; nothing was changed: %v", answers.mtuErr)
			return false, nil
		}
		g.n.ClusterMTU = answers.mtu
	}
	if answers.quotaErr != nil {
		g.n.CannotAsk = fmt.Sprintf("cannot read the cluster project's port quota; nothing was changed: %v", answers.quotaErr)
		return false, nil
	}
	g.n.PortQuotaFree = answers.free
	return true, nil
}

// projectAnswers are the cluster's project's answers to one question.
type projectAnswers struct {
	project, foreign, cannotVerify string
	// network is the cluster network whose MTU was read ("" when none yet).
	network          string
	mtu              int
	mtuErr, quotaErr error
	free             *int
}

func (a projectAnswers) readMTU() bool { return a.network != "" }

// complete says every answer came, the MTU included: only those are kept
// for the share.
func (a projectAnswers) complete() bool {
	return a.project != "" && a.foreign == "" && a.cannotVerify == "" && a.readMTU() && a.mtuErr == nil && a.quotaErr == nil
}

// askClusterProject asks the cluster's project its three questions at once
// (does the SharedNetwork's Keystone vouch for its token, its network's MTU,
// its port quota): none needs another's answer, and each is a round trip to
// a cloud (a third of a second on a busy one) on the path of both the
// admission and the share. The Keystone and region are compared first,
// asking nobody: a cluster of another cloud is sent no request. The caller
// judges the answers in the order they were always asked, so a refusal
// reads the same.
func (c *Checker) askClusterProject(ctx context.Context, g *gathering, cloud openstack.ClusterCloud, osc *infrav1.OpenStackCluster) projectAnswers {
	var a projectAnswers
	sn := g.res.SharedNetwork
	vm, err := c.Cloud.ForSharedNetwork(ctx, sn)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("opening the VM project to verify a cluster's project", "sharedNetwork", sn.Name, "error", err.Error())
		a.cannotVerify = cannotVerify(sn)
		return a
	}
	if err := credentials.SameCloud(cloud, vm); err != nil {
		a.foreign = err.Error()
		return a
	}
	if osc.Status.Network != nil {
		a.network = osc.Status.Network.ID
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.project, a.foreign, a.cannotVerify = c.vouch(ctx, sn, cloud, vm, g.q.Ask == Attach || g.q.Ask == Grow)
	}()
	go func() {
		defer wg.Done()
		a.free, a.quotaErr = portQuotaFree(ctx, cloud)
	}()
	if a.readMTU() {
		a.mtu, a.mtuErr = networkMTU(ctx, cloud, a.network)
	}
	wg.Wait()
	return a
}

// admittedMaxAge is how long the share may act on its admission's answers.
const admittedMaxAge = 15 * time.Second

// admittedAnswers hands the cluster's project's answers an admission just
// got for a nodegroup's attach to the share that follows it, once: the
// attachment controller's check before the share then asks the cloud
// nothing again (a round trip on the path to the rollout), unless the
// answers are older than admittedMaxAge or were got with another session
// (the cluster's Secret changed: its project is vouched for again). Every
// rule still runs on them; the SharedNetwork's facts and the consumers
// are read again as always.
type admittedAnswers struct {
	mu      sync.Mutex
	answers map[admittedKey]admitted
}

type admittedKey struct{ namespace, cluster, nodegroup, sharedNetwork, subnet string }

type admitted struct {
	answers projectAnswers
	cloud   openstack.ClusterCloud
	at      time.Time
}

func keyOf(g *gathering) admittedKey {
	return admittedKey{g.q.Cluster.Namespace, g.q.Cluster.Name, g.q.Nodegroup, g.q.Value.Name, g.q.Value.Subnet}
}

func (m *admittedAnswers) keep(g *gathering, cloud openstack.ClusterCloud, a projectAnswers, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil {
		m.answers = map[admittedKey]admitted{}
	}
	for k, v := range m.answers { // bounded by the admissions of the last admittedMaxAge
		if now.Sub(v.at) > admittedMaxAge {
			delete(m.answers, k)
		}
	}
	m.answers[keyOf(g)] = admitted{answers: a, cloud: cloud, at: now}
}

// take returns the admission's answers for the share's question, once:
// got with the same session, for the cluster network CAPO made (the MTU
// judged is that network's), within admittedMaxAge.
func (m *admittedAnswers) take(g *gathering, cloud openstack.ClusterCloud, osc *infrav1.OpenStackCluster, now time.Time) (projectAnswers, bool) {
	if g.q.Ask != BeforeShare {
		return projectAnswers{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := keyOf(g)
	a, ok := m.answers[key]
	delete(m.answers, key)
	if !ok || a.cloud != cloud || now.Sub(a.at) > admittedMaxAge || now.Before(a.at) ||
		osc.Status.Network == nil || osc.Status.Network.ID != a.answers.network {
		return projectAnswers{}, false
	}
	return a.answers, true
}

func networkMTU(ctx context.Context, neutron openstack.NetworkFacts, networkID string) (int, error) {
	network, err := neutron.Network(ctx, networkID)
	return network.MTU, err
}

func portQuotaFree(ctx context.Context, quota openstack.PortQuota) (*int, error) {
	q, err := quota.Ports(ctx)
	if err != nil {
		return nil, err
	}
	return q.Free(), nil
}

// vouch asks whether the SharedNetwork's Keystone vouches for the
// cluster's credential (credentials.VerifiedProject): otherwise the network
// would be shared with whatever project a Keystone of the tenant's choosing
// claims. project is the vouched project; foreign says why it is not;
// cannotVerify why it could not be asked (the VM project's own errors are
// the administrator's, reported in the SharedNetwork's status, not the
// cluster owner's).
func (c *Checker) vouch(ctx context.Context, sn *sharednetv1.SharedNetwork, cluster openstack.Identity, vm credentials.Voucher, admission bool) (project, foreign, cannot string) {
	if admission {
		// A tenant's admissions (dry runs too) reuse the Keystone's answer
		// about the same token for a minute; the share itself asks afresh.
		vm = cachedVoucher{Voucher: vm, cache: &c.vouches, now: c.now()}
	}
	project, err := credentials.VerifiedProject(ctx, cluster, vm)
	var other *credentials.ForeignKeystoneError
	switch {
	case err == nil:
		return project, "", ""
	case errors.As(err, &other):
		return "", err.Error(), ""
	}
	ctrl.LoggerFrom(ctx).Info("verifying a cluster's project", "sharedNetwork", sn.Name, "error", err.Error())
	return "", "", cannotVerify(sn)
}

func cannotVerify(sn *sharednetv1.SharedNetwork) string {
	return fmt.Sprintf("cannot verify the cluster's project with SharedNetwork %s's cloud right now; nothing was changed, retry later", sn.Name)
}

// shareQuota records the VM project's RBAC policy quota and whether the
// attach needs a new share: the vouched project has none of the network in
// the facts. Not judged without a vouched project (a cluster being created:
// the attachment controller asks before it shares) or a quota the VM
// credential may not read.
func (c *Checker) shareQuota(_ context.Context, g *gathering) (bool, error) {
	if g.project == "" || g.status == nil {
		return true, nil
	}
	q := g.status.RBACPolicies
	if q.Used == nil || q.Limit == nil {
		return true, nil
	}
	g.n.RBACPolicies = &rules.PolicyQuota{Used: int(*q.Used), Limit: int(*q.Limit)}
	g.n.NewShare = !slices.ContainsFunc(g.status.Shares, func(s sharednetv1.Share) bool { return s.ProjectID == g.project })
	return true, nil
}

// clusterMTU records the cluster network's MTU as Neutron says now; not
// judged when it cannot be told.
func (c *Checker) clusterMTU(ctx context.Context, g *gathering) (bool, error) {
	if c.Cloud == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	cloud, osc, err := c.openCluster(ctx, g)
	if err != nil || osc.Status.Network == nil || osc.Status.Network.ID == "" {
		return true, nil // an MTU that cannot be told is not judged
	}
	if mtu, err := networkMTU(ctx, cloud, osc.Status.Network.ID); err == nil {
		g.n.ClusterMTU = mtu
	}
	return true, nil
}

// capacity sizes the nodegroup and every other nodegroup, of every
// cluster, whose variable names its subnet.
func (c *Checker) capacity(ctx context.Context, g *gathering) (bool, error) {
	cluster, sn := g.q.Cluster, g.res.SharedNetwork
	self := consumers.SizeOf(cluster, g.q.Nodegroup)
	var err error
	if self.Attached, err = consumers.AttachedAddresses(ctx, c.Reader, cluster, g.q.Nodegroup); err != nil {
		return false, err
	}
	except := rules.ConsumerName(cluster.Namespace, cluster.Name, g.q.Nodegroup)
	var others []rules.Consumer
	if c.Consumers != nil {
		others, err = c.Consumers.SubnetConsumers(sn, g.subnet, except)
	}
	// Until the table has read every object (a replica that just started),
	// list them: the same answer, from the cache, which waits for its sync.
	if c.Consumers == nil || errors.Is(err, consumers.ErrNotRead) {
		others, err = consumers.SubnetConsumers(ctx, c.Reader, sn, g.subnet, except)
	}
	if err != nil {
		return false, err
	}
	g.n.Size, g.n.Others = self, others
	return true, nil
}

// loadBalancers records the cluster's load balancers on the subnet of the
// nodegroup's attachment, asked of Octavia now (the status may be a minute
// old); a nodegroup without an attachment has nothing to detach.
func (c *Checker) loadBalancers(ctx context.Context, g *gathering) (bool, error) {
	cluster := g.q.Cluster
	attachment, err := attachments.Get(ctx, c.Reader, cluster.Namespace, cluster.Name, g.q.Nodegroup)
	if attachment == nil || err != nil {
		g.skipped = err == nil
		return false, err
	}
	g.n.DetachSubnet, g.n.LoadBalancers = attachment.Spec.Subnet, attachment.Status.LoadBalancers
	if c.Cloud == nil || cluster.Spec.InfrastructureRef.Name == "" {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	sn := &sharednetv1.SharedNetwork{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: attachment.Spec.SharedNetwork}, sn); err != nil {
		return false, fmt.Errorf("reading SharedNetwork %s: %w", attachment.Spec.SharedNetwork, err)
	}
	if g.n.CannotAsk = c.spend(g); g.n.CannotAsk != "" {
		return false, nil
	}
	// Octavia's URL comes from the cluster's catalog: asked only on the VM
	// project's cloud (a tenant's own Keystone names any URL).
	cloud, err := credentials.ClusterOnCloudOf(ctx, credentials.In(ctx, c.Cloud), cluster, sn)
	var foreign *credentials.ForeignKeystoneError
	switch {
	case errors.As(err, &foreign):
		g.n.ForeignCloud = foreign.Error()
		return false, nil
	case err != nil:
		g.n.CannotAsk = fmt.Sprintf("cannot ask the cluster's OpenStack project, so the detach cannot be checked; nothing was changed, retry when it answers: %v", err)
		return false, nil
	}
	own, err := ccm.LoadBalancersOn(ctx, cloud, cluster, attachment.Spec.Subnet)
	if err != nil {
		g.n.CannotAsk = fmt.Sprintf("cannot list the load balancers on subnet %s, so the detach cannot be checked; nothing was changed: %v", attachment.Spec.Subnet, err)
		return false, nil
	}
	g.n.LoadBalancers = own.Own
	return true, nil
}

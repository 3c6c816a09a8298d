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

// Package consumers answers which nodegroups, of every cluster, use a subnet
// of a SharedNetwork: the consumers the capacity rule reserves room for, and
// the addresses each holds. The manager's answer is the Table, fed by its
// informers; without one, SubnetConsumers lists the Clusters of the
// SharedNetwork through the SharedNetworkIndex. Both answer the same.
package consumers

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// claim is one nodegroup's `sharedNetwork` value and its size: a consumer
// of whichever subnet the value resolves to on the SharedNetwork (which
// depends on the SharedNetwork's facts, so it is resolved when asked).
type claim struct {
	name          string // rules.ConsumerName
	topology      string
	attachment    client.ObjectKey // where its attachment is (attachments.Get)
	sharedNetwork string
	subnet        string // the value's sharedNetwork.subnet, "" for the SharedNetwork's one
	maxSize       int
	zones         int
	invalid       error // a max size that is not a node count: the subnet cannot be judged
}

// claimsOf is every claim of cluster's nodegroups, in topology order (so
// equal Clusters make equal lists); none when a value cannot be decoded
// (the value rule refuses it at admission).
func claimsOf(cluster *clusterv1.Cluster) []claim {
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return nil
	}
	claims := make([]claim, 0, len(values))
	for _, topology := range sortedKeys(values) {
		value := values[topology]
		c := claim{name: rules.ConsumerName(cluster.Namespace, cluster.Name, topology), topology: topology,
			attachment: client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)}, sharedNetwork: value.Name, subnet: value.Subnet}
		size := SizeOf(cluster, topology)
		maxSize, v := rules.MaxSize(size.Annotations, size.Replicas)
		if v != nil {
			c.invalid = fmt.Errorf("nodegroup %s: %w", c.name, v)
		}
		c.maxSize, c.zones = maxSize, rules.Zones(size.FailureDomain, size.ClusterFailureDomains)
		claims = append(claims, c)
	}
	return claims
}

// same says whether two claims are equal (a max size that is not a node
// count by its message).
func (c claim) same(o claim) bool {
	if (c.invalid == nil) != (o.invalid == nil) || c.invalid != nil && c.invalid.Error() != o.invalid.Error() {
		return false
	}
	c.invalid, o.invalid = nil, nil
	return c == o
}

// consumer is c holding holds addresses.
func (c claim) consumer(holds int) rules.Consumer {
	return rules.Consumer{Name: c.name, MaxSize: c.maxSize, Zones: c.zones, Attached: holds}
}

// subnetOf resolves the subnets claims name on one SharedNetwork, each
// distinct value once (hundreds of consumers name the same few).
type subnetOf struct {
	sn           *sharednetv1.SharedNetwork
	resolved     map[string]string // the value's subnet → the subnet ("" when the value fits none)
	last, lastIs string            // the last value asked and its subnet: most ask the same
}

func (s *subnetOf) is(value, subnet string) bool {
	if s.resolved != nil && value == s.last {
		return s.lastIs == subnet
	}
	got, ok := s.resolved[value]
	if !ok {
		if r, v := rules.OneSubnet(s.sn.Name, s.sn.Status.SubnetIDs(), s.sn.Spec.Subnets, value); v == nil {
			got = r
		}
		if s.resolved == nil {
			s.resolved = map[string]string{}
		}
		s.resolved[value] = got
	}
	s.last, s.lastIs = value, got
	return got == subnet
}

// SubnetConsumers sizes every nodegroup, of every cluster, whose variable
// names subnet of SharedNetwork sn, except the one named except, by listing
// the Clusters that name sn (reader's SharedNetworkIndex) and reading their
// attachments. The SharedNetwork controller exports the sum of their
// headroom (capo_sharednet_subnet_reserved_addresses); the Table
// must answer the same.
func SubnetConsumers(ctx context.Context, reader client.Reader, sn *sharednetv1.SharedNetwork, subnet, except string) ([]rules.Consumer, error) {
	clusters := &clusterv1.ClusterList{}
	if err := reader.List(ctx, clusters, client.MatchingFields{SharedNetworkIndex: sn.Name}); err != nil {
		return nil, fmt.Errorf("listing the Clusters using SharedNetwork %s: %w", sn.Name, err)
	}
	on := &subnetOf{sn: sn}
	var out []rules.Consumer
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		for _, c := range claimsOf(cl) {
			if c.name == except || c.sharedNetwork != sn.Name || !on.is(c.subnet, subnet) {
				continue
			}
			if c.invalid != nil {
				return nil, c.invalid
			}
			attached, err := AttachedAddresses(ctx, reader, cl, c.topology)
			if err != nil {
				return nil, err
			}
			out = append(out, c.consumer(attached))
		}
	}
	return out, nil
}

// AttachedAddresses are the addresses a nodegroup holds on its subnet, as
// its attachment records them.
func AttachedAddresses(ctx context.Context, reader client.Reader, cluster *clusterv1.Cluster, topology string) (int, error) {
	attachment, err := attachments.Get(ctx, reader, cluster.Namespace, cluster.Name, topology)
	if attachment == nil {
		return 0, err
	}
	return len(attachment.Status.Nodes), nil
}

// SizeOf is the size facts of nodegroup topology: its max size (the
// autoscaler's annotation, else replicas), its failure domain and the
// cluster's. A nodegroup the Cluster no longer has takes nothing.
func SizeOf(cluster *clusterv1.Cluster, topology string) *rules.Size {
	s := &rules.Size{ClusterFailureDomains: len(cluster.Status.FailureDomains), Replicas: ptr.To[int32](0)}
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Name == topology {
			s.Annotations, s.Replicas, s.FailureDomain = md.Metadata.Annotations, md.Replicas, md.FailureDomain
		}
	}
	return s
}

func sortedKeys(m map[string]sharednetv1.SharedNetworkVariable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

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

// Package ccm is the one place that knows how the OpenStack cloud controller
// manager (cloud-provider-openstack) names what it makes for a cluster, so
// that load balancers are attributed to exactly one Cluster of the management
// cluster: the CCM names them kube_service_<cluster-name>_<namespace>_<service>
// (cut to 255 characters) and tags them with that name, where <cluster-name>
// is its --cluster-name flag. The templates set that flag to ClusterName of the
// Cluster; "kubernetes", the CCM's default, is never assumed.
package ccm

import "strings"

// servicePrefix starts every load balancer name and tag the CCM makes
// (cloud-provider-openstack pkg/openstack/loadbalancer.go).
const servicePrefix = "kube_service_"

// maxNameLength is Octavia's name limit, which the CCM cuts its names to.
const maxNameLength = 255

// ClusterName is the CCM --cluster-name of a management-cluster Cluster:
// "<namespace>.<name>". A namespace holds no dot, so two Clusters named alike
// in two namespaces never get the same CCM name.
func ClusterName(namespace, name string) string {
	return namespace + "." + name
}

// LoadBalancerName is the name (and tag) the CCM with cluster name ccmCluster
// gives the load balancer of Service namespace/name.
func LoadBalancerName(ccmCluster, namespace, name string) string {
	s := servicePrefix + ccmCluster + "_" + namespace + "_" + name
	if len(s) > maxNameLength {
		s = s[:maxNameLength]
	}
	return s
}

// Owner says whose a load balancer is, as far as its name and tags tell.
type Owner int

const (
	// Unattributed means no CCM name or tag; made by hand or by another tool.
	Unattributed Owner = iota
	// ThisCluster means every CCM name and tag it carries is this cluster's.
	ThisCluster
	// OtherCluster means it carries only other clusters' CCM names.
	OtherCluster
	// Shared means it carries this cluster's and another cluster's names (a
	// Service of each uses it): it is never deleted for one of them.
	Shared
)

// OwnerOf classifies a load balancer for the cluster whose CCM name is ccmCluster.
func OwnerOf(ccmCluster, name string, tags []string) Owner {
	mine, others := 0, 0
	for _, s := range append([]string{name}, tags...) {
		if !strings.HasPrefix(s, servicePrefix) {
			continue
		}
		if strings.HasPrefix(s, servicePrefix+ccmCluster+"_") {
			mine++
		} else {
			others++
		}
	}
	switch {
	case mine > 0 && others > 0:
		return Shared
	case mine > 0:
		return ThisCluster
	case others > 0:
		return OtherCluster
	default:
		return Unattributed
	}
}

// ServiceOf is "namespace/name" of the Service (or Gateway) a load balancer of
// this cluster was made for, or "" when its name does not say. Namespaces and
// Service names hold no underscore, so the first one after the cluster's
// prefix separates them.
func ServiceOf(ccmCluster, name string) string {
	rest, ok := strings.CutPrefix(name, servicePrefix+ccmCluster+"_")
	if !ok {
		return ""
	}
	namespace, service, ok := strings.Cut(rest, "_")
	if !ok || namespace == "" || service == "" || strings.Contains(service, "_") {
		return ""
	}
	return namespace + "/" + service
}

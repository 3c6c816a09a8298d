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

package plane

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
)

// GuideService is the Service of the guide ("Reach your Services from the
// virtual machines"): type LoadBalancer with the three annotations that put
// an internal load balancer's VIP on the shared subnet and its members on
// the cluster's own subnet.
func GuideService(key client.ObjectKey, sharedSubnetID, clusterSubnetID string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Annotations: map[string]string{
				guardrails.InternalAnnotation:     "true",
				guardrails.SubnetAnnotation:       sharedSubnetID,
				guardrails.MemberSubnetAnnotation: clusterSubnetID,
			},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "my-app"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// ClusterSubnet is the ID and CIDR of a cluster's own subnet (the first
// subnet of the cluster network CAPO reports).
func (p *Plane) ClusterSubnet(ctx context.Context, namespace, name string) (id, cidr string, err error) {
	c := &clusterv1.Cluster{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
		return "", "", err
	}
	osc := &infrav1.OpenStackCluster{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.Spec.InfrastructureRef.Name}, osc); err != nil {
		return "", "", err
	}
	if osc.Status.Network == nil || len(osc.Status.Network.Subnets) == 0 {
		return "", "", fmt.Errorf("OpenStackCluster %s/%s has no subnet yet", namespace, osc.Name)
	}
	return osc.Status.Network.Subnets[0].ID, osc.Status.Network.Subnets[0].CIDR, nil
}

// WaitForLoadBalancerIP waits until the cloud controller manager has given a
// Service of the workload cluster its load balancer, and returns its VIP.
func (p *Plane) WaitForLoadBalancerIP(ctx context.Context, key client.ObjectKey, timeout time.Duration) (string, error) {
	var ip, last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		svc := &corev1.Service{}
		if err := p.WorkloadClient.Get(ctx, key, svc); err != nil {
			return false, err
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 && ing[0].IP != "" {
			ip = ing[0].IP
			return true, nil
		}
		events := &corev1.EventList{}
		if err := p.WorkloadClient.List(ctx, events, client.InNamespace(key.Namespace)); err == nil {
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "Service" && e.InvolvedObject.Name == key.Name {
					last = e.Reason + ": " + e.Message
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("the Service %s has no load balancer after %s (last event %q; see the cloud controller manager's log in %s): %w", key, timeout, last, p.Logs(), err)
	}
	return ip, nil
}

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

package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// freeAddresses is what an administrator alerts on before nodegroups stop
// joining: nodes that cannot get an address never join the cluster.
var freeAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "capo_sharednet_subnet_free_addresses",
	Help: "Free addresses in the allocation pools of a shared subnet, as last read from Neutron.",
}, []string{"sharednetwork", "subnet"})

func init() {
	metrics.Registry.MustRegister(freeAddresses)
}

// forgetFreeAddresses deletes every series of a SharedNetwork: a deleted
// network or subnet must not keep alerting with its last value.
func forgetFreeAddresses(sharedNetwork string) {
	freeAddresses.DeletePartialMatch(prometheus.Labels{"sharednetwork": sharedNetwork})
}

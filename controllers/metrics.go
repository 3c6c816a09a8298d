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

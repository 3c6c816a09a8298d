// Package integration proves the extension with CAPI's own controllers on a
// real kube-apiserver: CAPI's ClusterClass, topology, MachineDeployment and
// MachineSet reconcilers run in-process (test/testenv) and call this
// extension's manager over HTTPS through the Runtime SDK wire format.
package integration

// Command kube-controller-manager builds the real Kubernetes controller
// manager from the module proxy, at the version of kube-apiserver, so the
// local plane garbage-collects owner references and finishes namespace
// deletions as every real cluster does.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}

// Command kube-apiserver builds the real Kubernetes API server from the
// module proxy, because setup-envtest cannot download its binaries here.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}

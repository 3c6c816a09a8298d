// Package e2e is the end-to-end suite (ginkgo, label "local"): the whole
// story of a nodegroup on a shared network, on the local management plane of
// e2e/plane (real kube-apiserver, CAPI, CABPK, CAPO and this extension, the
// OpenStack test bed, a stand-in control plane and a node simulator).
//
// `go test ./e2e/...` runs it when CAPO_SHAREDNET_TESTBED_CLOUDS names the
// test bed's clouds.yaml (`make test` sets it) and skips it otherwise. It
// writes a timeline of its steps to _artifacts/e2e/timeline.txt.
package e2e

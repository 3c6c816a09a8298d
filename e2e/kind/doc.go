// Package kind is the end-to-end suite for a real cloud: a kind management
// cluster, `clusterctl init` with CAPI, CAPO (and ORC) and this extension, a
// workload cluster created from templates/ on the OpenStack cloud that
// config/e2e.yaml names, a nodegroup attached to a shared network of a second
// project, another one attached and detached, and the share removed after
// the cluster is deleted.
//
// It needs a Docker engine and an OpenStack cloud, so `go test ./...` only
// builds it: TestE2E skips unless -e2e.config is given. How to run it:
// docs/e2e.md.
package kind

// Package shipping tests what users install and developers run, exactly as
// they get it: the clusterctl release assets (rendered by clusterctl itself and
// applied to a real kube-apiserver with CAPI's and CAPO's CRDs and webhooks),
// the cluster templates, tilt-provider.yaml, the Dockerfile's build, the kind
// e2e suite's build, and the docs against the code (every refusal quoted in
// docs/troubleshooting.md, every granted verb explained in docs/rbac.md).
// docs/reference.md is generated and checked by hack/tools/reference-docs.
//
// The package has no code of its own: everything is in its tests.
package shipping

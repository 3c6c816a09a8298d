// Package providers finds the Cluster API providers this project runs with
// (CAPI core, CABPK, KCP, CAPO and ORC) in the Go module cache, at the
// versions of go.mod, and reads what they ship for an API server: CRDs with
// the labels their kustomizations add (among them the contract labels the
// topology controller resolves templates with) and admission webhook
// configurations. The test harness (test/testenv) and the local plane
// (e2e/plane) install these into real API servers, so both serve exactly the
// manifests of the code they run.
package providers

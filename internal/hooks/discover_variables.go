package hooks

import (
	"context"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// DiscoverVariables serves the schema of the `sharedNetwork` variable,
// generated from its Go type.
func (h *Handlers) DiscoverVariables(_ context.Context, _ *runtimehooksv1.DiscoverVariablesRequest, resp *runtimehooksv1.DiscoverVariablesResponse) {
	defs, err := variables.Definitions()
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	resp.Variables = defs
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

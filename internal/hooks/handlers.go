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

// Package hooks holds the Runtime SDK handlers of the extension, one file per
// hook. The topology hooks (DiscoverVariables, GeneratePatches,
// ValidateTopology) read Kubernetes objects from the manager's cache and never
// call OpenStack: CAPI calls them on every topology reconcile, and they must
// answer within their timeout whatever the cloud does. BeforeClusterDelete is
// the one that does: it deletes the cluster's own load balancers on shared
// subnets, bounded by CleanupDeadline.
package hooks

import (
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
)

// Handler names, as a ClusterClass references them: <name>.<ExtensionConfig name>.
const (
	DiscoverVariablesHandler   = "discover-variables"
	GeneratePatchesHandler     = "generate-patches"
	ValidateTopologyHandler    = "validate-topology"
	BeforeClusterDeleteHandler = "before-cluster-delete"
)

// Handlers serves the hooks of the extension.
type Handlers struct {
	// Reader reads from the manager's cache.
	Reader client.Reader
	// APIReader reads from the API server (BeforeClusterDelete asks it
	// whether the Cluster is really being deleted).
	APIReader client.Reader
	// Client writes the attachments' conditions (BeforeClusterDelete).
	Client client.Client
	// Preflight is the decision service (ValidateTopology's rules,
	// GeneratePatches' grant); one over Reader when nil.
	Preflight *preflight.Checker
	// Credentials reach the cluster's project; only BeforeClusterDelete
	// uses them.
	Credentials credentials.Clouds
	// Recorder records Events on Clusters.
	Recorder record.EventRecorder
	// CleanupDeadline bounds BeforeClusterDelete; DefaultCleanupDeadline when zero.
	CleanupDeadline time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Register adds the topology handlers to the runtime extension server, in
// one place with their names, timeouts and failure policies. CAPI calls them
// only for clusters of a ClusterClass that names them.
func (h *Handlers) Register(srv *server.Server) error {
	fail := ptr.To(runtimehooksv1.FailurePolicyFail)
	return add(srv,
		server.ExtensionHandler{Hook: runtimehooksv1.DiscoverVariables, Name: DiscoverVariablesHandler, HandlerFunc: h.DiscoverVariables, TimeoutSeconds: ptr.To[int32](5), FailurePolicy: fail},
		server.ExtensionHandler{Hook: runtimehooksv1.GeneratePatches, Name: GeneratePatchesHandler, HandlerFunc: h.GeneratePatches, TimeoutSeconds: ptr.To[int32](10), FailurePolicy: fail},
		server.ExtensionHandler{Hook: runtimehooksv1.ValidateTopology, Name: ValidateTopologyHandler, HandlerFunc: h.ValidateTopology, TimeoutSeconds: ptr.To[int32](10), FailurePolicy: fail},
	)
}

// RegisterDeletion adds BeforeClusterDelete to a server of its own. CAPI
// calls a lifecycle hook for every Cluster its ExtensionConfig's
// namespaceSelector admits, whatever its ClusterClass; that ExtensionConfig
// is kept to the namespaces with attachments (controllers.NamespaceScope),
// so an extension outage holds the deletion of an attached cluster (its
// load balancers must go first) and of no other.
func (h *Handlers) RegisterDeletion(srv *server.Server) error {
	return add(srv, server.ExtensionHandler{Hook: runtimehooksv1.BeforeClusterDelete, Name: BeforeClusterDeleteHandler, HandlerFunc: h.BeforeClusterDelete,
		TimeoutSeconds: ptr.To[int32](30), FailurePolicy: ptr.To(runtimehooksv1.FailurePolicyFail)})
}

func add(srv *server.Server, handlers ...server.ExtensionHandler) error {
	for _, handler := range handlers {
		if err := srv.AddExtensionHandler(handler); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handlers) preflight() *preflight.Checker {
	if h.Preflight == nil {
		return &preflight.Checker{Reader: h.Reader} // not stored: hooks are served concurrently
	}
	return h.Preflight
}

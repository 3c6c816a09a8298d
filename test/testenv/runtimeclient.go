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

package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/transport"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/exp/runtime/catalog"
	runtimeclient "sigs.k8s.io/cluster-api/exp/runtime/client"
	"sigs.k8s.io/cluster-api/util"
)

// NewRuntimeClient returns a Runtime SDK client (sigs.k8s.io/cluster-api/exp/runtime/client.Client)
// that calls extensions over HTTPS with the real wire format. setupCAPI hands it to the CAPI
// reconcilers this environment runs in-process (ClusterClass, Cluster topology, ExtensionConfig,
// MachineDeployment), which take the interface and nothing else.
//
// Why not CAPI's own: at the cluster-api version in go.mod its only implementation is
// sigs.k8s.io/cluster-api/internal/runtime/client (New(Options{Catalog, Registry, Client})), over
// the registry of sigs.k8s.io/cluster-api/internal/runtime/registry; Go refuses to import an
// internal package from outside sigs.k8s.io/cluster-api. Its public packages hold no
// implementation: exp/runtime/client has the interface and the call options only,
// exp/runtime/catalog the hook catalog (used here for the request and response types, their
// validation and version conversion, and the handler path), and test/framework runs CAPI's
// manager binary rather than its client. CAPI's own test extension writes a client of its own for
// the same reason (test/extension/handlers/topologymutation, injectRuntimeClient).
//
// So this re-implements the semantics of CAPI's client, on CAPI's public helpers where they
// exist: discovery fills status.handlers with "<handler>.<extensionconfig>" names and defaults
// (failurePolicy Fail, timeout 10s); calls validate request/response types against the hooks
// catalog, honour the namespaceSelector, merge ExtensionConfig settings into the request (request
// settings win), apply the handler timeout, convert between hook versions, apply the failure
// policy to transport errors only, and optionally cache responses; TLS as CAPI's (client-go's
// transport, server name from the URL, the ExtensionConfig's CA bundle). Unlike CAPI, a response
// with status Failure yields an error that includes the extension's message (handy in test
// assertions). No client certificate is sent; service references resolve to <svc>.<ns>.svc like
// CAPI does (not resolvable here: use clientConfig.url).
func NewRuntimeClient(c client.Client) runtimeclient.Client {
	cat := runtimecatalog.New()
	_ = runtimehooksv1.AddToCatalog(cat)
	return &runtimeClient{catalog: cat, client: c, items: map[string]*registration{}, http: map[string]*http.Client{}}
}

type registration struct {
	name, extensionConfigName, extensionConfigRV string
	gvh                                          runtimecatalog.GroupVersionHook
	selector                                     labels.Selector
	clientConfig                                 runtimev1.ClientConfig
	timeout                                      time.Duration
	failurePolicy                                runtimev1.FailurePolicy
	settings                                     map[string]string
}

type runtimeClient struct {
	catalog *runtimecatalog.Catalog
	client  client.Client

	mu    sync.RWMutex
	ready bool
	items map[string]*registration
	http  map[string]*http.Client // by host + CA bundle
}

// errTransport marks errors calling the extension, to which the failure policy applies.
type errTransport struct{ error }

func (c *runtimeClient) WarmUp(list *runtimev1.ExtensionConfigList) error {
	if list == nil {
		return errors.New("runtime client warm up: list must not be nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready {
		return errors.New("runtime client warm up: already warmed up")
	}
	for i := range list.Items {
		if err := c.add(&list.Items[i]); err != nil {
			c.items = map[string]*registration{}
			return err
		}
	}
	c.ready = true
	return nil
}

func (c *runtimeClient) IsReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

func (c *runtimeClient) Discover(ctx context.Context, ec *runtimev1.ExtensionConfig) (*runtimev1.ExtensionConfig, error) {
	gvh, err := c.catalog.GroupVersionHook(runtimehooksv1.Discovery)
	if err != nil {
		return nil, err
	}
	resp := &runtimehooksv1.DiscoveryResponse{}
	if err := c.post(ctx, ec.Spec.ClientConfig, gvh, gvh, "", 10*time.Second, &runtimehooksv1.DiscoveryRequest{}, resp); err != nil {
		return nil, fmt.Errorf("failed to discover extension %q: %w", ec.Name, err)
	}
	if err := checkStatus(resp, "discover extension", ec.Name); err != nil {
		return nil, err
	}
	out := ec.DeepCopy()
	out.Status.Handlers = []runtimev1.ExtensionHandler{}
	seen := map[string]bool{}
	for _, h := range resp.Handlers {
		if h.FailurePolicy == nil {
			h.FailurePolicy = ptr.To(runtimehooksv1.FailurePolicyFail)
		}
		if h.TimeoutSeconds == nil {
			h.TimeoutSeconds = ptr.To[int32](runtimehooksv1.DefaultHandlersTimeoutSeconds)
		}
		gv, err := schema.ParseGroupVersion(h.RequestHook.APIVersion)
		switch {
		case seen[h.Name]:
			err = fmt.Errorf("duplicate name for handler %s found", h.Name)
		case len(validation.IsDNS1123Label(h.Name)) > 0:
			err = fmt.Errorf("handler name %s is not valid", h.Name)
		case *h.TimeoutSeconds < 0 || *h.TimeoutSeconds > 30:
			err = fmt.Errorf("handler %s timeoutSeconds %d must be between 0 and 30", h.Name, *h.TimeoutSeconds)
		case *h.FailurePolicy != runtimehooksv1.FailurePolicyFail && *h.FailurePolicy != runtimehooksv1.FailurePolicyIgnore:
			err = fmt.Errorf("handler %s failurePolicy %s must equal \"Ignore\" or \"Fail\"", h.Name, *h.FailurePolicy)
		case err == nil && !c.catalog.IsHookRegistered(runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: h.RequestHook.Hook}):
			err = fmt.Errorf("handler %s requestHook %s/%s is not in the Runtime SDK catalog", h.Name, h.RequestHook.APIVersion, h.RequestHook.Hook)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to discover extension %q: %w", ec.Name, err)
		}
		seen[h.Name] = true
		out.Status.Handlers = append(out.Status.Handlers, runtimev1.ExtensionHandler{
			Name:           h.Name + "." + ec.Name,
			RequestHook:    runtimev1.GroupVersionHook{APIVersion: h.RequestHook.APIVersion, Hook: h.RequestHook.Hook},
			TimeoutSeconds: *h.TimeoutSeconds,
			FailurePolicy:  runtimev1.FailurePolicy(*h.FailurePolicy),
		})
	}
	return out, nil
}

func (c *runtimeClient) Register(ec *runtimev1.ExtensionConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return fmt.Errorf("failed to register ExtensionConfig %q: registry not warmed up", ec.Name)
	}
	return c.add(ec)
}

func (c *runtimeClient) Unregister(ec *runtimev1.ExtensionConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return fmt.Errorf("failed to unregister ExtensionConfig %q: registry not warmed up", ec.Name)
	}
	c.remove(ec.Name)
	return nil
}

func (c *runtimeClient) remove(extensionConfigName string) {
	for name, r := range c.items {
		if r.extensionConfigName == extensionConfigName {
			delete(c.items, name)
		}
	}
}

func (c *runtimeClient) add(ec *runtimev1.ExtensionConfig) error {
	selector, err := metav1.LabelSelectorAsSelector(ec.Spec.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("failed to register ExtensionConfig %q: %w", ec.Name, err)
	}
	regs := make([]*registration, 0, len(ec.Status.Handlers))
	for _, h := range ec.Status.Handlers {
		gv, err := schema.ParseGroupVersion(h.RequestHook.APIVersion)
		if err != nil {
			return fmt.Errorf("failed to register ExtensionConfig %q: handler %q: %w", ec.Name, h.Name, err)
		}
		regs = append(regs, &registration{
			name: h.Name, extensionConfigName: ec.Name, extensionConfigRV: ec.ResourceVersion,
			gvh:           runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: h.RequestHook.Hook},
			selector:      selector,
			clientConfig:  ec.Spec.ClientConfig,
			timeout:       time.Duration(h.TimeoutSeconds) * time.Second,
			failurePolicy: h.FailurePolicy,
			settings:      ec.Spec.Settings,
		})
	}
	c.remove(ec.Name)
	for _, r := range regs {
		c.items[r.name] = r
	}
	return nil
}

func (c *runtimeClient) GetAllExtensions(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object) ([]string, error) {
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	if !c.ready {
		c.mu.RUnlock()
		return nil, fmt.Errorf("failed to list extension handlers for hook %q: registry not warmed up", gvh.GroupHook())
	}
	var regs []*registration
	for _, r := range c.items {
		if r.gvh.GroupHook() == gvh.GroupHook() {
			regs = append(regs, r)
		}
	}
	c.mu.RUnlock()
	names := []string{}
	for _, r := range regs {
		ok, err := c.matchNamespace(ctx, r.selector, forObject.GetNamespace())
		if err != nil {
			return nil, err
		}
		if ok {
			names = append(names, r.name)
		}
	}
	return names, nil
}

func (c *runtimeClient) CallAllExtensions(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object, request runtimehooksv1.RequestObject, response runtimehooksv1.ResponseObject) error {
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return err
	}
	names, err := c.GetAllExtensions(ctx, hook, forObject)
	if err != nil {
		return err
	}
	var messages []string
	var retry int32
	for _, name := range names {
		obj, err := c.catalog.NewResponse(gvh)
		if err != nil {
			return err
		}
		tmp := obj.(runtimehooksv1.ResponseObject)
		if err := c.CallExtension(ctx, hook, forObject, name, request, tmp); err != nil {
			return fmt.Errorf("failed to call extension handlers for hook %q: %w", gvh.GroupHook(), err)
		}
		if r, ok := tmp.(runtimehooksv1.RetryResponseObject); ok {
			retry = util.LowestNonZeroInt32(retry, r.GetRetryAfterSeconds())
		}
		if tmp.GetMessage() != "" {
			messages = append(messages, tmp.GetMessage())
		}
	}
	response.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	if r, ok := response.(runtimehooksv1.RetryResponseObject); ok {
		r.SetRetryAfterSeconds(retry)
	}
	response.SetMessage(strings.Join(messages, ", "))
	return nil
}

func (c *runtimeClient) CallExtension(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object, name string, request runtimehooksv1.RequestObject, response runtimehooksv1.ResponseObject, opts ...runtimeclient.CallExtensionOption) error {
	options := &runtimeclient.CallExtensionOptions{}
	for _, o := range opts {
		o.ApplyToOptions(options)
	}
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return err
	}
	if err := c.catalog.ValidateRequest(gvh, request); err != nil {
		return fmt.Errorf("failed to call extension handler %q: %w", name, err)
	}
	if err := c.catalog.ValidateResponse(gvh, response); err != nil {
		return fmt.Errorf("failed to call extension handler %q: %w", name, err)
	}
	c.mu.RLock()
	reg, ok := c.items[name]
	ready := c.ready
	c.mu.RUnlock()
	if !ready || !ok {
		return fmt.Errorf("failed to call extension handler %q: handler with name %q has not been registered", name, name)
	}
	if reg.gvh.GroupHook() != gvh.GroupHook() {
		return fmt.Errorf("failed to call extension handler %q: handler does not match GroupHook %q", name, gvh.GroupHook())
	}
	if ok, err := c.matchNamespace(ctx, reg.selector, forObject.GetNamespace()); err != nil || !ok {
		return fmt.Errorf("failed to call extension handler %q: namespaceSelector did not match object %s/%s (%v)", name, forObject.GetNamespace(), forObject.GetName(), err)
	}

	// Merge settings: the values in the request take precedence over the registration's.
	request = request.DeepCopyObject().(runtimehooksv1.RequestObject)
	settings := map[string]string{}
	for k, v := range reg.settings {
		settings[k] = v
	}
	for k, v := range request.GetSettings() {
		settings[k] = v
	}
	request.SetSettings(settings)

	var cacheKey string
	if options.WithCaching {
		cacheKey = options.CacheKeyFunc(reg.name, reg.extensionConfigRV, request)
		if entry, ok := options.Cache.Has(cacheKey); ok {
			out, in := reflect.ValueOf(response), reflect.ValueOf(entry.Response)
			if !in.Type().AssignableTo(out.Type()) {
				return fmt.Errorf("failed to call extension handler %q: cached response of type %s instead of type %s", name, in.Type(), out.Type())
			}
			reflect.Indirect(out).Set(reflect.Indirect(in))
			return nil
		}
	}

	timeout := reg.timeout
	if timeout == 0 {
		timeout = runtimehooksv1.DefaultHandlersTimeoutSeconds * time.Second
	}
	handlerName := strings.TrimSuffix(reg.name, "."+reg.extensionConfigName)
	if err := c.post(ctx, reg.clientConfig, reg.gvh, gvh, handlerName, timeout, request, response); err != nil {
		var te errTransport
		if errors.As(err, &te) && reg.failurePolicy == runtimev1.FailurePolicyIgnore {
			ctrl.LoggerFrom(ctx).Error(err, "Ignoring error calling extension handler because of FailurePolicy Ignore", "handler", name)
			response.SetStatus(runtimehooksv1.ResponseStatusSuccess)
			response.SetMessage("")
			return nil
		}
		return fmt.Errorf("failed to call extension handler %q: %w", name, err)
	}
	if err := checkStatus(response, "call extension handler", name); err != nil {
		return err
	}
	if options.WithCaching {
		options.Cache.Add(runtimeclient.CallExtensionCacheEntry{CacheKey: cacheKey, Response: response})
	}
	return nil
}

func checkStatus(response runtimehooksv1.ResponseObject, op, name string) error {
	switch response.GetStatus() {
	case runtimehooksv1.ResponseStatusSuccess:
		return nil
	case runtimehooksv1.ResponseStatusFailure:
		return fmt.Errorf("failed to %s %q: got failure response: %s", op, name, response.GetMessage())
	default:
		return fmt.Errorf("failed to %s %q: got unknown response status %q: %s", op, name, response.GetStatus(), response.GetMessage())
	}
}

func (c *runtimeClient) matchNamespace(ctx context.Context, selector labels.Selector, namespace string) (bool, error) {
	if selector == nil || selector.Empty() {
		return true, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	if err := c.client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, fmt.Errorf("failed to match namespace %s: %w", namespace, err)
	}
	return selector.Matches(labels.Set(ns.GetLabels())), nil
}

// post sends request to the handler (registered with version regGVH, called as hookGVH) and
// decodes the answer into response. Errors reaching the extension are errTransport.
func (c *runtimeClient) post(ctx context.Context, cfg runtimev1.ClientConfig, regGVH, hookGVH runtimecatalog.GroupVersionHook, name string, timeout time.Duration, request, response runtime.Object) error {
	u, err := extensionURL(cfg)
	if err != nil {
		return err
	}
	httpClient, err := c.httpClient(u.Hostname(), cfg.CABundle)
	if err != nil {
		return err
	}
	u.Path = path.Join(u.Path, runtimecatalog.GVHToPath(regGVH, name))

	reqLocal, respLocal := request, response
	convert := regGVH.Version != hookGVH.Version
	if convert {
		if reqLocal, err = c.catalog.NewRequest(regGVH); err != nil {
			return err
		}
		if err := c.catalog.Convert(request, reqLocal, ctx); err != nil {
			return err
		}
		if respLocal, err = c.catalog.NewResponse(regGVH); err != nil {
			return err
		}
	}
	gvk, err := c.catalog.Request(regGVH)
	if err != nil {
		return err
	}
	reqLocal.GetObjectKind().SetGroupVersionKind(gvk)
	body, err := json.Marshal(reqLocal)
	if err != nil {
		return err
	}
	if timeout > 0 {
		q := u.Query()
		q.Add("timeout", timeout.String())
		u.RawQuery = q.Encode()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(httpReq)
	if err != nil {
		return errTransport{fmt.Errorf("http call failed: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return errTransport{fmt.Errorf("http call failed: got response with status code %d != 200: response: %q", resp.StatusCode, string(b))}
	}
	if err := json.NewDecoder(resp.Body).Decode(respLocal); err != nil {
		return errTransport{fmt.Errorf("http call failed: failed to decode response: %w", err)}
	}
	if convert {
		return c.catalog.Convert(respLocal, response, ctx)
	}
	return nil
}

func extensionURL(cfg runtimev1.ClientConfig) (*url.URL, error) {
	if cfg.Service.IsDefined() {
		host := cfg.Service.Name + "." + cfg.Service.Namespace + ".svc"
		if cfg.Service.Port != nil {
			host = net.JoinHostPort(host, strconv.Itoa(int(*cfg.Service.Port)))
		}
		return &url.URL{Scheme: "https", Host: host, Path: cfg.Service.Path}, nil
	}
	if cfg.URL == "" {
		return nil, errors.New("failed to compute URL: at least one of service and url should be defined in config")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("failed to compute URL: %w", err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("failed to compute URL: expected https scheme, got %s", u.Scheme)
	}
	return u, nil
}

func (c *runtimeClient) httpClient(host string, caBundle []byte) (*http.Client, error) {
	key := host + "/" + string(caBundle)
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.http[key]; ok {
		return hc, nil
	}
	tlsConfig, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{CAData: caBundle, ServerName: host}})
	if err != nil {
		return nil, fmt.Errorf("failed to create tls config: %w", err)
	}
	hc := &http.Client{Transport: utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig})}
	c.http[key] = hc
	return hc, nil
}

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

package openstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"sigs.k8s.io/yaml"

	"github.com/capo-sharednet/capo-sharednet/internal/version"
)

// The keys of a clouds.yaml Secret, the same as CAPO's identityRef Secrets.
const (
	CloudsSecretKey = "clouds.yaml"
	CASecretKey     = "cacert"
)

// The bounds on what a cloud may cost the extension. A tenant chooses its
// cluster's Keystone (and, through its catalog, its Neutron and Octavia): a
// tarpit or an endless answer must cost a bounded time and memory, and only
// the callers of that credential (Sessions).
const (
	// DefaultTimeout bounds each HTTP request to OpenStack: a hung API must
	// not hang a reconciler (CAPO's client has no timeout; ours does).
	DefaultTimeout = 30 * time.Second
	// DefaultAuthTimeout bounds an authentication, every request of it.
	DefaultAuthTimeout = 30 * time.Second
	// DefaultCallTimeout bounds one call (a read and its retries).
	DefaultCallTimeout = time.Minute
	// DefaultMaxResponseBytes bounds the bytes of any answer, the largest
	// kind's (a list, all its pages): a VM project's largest list
	// (thousands of ports) is a few MiB. The smaller kinds have smaller
	// bounds, and every kind a bound on its JSON values (answerLimit).
	DefaultMaxResponseBytes = 8 << 20
	// tokenRefreshMargin: a session whose token expires sooner is
	// authenticated again before it is used (its token is validated by the
	// VM project's Keystone as it is, never re-issued on the way).
	tokenRefreshMargin = 5 * time.Minute
)

// Credential is a clouds.yaml entry and its optional CA bundle.
type Credential struct {
	Cloud  clientconfig.Cloud
	CACert []byte
	// Region overrides the cloud's region_name (CAPO's identityRef.region).
	Region string
	// Name says where it came from (namespace/secret:cloud), for errors.
	Name string
}

// region is the region the credential is used in, as CAPO chooses it.
func (c Credential) region() string {
	if c.Region != "" {
		return c.Region
	}
	return c.Cloud.RegionName
}

// CredentialFromData parses the data of a clouds.yaml Secret.
func CredentialFromData(data map[string][]byte, where, cloudName string) (Credential, error) {
	raw, ok := data[CloudsSecretKey]
	if !ok {
		return Credential{}, fmt.Errorf("%s has no key %q", where, CloudsSecretKey)
	}
	var clouds clientconfig.Clouds
	if err := yaml.Unmarshal(raw, &clouds); err != nil {
		return Credential{}, fmt.Errorf("%s: clouds.yaml does not parse: %w", where, err)
	}
	cloud, ok := clouds.Clouds[cloudName]
	if !ok {
		return Credential{}, fmt.Errorf("%s: clouds.yaml has no cloud %q", where, cloudName)
	}
	return Credential{Cloud: cloud, CACert: data[CASecretKey], Name: where}, nil
}

// Options tune a Session; the zero value is what production uses.
type Options struct {
	// Timeout of each HTTP request; DefaultTimeout when zero.
	Timeout time.Duration
	// AuthTimeout bounds an authentication; DefaultAuthTimeout when zero.
	AuthTimeout time.Duration
	// CallTimeout bounds one call with its retries; DefaultCallTimeout when zero.
	CallTimeout time.Duration
	// MaxResponseBytes caps the bytes of every kind of answer;
	// DefaultMaxResponseBytes when zero. A longer one fails the request.
	MaxResponseBytes int64
	// WrapTransport, when set, wraps the HTTP transport (tests count requests
	// or inject faults with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

func orDefault[T ~int | ~int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Session is an authenticated connection to one project.
type Session struct {
	provider  *gophercloud.ProviderClient
	projectID string
	region    string
	name      string
	network   *gophercloud.ServiceClient
	lb        *gophercloud.ServiceClient
	retry     retryPolicy
	// expiresAt is when the token Keystone issued at authentication expires.
	expiresAt time.Time
	// release lets go of the session's transport (Close).
	release func()
}

// NewSession authenticates with cred, as CAPO does (no environment
// variables, reauthentication allowed), and returns a Session scoped to its
// project. Close it when done with it (Sessions does).
func NewSession(ctx context.Context, cred Credential, opts Options) (*Session, error) {
	clientOpts := &clientconfig.ClientOpts{EnvPrefix: "NO_ENV_VARIABLES_"}
	if cred.Cloud.AuthInfo != nil {
		clientOpts.AuthInfo = cred.Cloud.AuthInfo
		clientOpts.AuthType = cred.Cloud.AuthType
		clientOpts.RegionName = cred.region()
		clientOpts.EndpointType = cred.Cloud.EndpointType
	}
	authOpts, err := clientconfig.AuthOptions(clientOpts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cred.Name, err)
	}
	provider, err := gcopenstack.NewClient(authOpts.IdentityEndpoint)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cred.Name, err)
	}
	provider.UserAgent.Prepend(version.UserAgent())
	tlsConfig, err := tlsConfigOf(cred)
	if err != nil {
		return nil, err
	}
	transport, release := acquireTransport(transportKeyOf(provider.IdentityBase, cred, tlsConfig), tlsConfig)
	counting := newCountingTransport(&boundedTransport{next: transport, maxBytes: orDefault(opts.MaxResponseBytes, DefaultMaxResponseBytes)})
	counting.set(map[string]string{provider.IdentityBase: ServiceIdentity})
	var rt http.RoundTripper = counting
	if opts.WrapTransport != nil {
		rt = opts.WrapTransport(rt)
	}
	provider.HTTPClient = http.Client{Transport: rt, Timeout: orDefault(opts.Timeout, DefaultTimeout)}
	s, err := open(ctx, cred, opts, provider, *authOpts, clientOpts.RegionName, counting)
	if err != nil {
		release()
		return nil, err
	}
	s.release = release
	return s, nil
}

// open authenticates provider and returns the Session of its project.
func open(ctx context.Context, cred Credential, opts Options, provider *gophercloud.ProviderClient, authOpts gophercloud.AuthOptions, region string, counting *countingTransport) (*Session, error) {
	authCtx, cancel := context.WithTimeout(ctx, orDefault(opts.AuthTimeout, DefaultAuthTimeout))
	defer cancel()
	// The session reauthenticates itself (keepTokenOnly).
	authOpts.AllowReauth = false
	if err := gcopenstack.Authenticate(authCtx, provider, authOpts); err != nil {
		return nil, fmt.Errorf("%s: authentication refused or failed: %w", cred.Name, err)
	}
	answer, err := readLogin(provider)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cred.Name, err)
	}
	if answer.Token.Project == nil || answer.Token.Project.ID == "" {
		return nil, fmt.Errorf("%s: the token is not scoped to a project (set project_id or project_name)", cred.Name)
	}
	// gophercloud asks the endpoints it chooses from for their versions.
	counting.addCatalog(&tokens.ServiceCatalog{Entries: answer.Token.Catalog})
	eo := gophercloud.EndpointOpts{Region: region, Availability: gophercloud.Availability(cred.Cloud.EndpointType)}
	if eo.Availability == "" {
		eo.Availability = gophercloud.AvailabilityPublic
	}
	network, err := gcopenstack.NewNetworkV2(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("%s: no network (Neutron) endpoint: %w", cred.Name, err)
	}
	retry := defaultRetry
	retry.budget = orDefault(opts.CallTimeout, DefaultCallTimeout)
	s := &Session{provider: provider, projectID: answer.Token.Project.ID, region: region, name: cred.Name, network: network, retry: retry}
	// An expiry that does not parse is none: the token is used until refused.
	s.expiresAt, _ = time.Parse(time.RFC3339, answer.Token.ExpiresAt)
	// Octavia is optional for facts and shares; its absence is reported where it is needed.
	if lb, err := gcopenstack.NewLoadBalancerV2(provider, eo); err == nil {
		s.lb = lb
	}
	counting.set(s.endpoints())
	if err := keepTokenOnly(provider, authOpts); err != nil {
		return nil, fmt.Errorf("%s: %w", cred.Name, err)
	}
	return s, nil
}

// login is what a session reads of Keystone's answer to its login.
type login struct {
	Token struct {
		ExpiresAt string `json:"expires_at"`
		Project   *struct {
			ID string `json:"id"`
		} `json:"project"`
		Catalog []tokens.CatalogEntry `json:"catalog"`
	} `json:"token"`
}

// readLogin reads provider's login answer, once: each of gophercloud's
// Extract functions decodes it whole again, twice.
func readLogin(provider *gophercloud.ProviderClient) (*login, error) {
	result, ok := provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return nil, fmt.Errorf("unexpected authentication result %T", provider.GetAuthResult())
	}
	var answer login
	if err := result.Result.ExtractInto(&answer); err != nil {
		return nil, fmt.Errorf("the answer of Keystone to the login does not parse: %w", err)
	}
	return &answer, nil
}

// endpoints are the base URLs the session sends requests to, by service.
func (s *Session) endpoints() map[string]string {
	out := map[string]string{s.provider.IdentityBase: ServiceIdentity, s.network.Endpoint: ServiceNetwork}
	if s.lb != nil {
		out[s.lb.Endpoint] = ServiceLoadBalancer
	}
	return out
}

// keepTokenOnly drops Keystone's answer from provider but for its token:
// the rest (the catalog, decoded into generic values and structs) would
// stay with the session as long as it is cached, and gophercloud's own
// reauthentication would keep a second copy. The session's endpoints are
// known by now.
func keepTokenOnly(provider *gophercloud.ProviderClient, authOpts gophercloud.AuthOptions) error {
	if err := provider.SetTokenAndAuthResult(tokenOnly(provider.Token())); err != nil {
		return err
	}
	provider.EndpointLocator = func(gophercloud.EndpointOpts) (string, error) {
		return "", errors.New("the session keeps no catalog: its endpoints were chosen when it authenticated")
	}
	provider.ReauthFunc = func(ctx context.Context) error {
		fresh, err := gcopenstack.NewClient(provider.IdentityEndpoint)
		if err != nil {
			return err
		}
		fresh.HTTPClient, fresh.UserAgent = provider.HTTPClient, provider.UserAgent
		if err := gcopenstack.Authenticate(ctx, fresh, authOpts); err != nil {
			return err
		}
		return provider.SetTokenAndAuthResult(tokenOnly(fresh.Token()))
	}
	return nil
}

// tokenOnly is what a session keeps of Keystone's answer.
type tokenOnly string

// ExtractTokenID implements gophercloud.AuthResult.
func (t tokenOnly) ExtractTokenID() (string, error) { return string(t), nil }

// Close lets go of the session's connections: their transport, once no
// other session uses it, closes its idle connections. A caller still
// holding the session may use it; its connections then close within
// idleConnTimeout of their last use.
func (s *Session) Close() {
	if s.release != nil {
		s.release()
	}
}

// tlsConfigOf is the TLS configuration of cred's clouds.yaml: verify and
// cacert, as CAPO reads them.
func tlsConfigOf(cred Credential) (*tls.Config, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cred.Cloud.Verify != nil {
		tlsConfig.InsecureSkipVerify = !*cred.Cloud.Verify
	}
	// A blank cacert (CAPO's templates default it to one newline) means the
	// host's CAs, as CAPO reads it.
	if len(bytes.TrimSpace(cred.CACert)) > 0 {
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(cred.CACert) {
			return nil, fmt.Errorf("%s: cacert holds no PEM certificate", cred.Name)
		}
	}
	return tlsConfig, nil
}

// ProjectID is the project the credential is scoped to, as its Keystone
// answered. For a cluster's credential (CAPO's identityRef) it is the
// cluster's project; see ProjectOfToken before trusting it for a grant.
func (s *Session) ProjectID() string { return s.projectID }

// Keystone is where the session authenticated: the identity base URL
// (scheme, host, port and path up to the API version), lower-cased host.
func (s *Session) Keystone() string {
	u, err := url.Parse(s.provider.IdentityBase)
	if err != nil {
		return s.provider.IdentityBase
	}
	u.Host = strings.ToLower(u.Host)
	u.Scheme = strings.ToLower(u.Scheme)
	return strings.TrimSuffix(u.String(), "/") + "/"
}

// Region is the region the session's endpoints come from.
func (s *Session) Region() string { return s.region }

// Token is the session's current token (never logged).
func (s *Session) Token() string { return s.provider.Token() }

// fresh says whether the session's token stays valid for a while yet.
func (s *Session) fresh(now time.Time) bool {
	return s.expiresAt.IsZero() || now.Add(tokenRefreshMargin).Before(s.expiresAt)
}

// ProjectOfToken asks this session's Keystone, over this session's own
// connection (its CA, its timeout), which project token is scoped to. The
// token authenticates its own validation (Keystone's token_subject rule), so
// no extra privilege is needed. A Keystone chosen by someone else cannot
// answer here: the URL and TLS settings are this session's.
func (s *Session) ProjectOfToken(ctx context.Context, token string) (string, error) {
	endpoint := strings.TrimSuffix(s.provider.IdentityEndpoint, "/")
	if !strings.HasSuffix(endpoint, "/v3") {
		endpoint = strings.TrimSuffix(s.provider.IdentityBase, "/") + "/v3"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/auth/tokens", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("X-Subject-Token", token)
	req.Header.Set("Accept", "application/json")
	resp, err := s.provider.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("validating a token at Keystone: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("validating a token at Keystone: answered %d", resp.StatusCode)
	}
	var body struct {
		Token struct {
			Project *struct {
				ID string `json:"id"`
			} `json:"project"`
		} `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", fmt.Errorf("validating a token at Keystone: %w", err)
	}
	if body.Token.Project == nil || body.Token.Project.ID == "" {
		return "", errors.New("validating a token at Keystone: the token is not scoped to a project")
	}
	return body.Token.Project.ID, nil
}

var errNoLoadBalancer = errors.New("no load-balancer (Octavia) endpoint in the catalog")

// ClusterCloud is what the extension does in a cluster's project, with the
// cluster's own credential.
type ClusterCloud interface {
	Identity
	NetworkFacts
	PortQuota
	LoadBalancers
	ProjectPorts
}

// VMCloud is what the extension does in the VM project, with a
// SharedNetwork's credential.
type VMCloud interface {
	Identity
	// ProjectOfToken asks this cloud's Keystone which project a token is for.
	ProjectOfToken(ctx context.Context, token string) (string, error)
	NetworkFacts
	Sharer
	RBACPolicyQuota
	SecurityGroups
}

// Identity is who a session is and where it authenticated.
type Identity interface {
	ProjectID() string
	Keystone() string
	Region() string
	Token() string
}

var (
	_ ClusterCloud = &Session{}
	_ VMCloud      = &Session{}
)

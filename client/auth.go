package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/httpbasic"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
)

// Auth types, named as keystoneauth and the openstack CLI name them.
const (
	AuthNone      = "none"
	AuthHTTPBasic = "http_basic"
	AuthPassword  = "password"
	AuthAppCred   = "v3applicationcredential"
	AuthToken     = "token"
)

// authAliases maps the names the openstack CLI accepts to the types above.
var authAliases = map[string]string{
	"none": AuthNone, "noauth": AuthNone,
	"http_basic": AuthHTTPBasic,
	"password":   AuthPassword, "v3password": AuthPassword,
	"v3applicationcredential": AuthAppCred, "applicationcredential": AuthAppCred,
	"token": AuthToken, "v3token": AuthToken,
}

// NormalizeAuthType returns the auth type an openstack CLI name stands for.
func NormalizeAuthType(name string) (string, error) {
	if t, ok := authAliases[strings.ToLower(name)]; ok {
		return t, nil
	}
	return "", fmt.Errorf("auth type %q is not supported (supported: none, http_basic, password, v3password, v3applicationcredential, token, v3token)", name)
}

// Config says where the API is and how to authenticate.
type Config struct {
	// URL is the Ironic endpoint (with or without /v1). Required for the
	// none and http_basic auth types; with Keystone it replaces the
	// catalog's baremetal endpoint.
	URL string
	// AuthType is one of the Auth* constants or an alias of one
	// (NormalizeAuthType); empty: http_basic when User is set, else none.
	AuthType string
	User     string // http_basic
	Password string
	// Keystone holds the identity endpoint, credentials and scope for the
	// password, application credential and token auth types.
	Keystone gophercloud.AuthOptions
	// Catalog selects the baremetal endpoint: region and interface.
	Catalog gophercloud.EndpointOpts
	TLS     *tls.Config  // CA and verification; nil: the system's
	HTTP    *http.Client // nil: a client with a 60 s timeout
}

func (cfg Config) authType() (string, error) {
	if cfg.AuthType == "" {
		if cfg.User != "" {
			return AuthHTTPBasic, nil
		}
		return AuthNone, nil
	}
	return NormalizeAuthType(cfg.AuthType)
}

func (cfg Config) httpClient() *http.Client {
	if cfg.HTTP != nil {
		return cfg.HTTP
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg.TLS,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// serviceClient builds the gophercloud baremetal client for cfg's auth
// type; Keystone types authenticate here, so bad credentials fail New.
func serviceClient(ctx context.Context, cfg Config) (*gophercloud.ServiceClient, error) {
	typ, err := cfg.authType()
	if err != nil {
		return nil, err
	}
	hc := cfg.httpClient()
	var sc *gophercloud.ServiceClient
	switch typ {
	case AuthNone:
		if cfg.URL == "" {
			return nil, errors.New("auth type none needs the Ironic endpoint (--os-endpoint or --url)")
		}
		sc, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: cfg.URL})
	case AuthHTTPBasic:
		if cfg.URL == "" || cfg.User == "" || cfg.Password == "" {
			return nil, errors.New("auth type http_basic needs the Ironic endpoint, a user name and a password")
		}
		sc, err = httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: cfg.URL, IronicUser: cfg.User, IronicUserPassword: cfg.Password})
	default:
		return keystoneClient(ctx, cfg, typ, hc)
	}
	if err != nil {
		return nil, err
	}
	sc.HTTPClient = *hc
	return sc, nil
}

// keystoneClient authenticates with Keystone (gophercloud's identity v3
// client) and finds the baremetal endpoint in the catalog, unless cfg.URL
// overrides it. The token is renewed when Ironic answers 401.
func keystoneClient(ctx context.Context, cfg Config, typ string, hc *http.Client) (*gophercloud.ServiceClient, error) {
	ao := cfg.Keystone
	if ao.IdentityEndpoint == "" {
		return nil, fmt.Errorf("auth type %s needs the identity endpoint (--os-auth-url, OS_AUTH_URL or auth_url in clouds.yaml)", typ)
	}
	switch typ {
	case AuthPassword:
		if ao.Password == "" || (ao.Username == "" && ao.UserID == "") {
			return nil, errors.New("password authentication needs a user name (or id) and a password")
		}
		ao.ApplicationCredentialID, ao.ApplicationCredentialName, ao.ApplicationCredentialSecret, ao.TokenID = "", "", "", ""
	case AuthAppCred:
		if ao.ApplicationCredentialSecret == "" || (ao.ApplicationCredentialID == "" && ao.ApplicationCredentialName == "") {
			return nil, errors.New("application credential authentication needs the credential's id (or name) and secret")
		}
		ao.Password, ao.TokenID, ao.Scope, ao.TenantID, ao.TenantName = "", "", nil, "", ""
	case AuthToken:
		if ao.TokenID == "" {
			return nil, errors.New("token authentication needs a token (--os-token or OS_TOKEN)")
		}
		ao.Username, ao.UserID, ao.Password, ao.DomainID, ao.DomainName = "", "", "", "", ""
		ao.ApplicationCredentialID, ao.ApplicationCredentialName, ao.ApplicationCredentialSecret = "", "", ""
	}
	// A token, unlike a password, cannot be used to get a new one.
	ao.AllowReauth = typ != AuthToken
	pc, err := openstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return nil, fmt.Errorf("identity endpoint %q: %w", ao.IdentityEndpoint, err)
	}
	pc.HTTPClient = *hc
	pc.UserAgent.Prepend("castiron")
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		return nil, authError(ao.IdentityEndpoint, err)
	}
	if cfg.URL != "" {
		return &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: gophercloud.NormalizeURL(cfg.URL), Type: "baremetal"}, nil
	}
	sc, err := openstack.NewBareMetalV1(pc, cfg.Catalog)
	if err != nil {
		iface := cfg.Catalog.Availability
		if iface == "" {
			iface = gophercloud.AvailabilityPublic
		}
		return nil, fmt.Errorf("no baremetal endpoint in the catalog from %s (region %q, interface %s): %w", ao.IdentityEndpoint, cfg.Catalog.Region, iface, err)
	}
	return sc, nil
}

// authError says that authentication failed, with Keystone's message for
// an HTTP error (never the credentials).
func authError(endpoint string, err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		path := ue.URL
		if u, perr := url.Parse(ue.URL); perr == nil {
			path = u.Path
		}
		return fmt.Errorf("authentication at %s failed: %w", endpoint, decodeError(ue.Method, path, ue.Actual, ue.Body))
	}
	return fmt.Errorf("authentication at %s failed: %w", endpoint, err)
}

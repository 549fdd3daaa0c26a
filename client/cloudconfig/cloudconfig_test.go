package cloudconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"castiron/client"
)

// isolate clears every variable Resolve or gophercloud reads and gives the
// test its own HOME, XDG_CONFIG_HOME and working directory; it returns the
// working directory.
func isolate(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OS_") || strings.HasPrefix(k, "CASTIRON_") {
			t.Setenv(k, "")
		}
	}
	dir := t.TempDir()
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	wd := filepath.Join(dir, "wd")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	return wd
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func resolve(t *testing.T, env map[string]string, args ...string) (client.Config, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o.Resolve()
}

const cloudsYAML = `clouds:
  lab:
    auth:
      auth_url: http://keystone.lab:5000
      username: operator
      password: file-pass
      project_name: infra
      user_domain_name: Users
      project_domain_name: Projects
    region_name: RegionLab
    interface: internal
  byid:
    auth:
      auth_url: http://keystone.lab:5000/v3
      user_id: u-123
      password: file-pass
      project_id: p-456
  appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: http://keystone.lab:5000
      application_credential_id: ac-1
      application_credential_secret: ac-secret
  shared-domain:
    auth:
      auth_url: http://keystone.lab:5000
      username: operator
      password: file-pass
      project_name: infra
      domain_name: Corp
  bifrost:
    auth_type: none
    baremetal_endpoint_override: http://10.0.0.1:6385
  basic:
    auth_type: http_basic
    auth:
      username: admin
      password: basic-pass
      endpoint: https://ironic.lab:6385
`

func TestResolve(t *testing.T) {
	defScope := func(p, d string) *gophercloud.AuthScope { return &gophercloud.AuthScope{ProjectName: p, DomainID: d} }
	for _, tc := range []struct {
		name  string
		files map[string]string // relative to the test dir: wd/, xdg/, home/
		env   map[string]string
		args  []string
		want  client.Config
	}{
		{"nothing: noauth on this host", nil, nil, nil,
			client.Config{AuthType: "none", URL: DefaultEndpoint}},
		{"castiron's own variables: http_basic", nil,
			map[string]string{"CASTIRON_URL": "http://h:1", "CASTIRON_USER": "op", "CASTIRON_PASSWORD": "pw"}, nil,
			client.Config{AuthType: "http_basic", URL: "http://h:1", User: "op", Password: "pw"}},
		{"--url, --user and --password beat the environment", nil,
			map[string]string{"CASTIRON_URL": "http://h:1", "CASTIRON_USER": "op", "CASTIRON_PASSWORD": "pw"},
			[]string{"--url", "http://h:2", "--user", "root", "--password", "x"},
			client.Config{AuthType: "http_basic", URL: "http://h:2", User: "root", Password: "x"}},
		{"OS_ENDPOINT with OS_AUTH_TYPE none", nil,
			map[string]string{"OS_AUTH_TYPE": "none", "OS_ENDPOINT": "http://ironic:6385", "OS_USERNAME": "ignored"}, nil,
			client.Config{AuthType: "none", URL: "http://ironic:6385"}},
		{"openrc: password, default domains", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000/v3", "OS_USERNAME": "admin", "OS_PASSWORD": "pw", "OS_PROJECT_NAME": "admin"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000/v3", Username: "admin",
				Password: "pw", DomainID: "default", Scope: defScope("admin", "default")}}},
		{"openrc with domain names, region, interface, OS_DEFAULT_DOMAIN unused", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_USERNAME": "admin", "OS_PASSWORD": "pw", "OS_TENANT_NAME": "admin",
				"OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default", "OS_REGION_NAME": "R1", "OS_INTERFACE": "admin", "OS_DEFAULT_DOMAIN": "other"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000", Username: "admin",
				Password: "pw", DomainName: "Default", Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainName: "Default"}},
				Catalog: gophercloud.EndpointOpts{Region: "R1", Availability: gophercloud.AvailabilityAdmin}}},
		{"OS_DEFAULT_DOMAIN fills both domains", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_USERNAME": "admin", "OS_PASSWORD": "pw", "OS_PROJECT_NAME": "admin", "OS_DEFAULT_DOMAIN": "d9"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000", Username: "admin",
				Password: "pw", DomainID: "d9", Scope: defScope("admin", "d9")}}},
		{"application credential from the environment", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_APPLICATION_CREDENTIAL_ID": "ac", "OS_APPLICATION_CREDENTIAL_SECRET": "s",
				"OS_AUTH_TYPE": "v3applicationcredential"}, nil,
			client.Config{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000",
				ApplicationCredentialID: "ac", ApplicationCredentialSecret: "s"}}},
		{"application credential: the type follows from the id", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_APPLICATION_CREDENTIAL_ID": "ac", "OS_APPLICATION_CREDENTIAL_SECRET": "s"}, nil,
			client.Config{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000",
				ApplicationCredentialID: "ac", ApplicationCredentialSecret: "s"}}},
		{"token", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_TOKEN": "tok", "OS_PROJECT_ID": "p1"}, nil,
			client.Config{AuthType: "token", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000", TokenID: "tok",
				Scope: &gophercloud.AuthScope{ProjectID: "p1"}}}},
		{"system scope", nil,
			map[string]string{"OS_AUTH_URL": "http://ks:5000", "OS_USERNAME": "admin", "OS_PASSWORD": "pw", "OS_SYSTEM_SCOPE": "all"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks:5000", Username: "admin",
				Password: "pw", DomainID: "default", Scope: &gophercloud.AuthScope{System: true}}}},

		{"clouds.yaml in the working directory", map[string]string{"wd/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "lab"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://keystone.lab:5000", Username: "operator",
				Password: "file-pass", DomainName: "Users", Scope: &gophercloud.AuthScope{ProjectName: "infra", DomainName: "Projects"}},
				Catalog: gophercloud.EndpointOpts{Region: "RegionLab", Availability: gophercloud.AvailabilityInternal}}},
		{"--os-cloud; environment over the file, flags over the environment; the file's project stays",
			map[string]string{"xdg/openstack/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "nope", "OS_PASSWORD": "env-pass", "OS_PROJECT_NAME": "env-project", "OS_REGION_NAME": "RegionEnv"},
			[]string{"--os-cloud", "lab", "--os-project-name", "flag-project", "--os-interface", "public"},
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://keystone.lab:5000", Username: "operator",
				Password: "env-pass", DomainName: "Users", Scope: &gophercloud.AuthScope{ProjectName: "infra", DomainName: "Projects"}},
				Catalog: gophercloud.EndpointOpts{Region: "RegionEnv", Availability: gophercloud.AvailabilityPublic}}},
		{"a cloud without a project: the flag's, over the environment's, default domain",
			map[string]string{"wd/clouds.yaml": "clouds:\n  np:\n    auth:\n      auth_url: http://ks\n      username: u\n      password: p\n"},
			map[string]string{"OS_CLOUD": "np", "OS_PROJECT_NAME": "env-project"}, []string{"--os-project-name", "flag-project"},
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://ks", Username: "u",
				Password: "p", DomainID: "default", Scope: defScope("flag-project", "default")}}},
		{"ids from the file; a project name from the environment does not replace the file's project id",
			map[string]string{"home/.config/openstack/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "byid", "XDG_CONFIG_HOME": "", "OS_PROJECT_NAME": "ignored"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://keystone.lab:5000/v3", UserID: "u-123",
				Password: "file-pass", Scope: &gophercloud.AuthScope{ProjectID: "p-456"}}}},
		{"OS_CLIENT_CONFIG_FILE, application credential cloud, secret from secure.yaml",
			map[string]string{"wd/clouds.yaml": "clouds: {}", "cfg/c.yaml": cloudsYAML, "cfg/secure.yaml": "clouds:\n  appcred:\n    auth:\n      application_credential_secret: from-secure\n"},
			map[string]string{"OS_CLOUD": "appcred", "OS_CLIENT_CONFIG_FILE": "../cfg/c.yaml"}, nil,
			client.Config{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://keystone.lab:5000",
				ApplicationCredentialID: "ac-1", ApplicationCredentialSecret: "from-secure"}}},
		{"domain_name with a project: the user's and the project's domain", map[string]string{"wd/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "shared-domain"}, nil,
			client.Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: "http://keystone.lab:5000", Username: "operator",
				Password: "file-pass", DomainName: "Corp", Scope: &gophercloud.AuthScope{ProjectName: "infra", DomainName: "Corp"}}}},
		{"bifrost's cloud: none, no auth section, endpoint override", map[string]string{"wd/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "bifrost"}, nil,
			client.Config{AuthType: "none", URL: "http://10.0.0.1:6385"}},
		{"http_basic cloud with auth.endpoint; --url wins", map[string]string{"wd/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "basic"}, []string{"--url", "https://other:6385"},
			client.Config{AuthType: "http_basic", URL: "https://other:6385", User: "admin", Password: "basic-pass"}},
		{"OS_AUTH_TYPE beats the file's auth_type", map[string]string{"wd/clouds.yaml": cloudsYAML},
			map[string]string{"OS_CLOUD": "basic", "OS_AUTH_TYPE": "none"}, nil,
			client.Config{AuthType: "none", URL: "https://ironic.lab:6385"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := isolate(t)
			for p, body := range tc.files {
				write(t, filepath.Join(filepath.Dir(wd), p), body)
			}
			got, err := resolve(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got.TLS == nil || got.TLS.InsecureSkipVerify || got.TLS.RootCAs != nil {
				t.Errorf("TLS %+v, want gophercloud's default", got.TLS)
			}
			got.TLS = nil
			if got.Catalog.Availability == "" {
				got.Catalog.Availability = gophercloud.AvailabilityPublic
			}
			if tc.want.Catalog.Availability == "" {
				tc.want.Catalog.Availability = gophercloud.AvailabilityPublic
			}
			if g, w := describe(got), describe(tc.want); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// describe prints a Config with its scope (a pointer) spelled out.
func describe(c client.Config) string {
	scope := "<nil>"
	if s := c.Keystone.Scope; s != nil {
		scope = fmt.Sprintf("%+v", *s)
	}
	c.Keystone.Scope = nil
	return fmt.Sprintf("%+v\nscope %s", c, scope)
}

// testCA is a self-signed CA certificate in PEM.
func testCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestResolveTLS(t *testing.T) {
	wd := isolate(t)
	ca := filepath.Join(wd, "ca.pem")
	write(t, ca, testCA(t))
	cfg, err := resolve(t, map[string]string{"OS_CACERT": ca})
	if err != nil || cfg.TLS == nil || cfg.TLS.RootCAs == nil || cfg.TLS.InsecureSkipVerify {
		t.Fatalf("OS_CACERT: %+v %v", cfg.TLS, err)
	}
	cfg, err = resolve(t, map[string]string{"OS_INSECURE": "true"})
	if err != nil || !cfg.TLS.InsecureSkipVerify {
		t.Fatalf("OS_INSECURE: %+v %v", cfg.TLS, err)
	}
	cfg, err = resolve(t, map[string]string{"OS_INSECURE": "true"}, "--insecure=false")
	if err != nil || cfg.TLS.InsecureSkipVerify {
		t.Fatalf("--insecure=false over OS_INSECURE: %+v %v", cfg.TLS, err)
	}
	write(t, filepath.Join(wd, "clouds.yaml"), "clouds:\n  tls:\n    verify: false\n    auth_type: none\n    auth: {endpoint: 'https://x:6385'}\n")
	cfg, err = resolve(t, map[string]string{"OS_CLOUD": "tls", "OS_INSECURE": ""})
	if err != nil || !cfg.TLS.InsecureSkipVerify || cfg.URL != "https://x:6385" {
		t.Fatalf("verify: false in clouds.yaml: %+v %v", cfg, err)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   map[string]string
		want  string
	}{
		{"no clouds.yaml", nil, map[string]string{"OS_CLOUD": "lab"}, "clouds.yaml not found (searched clouds.yaml, "},
		{"unknown cloud", map[string]string{"wd/clouds.yaml": cloudsYAML}, map[string]string{"OS_CLOUD": "nope"}, `no cloud "nope"`},
		{"not YAML", map[string]string{"wd/clouds.yaml": "clouds: [\n"}, map[string]string{"OS_CLOUD": "lab"}, "clouds.yaml"},
		{"bad interface", nil, map[string]string{"OS_INTERFACE": "private"}, `interface "private"`},
		{"bad OS_INSECURE", nil, map[string]string{"OS_INSECURE": "maybe"}, "OS_INSECURE"},
		{"unsupported auth type", nil, map[string]string{"OS_AUTH_TYPE": "v3oidcpassword"}, `auth type "v3oidcpassword" is not supported`},
		{"two scopes", nil, map[string]string{"OS_AUTH_URL": "http://ks", "OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_PROJECT_ID": "p", "OS_SYSTEM_SCOPE": "all"}, "multiple targets"},
		{"system scope other than all", nil, map[string]string{"OS_AUTH_URL": "http://ks", "OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_SYSTEM_SCOPE": "some"}, "only all"},
		{"missing CA file", nil, map[string]string{"OS_CACERT": "/nonexistent/ca.pem"}, "CA cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := isolate(t)
			for p, body := range tc.files {
				write(t, filepath.Join(filepath.Dir(wd), p), body)
			}
			_, err := resolve(t, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

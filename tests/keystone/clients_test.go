package keystone_test

// The stub against the stock clients: gophercloud's AuthenticatedClient and
// tempest's own auth provider and REST client (Debian python3-tempest).

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"castiron/tests/keystone"
)

// fakeIronic answers Ironic's version document at / (gophercloud discovers
// the endpoint's versions) and an empty node list anywhere else.
func fakeIronic() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/" {
			w.Write([]byte(`{"name": "OpenStack Ironic API", "versions": [{"id": "v1", "status": "CURRENT", "version": "1.89", "min_version": "1.1",
				"links": [{"href": "http://` + r.Host + `/v1/", "rel": "self"}]}]}`))
			return
		}
		w.Write([]byte(`{"nodes": []}`))
	})
}

// python is Debian's interpreter, where python3-tempest installs (a python3
// earlier in PATH, e.g. pyenv's, does not see Debian's packages).
func python() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func TestGophercloud(t *testing.T) {
	ks := keystone.Start(t, keystone.Config{})
	admin := ks.AddAdmin("s3cret")
	cred := ks.AddAppCredential(keystone.AppCredential{Name: "gc", Secret: "gc-secret", UserID: admin.User.ID, ProjectID: admin.Project.ID})
	guard, guardURL := ks.StartGuard(t, fakeIronic())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct {
		name    string
		opts    gophercloud.AuthOptions
		iface   gophercloud.Availability
		appCred string
	}{
		{"password, versionless auth_url (discovery), public",
			gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), Username: "admin", Password: "s3cret", DomainName: "Default", TenantName: "admin"},
			gophercloud.AvailabilityPublic, ""},
		{"password, /v3 auth_url, ids, internal",
			gophercloud.AuthOptions{IdentityEndpoint: ks.URL() + "/v3", UserID: admin.User.ID, Password: "s3cret", TenantID: admin.Project.ID},
			gophercloud.AvailabilityInternal, ""},
		{"application credential, admin",
			gophercloud.AuthOptions{IdentityEndpoint: ks.URL() + "/v3/", ApplicationCredentialID: cred.ID, ApplicationCredentialSecret: "gc-secret"},
			gophercloud.AvailabilityAdmin, cred.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(guard.Passed())
			pc, err := openstack.AuthenticatedClient(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			bm, err := openstack.NewBareMetalV1(pc, gophercloud.EndpointOpts{Region: keystone.DefaultRegion, Availability: tc.iface})
			if err != nil {
				t.Fatal(err)
			}
			if bm.Endpoint != guardURL+"/" {
				t.Errorf("baremetal endpoint %q, want %q", bm.Endpoint, guardURL+"/")
			}
			pages, err := nodes.List(bm, nil).AllPages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if empty, err := pages.IsEmpty(); err != nil || !empty {
				t.Errorf("list: %v %v", empty, err)
			}
			var passed []keystone.Passed
			for _, p := range guard.Passed()[before:] {
				if p.Path != "/" { // gophercloud's version discovery sends the token too
					passed = append(passed, p)
				}
			}
			if len(passed) != 1 || passed[0].Path != "/v1/nodes" || passed[0].Token.UserName != "admin" || passed[0].Token.ProjectName != "admin" || passed[0].Token.AppCredentialID != tc.appCred {
				t.Errorf("the guard saw %+v", passed)
			}
		})
	}

	_, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), Username: "admin", Password: "wrong", DomainName: "Default", TenantName: "admin"})
	if !gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) {
		t.Errorf("wrong password: %v", err)
	}
	pc, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), Username: "admin", Password: "s3cret", DomainName: "Default", TenantName: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openstack.NewBareMetalV1(pc, gophercloud.EndpointOpts{Region: "RegionTwo"}); err == nil {
		t.Error("an unknown region found an endpoint")
	}
}

// tempestScript authenticates with tempest's KeystoneV3AuthProvider the way
// tempest does with pre-provisioned admin credentials, resolves the
// baremetal endpoint from the catalog and sends one request with tempest's
// RestClient; then tries a wrong password.
const tempestScript = `
import json, sys
from tempest.lib import auth, exceptions
from tempest.lib.common import rest_client
url = sys.argv[1] + '/v3'
creds = auth.get_credentials(url, fill_in=True, identity_version='v3',
    username='admin', password='s3cret', project_name='admin',
    user_domain_name='Default', project_domain_name='Default')
prov = auth.KeystoneV3AuthProvider(creds, url)
auth_data = prov.get_auth()  # a new provider resets creds until it has a token
out = {'project_id': creds.project_id, 'user_id': creds.user_id,
       'expired': prov.is_expired(auth_data)}
for iface in ('public', 'internal', 'admin'):
    out[iface] = prov.base_url({'service': 'baremetal', 'endpoint_type': iface + 'URL', 'region': 'RegionOne'})
client = rest_client.RestClient(prov, 'baremetal', 'RegionOne')
resp, body = client.get('v1/nodes')
out['status'] = resp.status
out['body'] = json.loads(body)
sysprov = auth.KeystoneV3AuthProvider(auth.get_credentials(url, fill_in=False, identity_version='v3',
    username='admin', password='s3cret', user_domain_name='Default'), url, scope='system')
out['system'] = sysprov.auth_data[1].get('system')
bad = auth.get_credentials(url, fill_in=False, identity_version='v3', username='admin',
    password='wrong', project_name='admin', user_domain_name='Default', project_domain_name='Default')
try:
    auth.KeystoneV3AuthProvider(bad, url).get_token()
    out['wrong'] = 'accepted'
except exceptions.Unauthorized as e:
    out['wrong'] = str(e)
print(json.dumps(out))
`

func TestTempestAuthProvider(t *testing.T) {
	if err := exec.Command(python(), "-c", "import tempest.lib.auth").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tempest.lib not importable (CI=true, so this is a failure): install python3-tempest")
		}
		t.Skip("tempest.lib not importable: apt-get install python3-tempest")
	}
	ks := keystone.Start(t, keystone.Config{})
	admin := ks.AddAdmin("s3cret")
	guard, guardURL := ks.StartGuard(t, fakeIronic())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python(), "-c", tempestScript, ks.URL())
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%v\n%s\n%s", err, out, stderr)
	}
	var got struct {
		ProjectID               string `json:"project_id"`
		UserID                  string `json:"user_id"`
		Expired                 bool
		Public, Internal, Admin string
		Status                  int
		Body                    map[string]any
		System                  map[string]any
		Wrong                   string
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.ProjectID != admin.Project.ID || got.UserID != admin.User.ID || got.Expired {
		t.Errorf("credentials: %+v\n%s", got, out)
	}
	for _, u := range []string{got.Public, got.Internal, got.Admin} {
		if u != guardURL {
			t.Errorf("base_url %q, want %q", u, guardURL)
		}
	}
	if got.Status != 200 || got.Body["nodes"] == nil || got.System["all"] != true {
		t.Errorf("%+v", got)
	}
	if !strings.Contains(got.Wrong, "requires authentication") {
		t.Errorf("wrong password: %q", got.Wrong)
	}
	if p := guard.Passed(); len(p) != 1 || p[0].Token.UserName != "admin" || p[0].Path != "/v1/nodes" {
		t.Errorf("the guard saw %+v", p)
	}
}

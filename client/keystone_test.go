package client

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"castiron/tests/keystone"
)

// behindKeystone puts the stub Keystone's guard in front of an Ironic 21
// lookalike: only requests with a token the stub issued get through.
func behindKeystone(t *testing.T) (*keystone.Server, keystone.Admin, *keystone.Guard, string) {
	srv, _ := ironic21(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"nodes":[{"uuid":"a","name":"n-a"}]}`))
	})
	target, _ := url.Parse(srv.URL)
	ks := keystone.Start(t, keystone.Config{})
	admin := ks.AddAdmin("s3cret")
	g, gurl := ks.StartGuard(t, httputil.NewSingleHostReverseProxy(target))
	return ks, admin, g, gurl
}

// listed reports whether the guard let a node list through with admin's token.
func listed(g *keystone.Guard, appCred string) bool {
	for _, p := range g.Passed() {
		if p.Path == "/v1/nodes/detail" && p.Token.UserName == "admin" && p.Token.ProjectName == "admin" && p.Token.AppCredentialID == appCred {
			return true
		}
	}
	return false
}

func TestKeystoneAuth(t *testing.T) {
	ks, admin, g, gurl := behindKeystone(t)
	cred := ks.AddAppCredential(keystone.AppCredential{Name: "c", Secret: "c-secret", UserID: admin.User.ID, ProjectID: admin.Project.ID})
	ctx := context.Background()
	password := gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), Username: "admin", Password: "s3cret", DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainName: "Default"}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		appCred string
	}{
		{"password, catalog", Config{AuthType: "password", Keystone: password}, ""},
		{"v3password, internal interface", Config{AuthType: "v3password", Keystone: password,
			Catalog: gophercloud.EndpointOpts{Region: "RegionOne", Availability: gophercloud.AvailabilityInternal}}, ""},
		{"application credential", Config{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{
			IdentityEndpoint: ks.URL() + "/v3", ApplicationCredentialID: cred.ID, ApplicationCredentialSecret: "c-secret"}}, cred.ID},
		{"password, endpoint given", Config{AuthType: "password", Keystone: password, URL: gurl + "/v1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(g.Passed())
			c, err := New(ctx, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := c.ListNodes(ctx, nil)
			if err != nil || len(nodes) != 1 || nodes[0].Name != "n-a" || c.Version() != "1.82" {
				t.Fatalf("%v %v %s", err, nodes, c.Version())
			}
			if len(g.Passed()) == before || !listed(g, tc.appCred) {
				t.Errorf("the guard did not see the list with admin's token: %+v", g.Passed()[before:])
			}
		})
	}
}

func TestKeystoneAuthFailures(t *testing.T) {
	ks, _, g, gurl := behindKeystone(t)
	ctx := context.Background()
	_, err := New(ctx, Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(),
		Username: "admin", Password: "wrong", DomainName: "Default", TenantName: "admin"}})
	if err == nil || !strings.Contains(err.Error(), "authentication at "+ks.URL()+" failed: POST /v3/auth/tokens: 401") ||
		!strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "The request you have made requires authentication.") ||
		strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v", err)
	}
	_, err = New(ctx, Config{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(),
		ApplicationCredentialID: "nope", ApplicationCredentialSecret: "x"}})
	if StatusOf(err) != 401 {
		t.Errorf("unknown application credential: %v", err)
	}
	_, err = New(ctx, Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(),
		Username: "admin", Password: "s3cret", DomainName: "Default", TenantName: "admin"}, Catalog: gophercloud.EndpointOpts{Region: "RegionTwo"}})
	if err == nil || !strings.Contains(err.Error(), `no baremetal endpoint in the catalog`) || !strings.Contains(err.Error(), `"RegionTwo"`) {
		t.Errorf("unknown region: %v", err)
	}
	for _, cfg := range []Config{
		{AuthType: "password"},
		{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), Username: "admin"}},
		{AuthType: "v3applicationcredential", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), ApplicationCredentialID: "x"}},
		{AuthType: "token", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL()}},
		{AuthType: "v3oidcpassword", URL: gurl},
		{AuthType: "none"},
		{AuthType: "http_basic", URL: gurl, User: "u"},
	} {
		if _, err := New(ctx, cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
	if len(g.Passed()) != 0 {
		t.Errorf("requests got through: %+v", g.Passed())
	}
	// A client that sends no token is turned away by the guard: the
	// version document is public, the nodes are not.
	c, err := New(ctx, Config{URL: gurl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListNodes(ctx, nil); StatusOf(err) != 401 || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("noauth behind Keystone: %v", err)
	}
}

// TestKeystoneTokenRenewal: when Ironic refuses the token (expired or
// revoked), the client gets a new one with its credentials and carries on;
// a token given by the operator cannot be renewed.
func TestKeystoneTokenRenewal(t *testing.T) {
	ks, admin, g, _ := behindKeystone(t)
	ctx := context.Background()
	c, err := New(ctx, Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(),
		UserID: admin.User.ID, Password: "s3cret", TenantID: admin.Project.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if n := ks.RevokeTokens(admin.User.ID); n != 1 {
		t.Fatalf("%d live tokens, want 1", n)
	}
	if _, err := c.ListNodes(ctx, nil); err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	if g.Denied() != 1 || !listed(g, "") {
		t.Errorf("guard: %s", g)
	}

	// The operator's own token: valid, then revoked.
	tc, err := New(ctx, Config{AuthType: "password", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(),
		UserID: admin.User.ID, Password: "s3cret", TenantID: admin.Project.ID}})
	if err != nil {
		t.Fatal(err)
	}
	tok := tc.sc.Token()
	c, err = New(ctx, Config{AuthType: "v3token", Keystone: gophercloud.AuthOptions{IdentityEndpoint: ks.URL(), TokenID: tok, TenantID: admin.Project.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListNodes(ctx, nil); err != nil {
		t.Fatalf("token auth: %v", err)
	}
	ks.RevokeTokens(admin.User.ID)
	if _, err := c.ListNodes(ctx, nil); StatusOf(err) != 401 {
		t.Errorf("revoked operator token: %v", err)
	}
}

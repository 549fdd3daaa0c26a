package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"go.yaml.in/yaml/v3"
)

func waitFile(t *testing.T, path string, done <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
		select {
		case err := <-done:
			t.Fatalf("keystone-stub ended before writing %s: %v", path, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 30 s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunWithGuard runs the command as a script would: users and an
// application credential from flags, a guard in front of a service, the
// URLs in files; then authenticates with gophercloud and reaches the service
// through the catalog.
func TestRunWithGuard(t *testing.T) {
	var gotToken []string
	var mu sync.Mutex
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotToken = append(gotToken, r.Header.Get("X-User-Name")+" "+r.Header.Get("X-Roles"))
		mu.Unlock()
		w.Write([]byte(`{"nodes": []}`))
	}))
	defer backend.Close()

	dir := t.TempDir()
	ksFile, guardFile := filepath.Join(dir, "ks.url"), filepath.Join(dir, "guard.url")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder // read only once run has returned
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-admin-password", "adm", "-url-file", ksFile, "-guard", backend.URL, "-guard-url-file", guardFile,
			"-user", "demo:demo-pass", "-user", "ops:ops-pass:infra:admin,member:reader", "-app-credential", "ac1:ac-secret:ops"}, &out)
	}()
	ksURL, guardURL := waitFile(t, ksFile, done), waitFile(t, guardFile, done)

	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	for _, tc := range []struct {
		opts gophercloud.AuthOptions
		want string // user and roles the backend saw
	}{
		{gophercloud.AuthOptions{IdentityEndpoint: ksURL, Username: "admin", Password: "adm", DomainName: "Default", TenantName: "admin"}, "admin admin,manager,member,reader"},
		{gophercloud.AuthOptions{IdentityEndpoint: ksURL, Username: "demo", Password: "demo-pass", DomainName: "Default", TenantName: "demo"}, "demo member,reader"},
		{gophercloud.AuthOptions{IdentityEndpoint: ksURL, Username: "ops", Password: "ops-pass", DomainName: "Default", TenantName: "infra"}, "ops admin,member,manager,reader"}, // admin implies manager, member reader
		{gophercloud.AuthOptions{IdentityEndpoint: ksURL, ApplicationCredentialID: "ac1", ApplicationCredentialSecret: "ac-secret"}, "ops admin,member,manager,reader"},          // admin implies manager, member reader
	} {
		pc, err := openstack.AuthenticatedClient(rctx, tc.opts)
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		ep, err := pc.EndpointLocator(gophercloud.EndpointOpts{Type: "baremetal", Availability: gophercloud.AvailabilityPublic})
		if err != nil || strings.TrimSuffix(ep, "/") != guardURL {
			t.Fatalf("baremetal endpoint %q (%v), want %s", ep, err, guardURL)
		}
		res, err := pc.Request(rctx, "GET", guardURL+"/v1/nodes", &gophercloud.RequestOpts{OkCodes: []int{200}})
		if err != nil {
			t.Fatalf("through the guard: %v", err)
		}
		res.Body.Close()
		mu.Lock()
		last := gotToken[len(gotToken)-1]
		mu.Unlock()
		if last != tc.want {
			t.Errorf("backend saw %q, want %q", last, tc.want)
		}
	}
	// The ops user's system roles allow a system-scoped token.
	if _, err := openstack.AuthenticatedClient(rctx, gophercloud.AuthOptions{IdentityEndpoint: ksURL, Username: "ops", Password: "ops-pass",
		DomainName: "Default", Scope: &gophercloud.AuthScope{System: true}}); err != nil {
		t.Errorf("system scope: %v", err)
	}
	if res, err := http.Get(guardURL + "/v1/nodes"); err != nil || res.StatusCode != 401 {
		t.Errorf("no token through the guard: %v %v", res, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
		if !strings.Contains(out.String(), "identity "+ksURL+"\n") || !strings.Contains(out.String(), "baremetal "+guardURL+"\n") {
			t.Errorf("stdout %q", out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop when its context ended")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-user", "nopass"},
		{"-app-credential", "onlyid"},
		{"-app-credential", "id:secret:nobody"},
		{"-guard", "http://127.0.0.1:1", "-baremetal", "http://127.0.0.1:2"},
		{"-guard", "not a url"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, append(args, "-listen", "127.0.0.1:0"), io.Discard)
		cancel()
		if err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// TestTempestAccounts: the accounts file lists a project and a system entry
// per created user, and each entry authenticates as tempest will ask.
func TestTempestAccounts(t *testing.T) {
	dir := t.TempDir()
	ksFile, accFile := filepath.Join(dir, "ks.url"), filepath.Join(dir, "accounts.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-admin-password", "pw", "-url-file", ksFile, "-tempest-accounts", accFile, "-tempest-users", "3"}, io.Discard)
	}()
	ksURL := waitFile(t, ksFile, done)
	b, err := os.ReadFile(accFile)
	if err != nil {
		t.Fatal(err)
	}
	var accounts []map[string]any
	if err := yaml.Unmarshal(b, &accounts); err != nil || len(accounts) != 6 {
		t.Fatalf("%v: %s", err, b)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	for _, a := range accounts {
		opts := gophercloud.AuthOptions{IdentityEndpoint: ksURL, Username: a["username"].(string), Password: a["password"].(string), DomainName: "Default"}
		if a["system"] == "all" {
			opts.Scope = &gophercloud.AuthScope{System: true}
		} else {
			opts.Scope = &gophercloud.AuthScope{ProjectName: a["project_name"].(string), DomainName: "Default"}
		}
		if _, err := openstack.AuthenticatedClient(rctx, opts); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

package workflow

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi"
	"castiron/httpapi/identity"
	"castiron/storage"
	"castiron/tests/keystone"
)

// TestCommandsUnderPolicy runs the client commands against castiron
// enforcing Ironic's policies itself: --auth-strategy keystone (castiron
// validating the stub's tokens, credentials from clouds.yaml) and
// http_basic with a users file (credentials from OS_*). An admin's import
// and provide go through; a reader lists but its provide is refused with
// Ironic's 403 naming the rule, exit 1; a project member sees only its
// project's nodes.
func TestCommandsUnderPolicy(t *testing.T) {
	t.Run("keystone", func(t *testing.T) {
		ks := keystone.Start(t, keystone.Config{})
		svc := ks.AddProject(keystone.Project{Name: "service"})
		acme := ks.AddProject(keystone.Project{Name: "acme"})
		ks.AddUser(keystone.User{Name: "castiron", Password: "svc", ProjectRoles: map[string][]string{svc.ID: {"service"}}})
		ks.AddUser(keystone.User{Name: "root", Password: "root-pw", SystemRoles: []string{"admin"}})
		ks.AddUser(keystone.User{Name: "noc", Password: "noc-pw", SystemRoles: []string{"reader"}})
		ks.AddUser(keystone.User{Name: "tenant", Password: "tenant-pw", ProjectRoles: map[string][]string{acme.ID: {"member"}}})
		k, err := identity.NewKeystone(identity.KeystoneConfig{AuthURL: ks.URL(), Username: "castiron", Password: "svc", ProjectName: "service"})
		if err != nil {
			t.Fatal(err)
		}
		s := newServer(t, func(o *httpapi.Options) { o.Auth = k })
		ks.SetEndpoint("baremetal", s.url)
		l := labDirs(t)
		cloud := func(name, user, scope string) string {
			return "  " + name + ":\n    auth:\n      auth_url: " + ks.URL() + "\n      username: " + user + "\n      password: " + user + "-pw\n" +
				"      user_domain_name: Default\n" + scope
		}
		writeCloud(t, filepath.Join(l.dir, "wd", "clouds.yaml"), "clouds:\n"+
			cloud("root", "root", "      system_scope: all\n")+
			cloud("noc", "noc", "      system_scope: all\n")+
			cloud("tenant", "tenant", "      project_name: acme\n      project_domain_name: Default\n"))
		as := func(c string) { l.env(t, map[string]string{"OS_CLOUD": c}) }
		policyRun(t, as, l.run, ownerSetter(t, s), acme.ID)
	})

	t.Run("http_basic", func(t *testing.T) {
		var pw strings.Builder
		for _, u := range []string{"root", "noc", "tenant"} {
			hash, _ := bcrypt.GenerateFromPassword([]byte(u+"-pw"), bcrypt.MinCost)
			pw.WriteString(u + ":" + string(hash) + "\n")
		}
		ht, err := httpapi.LoadHTPasswd(writeFile(t, "htpasswd", pw.String()))
		if err != nil {
			t.Fatal(err)
		}
		users, err := httpapi.LoadBasicUsers(ht, writeFile(t, "users.yaml",
			"root: {roles: [admin, member, reader], scope: system}\nnoc: {roles: [reader], scope: system}\ntenant: {roles: [member, reader], project: acme}\n"))
		if err != nil {
			t.Fatal(err)
		}
		s := newServer(t, func(o *httpapi.Options) { o.Auth = users })
		l := labDirs(t)
		as := func(u string) {
			l.env(t, map[string]string{"OS_AUTH_TYPE": "http_basic", "OS_ENDPOINT": s.url, "OS_USERNAME": u, "OS_PASSWORD": u + "-pw"})
		}
		policyRun(t, as, l.run, ownerSetter(t, s), "acme")
	})
}

// policyRun is the persona walk of TestCommandsUnderPolicy; as switches
// the credentials to a user (root: system admin, noc: system reader,
// tenant: a member of project, which owns the first node).
func policyRun(t *testing.T, as func(string), run func(...string) (int, string, string), setOwner func(node, project string), project string) {
	t.Helper()
	as("root")
	file := writeFile(t, "rack.json", fakeRack("pol", 2))
	if code, out, errs := run("import", file); code != 0 {
		t.Fatalf("root import: exit %d\n%s\n%s", code, out, errs)
	}
	setOwner("pol-000", project)
	as("noc")
	code, out, errs := run("node", "list")
	if code != 0 || !strings.Contains(out, "pol-000") || !strings.Contains(out, "pol-001") {
		t.Errorf("reader node list: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run("provide", "pol-001")
	if code != 1 || !strings.Contains(out+errs, "Access was denied to the following resource: baremetal:node:set_provision_state") {
		t.Errorf("reader provide: exit %d\n%s\n%s", code, out, errs)
	}
	as("tenant")
	code, out, errs = run("node", "list")
	if code != 0 || !strings.Contains(out, "pol-000") || strings.Contains(out, "pol-001") {
		t.Errorf("project member node list: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := run("provide", "pol-000"); code != 0 {
		t.Errorf("project member provide of its node: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := run("provide", "pol-001"); code != 1 || !strings.Contains(out+errs, "Node pol-001 could not be found") {
		t.Errorf("project member provide of another's node: exit %d\n%s\n%s", code, out, errs)
	}
	as("root")
	if code, out, errs := run("provide", "pol-001"); code != 0 {
		t.Errorf("admin provide: exit %d\n%s\n%s", code, out, errs)
	}
}

// ownerSetter sets a node's owner in s's database (the client commands
// have no owner flag).
func ownerSetter(t *testing.T, s *server) func(node, project string) {
	return func(node, project string) {
		t.Helper()
		ctx := context.Background()
		n, err := s.st.GetNode(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.st.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) { n.Owner = &project; return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
}

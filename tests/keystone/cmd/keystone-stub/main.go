// Command keystone-stub runs the test Keystone (castiron/tests/keystone) as
// a process, for scripts and tests that run stock clients (tempest, the
// openstack CLI) against castiron:
//
//	go run ./tests/keystone/cmd/keystone-stub -baremetal http://127.0.0.1:6385 -url-file ks.url
//
// It prints "identity URL" (and "baremetal URL" with -guard) on stdout once
// listening and serves until SIGINT/SIGTERM. See tests/keystone/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"castiron/tests/keystone"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "keystone-stub:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keystone-stub", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "identity listen address")
	urlFile := fs.String("url-file", "", "write the identity base URL (the auth_url) to this file once listening")
	region := fs.String("region", keystone.DefaultRegion, "catalog region")
	ttl := fs.Duration("ttl", time.Hour, "token lifetime")
	baremetal := fs.String("baremetal", "", "catalog URL of the baremetal service (e.g. castiron's http://127.0.0.1:6385)")
	guard := fs.String("guard", "", "serve a token-checking proxy to this URL (castiron) and point the catalog's baremetal endpoint at the proxy")
	guardListen := fs.String("guard-listen", "127.0.0.1:0", "the proxy's listen address (with -guard)")
	guardFile := fs.String("guard-url-file", "", "write the proxy's URL to this file once listening (with -guard)")
	adminPass := fs.String("admin-password", envOr("KEYSTONE_STUB_ADMIN_PASSWORD", "secret"), "password of user admin (project admin, roles admin,member,reader; KEYSTONE_STUB_ADMIN_PASSWORD)")
	accounts := fs.String("tempest-accounts", "", "create -tempest-users admin users (project admin and system scope) and write them as tempest's pre-provisioned accounts file")
	nAccounts := fs.Int("tempest-users", 128, "how many users -tempest-accounts creates: tempest keeps one per test class until the run ends")
	var users, creds list
	fs.Var(&users, "user", "more users: NAME:PASSWORD[:PROJECT[:ROLE,...[:SYSTEM_ROLE,...]]] (project defaults to NAME, roles to member,reader); repeatable")
	fs.Var(&creds, "app-credential", "application credential ID:SECRET[:USER] on the user's project (user defaults to admin); repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *guard != "" && *baremetal != "" {
		return errors.New("-guard and -baremetal both set the baremetal endpoint: give one")
	}

	ks := keystone.New(keystone.Config{Region: *region, TokenTTL: *ttl})
	admin := ks.AddAdmin(*adminPass)
	byName := map[string]keystone.User{"admin": admin.User}
	for _, spec := range users {
		u, err := addUser(ks, spec)
		if err != nil {
			return err
		}
		byName[u.Name] = u
	}
	for _, spec := range creds {
		id, secret, rest, ok := cut3(spec)
		if !ok || id == "" || secret == "" {
			return fmt.Errorf("-app-credential %q: want ID:SECRET[:USER]", spec)
		}
		owner := "admin"
		if rest != "" {
			owner = rest
		}
		u, ok := byName[owner]
		if !ok {
			return fmt.Errorf("-app-credential %q: no user %q", spec, owner)
		}
		ks.AddAppCredential(keystone.AppCredential{ID: id, Name: id, Secret: secret, UserID: u.ID, ProjectID: u.DefaultProjectID})
	}

	if *accounts != "" {
		if err := tempestAccounts(ks, admin.Project, *accounts, *nAccounts, *adminPass); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	self := "http://" + ln.Addr().String()
	ks.SetURL(self)
	servers := []*http.Server{{Handler: ks, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if *baremetal != "" {
		ks.SetEndpoint("baremetal", *baremetal)
	}
	var guardURL string
	if *guard != "" {
		target, err := url.Parse(*guard)
		if err != nil || target.Host == "" {
			return fmt.Errorf("-guard %q: not a URL", *guard)
		}
		gl, err := net.Listen("tcp", *guardListen)
		if err != nil {
			return err
		}
		guardURL = "http://" + gl.Addr().String()
		ks.SetEndpoint("baremetal", guardURL)
		servers = append(servers, &http.Server{Handler: ks.GuardProxy(target), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, gl)
	}

	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	fmt.Fprintf(stdout, "identity %s\n", self)
	if guardURL != "" {
		fmt.Fprintf(stdout, "baremetal %s\n", guardURL)
	}
	if err := writeFile(*urlFile, self); err != nil {
		return err
	}
	if err := writeFile(*guardFile, guardURL); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		srv.Shutdown(shut)
	}
	return nil
}

func addUser(ks *keystone.Server, spec string) (keystone.User, error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 5 || parts[0] == "" {
		return keystone.User{}, fmt.Errorf("-user %q: want NAME:PASSWORD[:PROJECT[:ROLE,...[:SYSTEM_ROLE,...]]]", spec)
	}
	project, roles := parts[0], []string{"member", "reader"}
	if len(parts) > 2 && parts[2] != "" {
		project = parts[2]
	}
	if len(parts) > 3 && parts[3] != "" {
		roles = strings.Split(parts[3], ",")
	}
	var system []string
	if len(parts) > 4 && parts[4] != "" {
		system = strings.Split(parts[4], ",")
	}
	p := ks.AddProject(keystone.Project{Name: project})
	return ks.AddUser(keystone.User{Name: parts[0], Password: parts[1], DefaultProjectID: p.ID,
		ProjectRoles: map[string][]string{p.ID: roles}, SystemRoles: system}), nil
}

// cut3 splits "a:b[:c]".
func cut3(s string) (a, b, c string, ok bool) {
	a, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", "", false
	}
	b, c, _ = strings.Cut(rest, ":")
	return a, b, c, true
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// writeFile writes atomically, so a script polling for the file never reads
// half a URL.
func writeFile(path, content string) error {
	if path == "" {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keystone-stub-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tempestAccounts creates n admin users and writes tempest's accounts file
// with two entries per user: project-scoped admin (type admin) and
// system-scoped admin (the ironic plugin's system_admin). Tempest holds
// pre-provisioned credentials per test class for the whole run, so a suite
// needs about one user per class.
func tempestAccounts(ks *keystone.Server, project keystone.Project, path string, n int, password string) error {
	if n < 1 {
		return fmt.Errorf("-tempest-users %d: want at least 1", n)
	}
	roles := []string{"admin", "member", "reader"}
	var out []map[string]any
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("tempest-admin-%03d", i)
		ks.AddUser(keystone.User{Name: name, Password: password, DefaultProjectID: project.ID,
			ProjectRoles: map[string][]string{project.ID: roles}, SystemRoles: roles})
		out = append(out,
			map[string]any{"username": name, "project_name": project.Name, "password": password, "roles": []string{"admin"}, "types": []string{"admin"}},
			map[string]any{"username": name, "user_domain_name": keystone.DefaultDomainName, "password": password, "system": "all", "roles": []string{"admin"}})
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		return err
	}
	return writeFile(path, strings.TrimSuffix(string(b), "\n"))
}

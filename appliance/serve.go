package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"castiron/httpapi"
	"castiron/httpapi/identity"
)

// Serve is `castiron serve [flags]`: it runs the appliance until SIGINT or
// SIGTERM. version is what the binary reports (main's -X main.version).
func Serve(args []string, version string) error {
	c, err := parseServeFlags(args, os.LookupEnv)
	if err != nil {
		return err
	}
	c.version = version
	log, err := newLogger(os.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	if c.database == "" {
		// One castiron per SQLite data dir; restore checks the same lock.
		lock, err := lockDataDir(c.dataDir)
		if err != nil {
			return err
		}
		defer lock.release()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := newApp(ctx, c, log)
	if err != nil {
		return err
	}
	defer a.close()
	return a.run(ctx)
}

// authFor picks the auth strategy (--auth-strategy; by default
// http_basic with --htpasswd, else noauth): noauth only on loopback unless
// --insecure-noauth; http_basic with --htpasswd and, for roles, --users-file;
// keystone with the --keystone-* settings.
func authFor(c *serveConfig) (httpapi.Authenticator, error) {
	ac := c.access
	strategy := ac.strategy
	if strategy == "" {
		strategy = "noauth"
		if c.htpasswd != "" {
			strategy = "http_basic"
		}
	}
	if ac.usersFile != "" && strategy != "http_basic" {
		return nil, fmt.Errorf("--users-file needs --auth-strategy http_basic (it gives htpasswd users roles)")
	}
	switch strategy {
	case "keystone":
		return identity.NewKeystone(ac.keystone)
	case "http_basic":
		if c.htpasswd == "" {
			return nil, fmt.Errorf("--auth-strategy http_basic needs --htpasswd FILE (bcrypt)")
		}
		pw, err := httpapi.LoadHTPasswd(c.htpasswd)
		if err != nil || ac.usersFile == "" {
			return pw, err
		}
		return httpapi.LoadBasicUsers(pw, ac.usersFile)
	}
	if c.htpasswd != "" {
		return nil, fmt.Errorf("--htpasswd given with --auth-strategy noauth: say which you mean")
	}
	host, _, err := net.SplitHostPort(c.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && !c.insecureNoauth {
		return nil, fmt.Errorf("refusing to serve without authentication on %s: give --htpasswd FILE (bcrypt), --auth-strategy keystone or, knowingly, --insecure-noauth", c.listen)
	}
	return nil, nil
}

// authName names the strategy in the start-up log line.
func authName(a httpapi.Authenticator) string {
	switch a.(type) {
	case nil:
		return "noauth"
	case *identity.Keystone:
		return "keystone"
	case *httpapi.BasicUsers:
		return "http_basic (users file: roles and policy)"
	}
	return "http_basic"
}

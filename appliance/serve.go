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

// authFor picks the auth strategy: http_basic with --htpasswd; noauth on
// loopback; anywhere else noauth only with --insecure-noauth.
func authFor(c *serveConfig) (httpapi.Authenticator, error) {
	if c.htpasswd != "" {
		return httpapi.LoadHTPasswd(c.htpasswd)
	}
	host, _, err := net.SplitHostPort(c.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && !c.insecureNoauth {
		return nil, fmt.Errorf("refusing to serve without authentication on %s: give --htpasswd FILE (bcrypt) or, knowingly, --insecure-noauth", c.listen)
	}
	return nil, nil
}

func authName(a httpapi.Authenticator) string {
	if a == nil {
		return "noauth"
	}
	return "http_basic"
}

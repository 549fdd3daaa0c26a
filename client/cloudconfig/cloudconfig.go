// Package cloudconfig works out how castiron's client commands reach Ironic
// the way the openstack CLI does: command-line options first, then OS_*
// environment variables, then the named cloud's entry in clouds.yaml
// (read by gophercloud's openstack/config/clouds: the search path,
// secure.yaml, public cloud profiles, CA and verification), except that,
// as in the openstack CLI, a project or domain the cloud's auth section
// names stays. The result is a client.Config; Keystone itself is spoken by
// gophercloud.
package cloudconfig

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"castiron/client"
)

// DefaultEndpoint is where the none and http_basic auth types go when no
// endpoint is configured: a castiron on this host.
const DefaultEndpoint = "http://127.0.0.1:6385"

// setting is one option: its flags (first wins when several are given), its
// environment variables (first set wins), and its help.
type setting struct {
	key   string
	flags []string
	envs  []string
	usage string
}

// settings are the openstack CLI's options castiron's client takes, plus
// castiron's own --url/--user/--password (CASTIRON_URL/USER/PASSWORD),
// which stand for the endpoint, user name and password.
var settings = []setting{
	{"cloud", []string{"os-cloud"}, []string{"OS_CLOUD"}, "cloud name in clouds.yaml"},
	{"auth_type", []string{"os-auth-type"}, []string{"OS_AUTH_TYPE"}, "none, http_basic, password, v3applicationcredential or token (default: from the other options)"},
	{"auth_url", []string{"os-auth-url"}, []string{"OS_AUTH_URL"}, "Keystone endpoint"},
	{"endpoint", []string{"url", "os-endpoint"}, []string{"CASTIRON_URL", "OS_ENDPOINT"}, "Ironic endpoint; with Keystone it replaces the catalog's (default for none/http_basic: " + DefaultEndpoint + ")"},
	{"username", []string{"user", "os-username"}, []string{"CASTIRON_USER", "OS_USERNAME"}, "user name (Keystone or http_basic)"},
	{"user_id", []string{"os-user-id"}, []string{"OS_USER_ID"}, "Keystone user id"},
	{"password", []string{"password", "os-password"}, []string{"CASTIRON_PASSWORD", "OS_PASSWORD"}, "password (Keystone or http_basic)"},
	{"project_name", []string{"os-project-name"}, []string{"OS_PROJECT_NAME", "OS_TENANT_NAME"}, "project to scope to"},
	{"project_id", []string{"os-project-id"}, []string{"OS_PROJECT_ID", "OS_TENANT_ID"}, "project id to scope to"},
	{"user_domain_name", []string{"os-user-domain-name"}, []string{"OS_USER_DOMAIN_NAME"}, "the user's domain"},
	{"user_domain_id", []string{"os-user-domain-id"}, []string{"OS_USER_DOMAIN_ID"}, "the user's domain id"},
	{"project_domain_name", []string{"os-project-domain-name"}, []string{"OS_PROJECT_DOMAIN_NAME"}, "the project's domain"},
	{"project_domain_id", []string{"os-project-domain-id"}, []string{"OS_PROJECT_DOMAIN_ID"}, "the project's domain id"},
	{"domain_name", []string{"os-domain-name"}, []string{"OS_DOMAIN_NAME"}, "domain to scope to (with a project: the default user and project domain)"},
	{"domain_id", []string{"os-domain-id"}, []string{"OS_DOMAIN_ID"}, "domain id to scope to (with a project: the default user and project domain)"},
	{"default_domain", []string{"os-default-domain"}, []string{"OS_DEFAULT_DOMAIN"}, "domain id used when no user or project domain is given (default: default)"},
	{"system_scope", []string{"os-system-scope"}, []string{"OS_SYSTEM_SCOPE"}, "system scope (all)"},
	{"application_credential_id", []string{"os-application-credential-id"}, []string{"OS_APPLICATION_CREDENTIAL_ID"}, "application credential id"},
	{"application_credential_name", []string{"os-application-credential-name"}, []string{"OS_APPLICATION_CREDENTIAL_NAME"}, "application credential name (with the user)"},
	{"application_credential_secret", []string{"os-application-credential-secret"}, []string{"OS_APPLICATION_CREDENTIAL_SECRET"}, "application credential secret"},
	{"token", []string{"os-token"}, []string{"OS_TOKEN"}, "Keystone token (auth type token)"},
	{"region_name", []string{"os-region-name"}, []string{"OS_REGION_NAME"}, "catalog region"},
	{"interface", []string{"os-interface"}, []string{"OS_INTERFACE"}, "catalog interface: public, internal or admin"},
	{"cacert", []string{"os-cacert"}, []string{"OS_CACERT"}, "CA bundle to verify TLS servers with"},
}

// Options are the registered flags of one command.
type Options struct {
	fs       *flag.FlagSet
	flags    map[string]*string // flag name -> value
	insecure *bool
}

// Register adds the options to fs. Their defaults are empty: Resolve tells
// a given flag from the environment and clouds.yaml.
func Register(fs *flag.FlagSet) *Options {
	o := &Options{fs: fs, flags: map[string]*string{}}
	for _, s := range settings {
		for i, name := range s.flags {
			usage := s.usage + " (" + strings.Join(s.envs, ", ") + ")"
			if i > 0 {
				usage = "same as --" + s.flags[0]
			}
			o.flags[name] = fs.String(name, "", usage)
		}
	}
	o.insecure = fs.Bool("insecure", false, "do not verify TLS certificates (OS_INSECURE)")
	return o
}

// given returns the flags set on the command line.
func (o *Options) given() map[string]bool {
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// overrides are the values given as flags or environment variables, by key.
func (o *Options) overrides() map[string]string {
	set := o.given()
	out := map[string]string{}
	for _, s := range settings {
		for _, f := range s.flags {
			if set[f] {
				out[s.key] = *o.flags[f]
				break
			}
		}
		if _, ok := out[s.key]; ok {
			continue
		}
		for _, e := range s.envs {
			if v := os.Getenv(e); v != "" {
				out[s.key] = v
				break
			}
		}
	}
	return out
}

// insecureOverride is --insecure, else OS_INSECURE; nil when neither is set.
func (o *Options) insecureOverride() (*bool, error) {
	if o.given()["insecure"] {
		return o.insecure, nil
	}
	if v := os.Getenv("OS_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("OS_INSECURE=%q: want true or false", v)
		}
		return &b, nil
	}
	return nil, nil
}

// Resolve merges the options, the environment and clouds.yaml into the
// client's configuration.
func (o *Options) Resolve() (client.Config, error) {
	ov := o.overrides()
	if i := ov["interface"]; i != "" && !validInterface(i) {
		return client.Config{}, fmt.Errorf("interface %q: want public, internal or admin", i)
	}
	insecure, err := o.insecureOverride()
	if err != nil {
		return client.Config{}, err
	}
	parse := []clouds.ParseOption{clouds.WithRegion(ov["region_name"]), clouds.WithEndpointType(ov["interface"]), clouds.WithCACertPath(ov["cacert"])}
	if insecure != nil {
		parse = append(parse, clouds.WithInsecure(*insecure))
	}
	var extra cloudExtras
	if name := ov["cloud"]; name != "" {
		path, err := findCloudsFile()
		if err != nil {
			return client.Config{}, err
		}
		var file []clouds.ParseOption
		if extra, file, err = loadCloud(path, name); err != nil {
			return client.Config{}, err
		}
		parse = append(parse, file...)
	} else {
		// No cloud: an empty entry, so that the same code computes the TLS
		// settings and the rest comes from flags and environment alone.
		parse = append(parse, clouds.WithCloudName("envvars"), clouds.WithCloudsYAML(strings.NewReader("clouds: {envvars: {auth: {}}}")))
	}
	ao, eo, tlsCfg, err := clouds.Parse(parse...)
	if err != nil {
		return client.Config{}, fmt.Errorf("clouds.yaml: %w", err)
	}
	auth := flatten(ao)
	for k, v := range ov {
		if fileWins[k] && auth[k] != "" {
			continue
		}
		auth[k] = v
	}
	return build(auth, extra, eo, tlsCfg)
}

// fileWins are the keys the openstack CLI takes from the cloud's auth
// section even when an option or variable names another value:
// openstacksdk moves them into the auth section, looking at the section's
// own value last. Everything else given as an option or variable replaces
// the file's value.
var fileWins = map[string]bool{
	"project_id": true, "project_name": true, "domain_id": true, "domain_name": true, "token": true,
	"user_domain_id": true, "user_domain_name": true, "project_domain_id": true, "project_domain_name": true,
}

func validInterface(i string) bool {
	switch strings.TrimSuffix(i, "URL") {
	case "public", "internal", "admin":
		return true
	}
	return false
}

// findCloudsFile is gophercloud's search: OS_CLIENT_CONFIG_FILE alone, else
// ./clouds.yaml, ${XDG_CONFIG_HOME:-~/.config}/openstack/clouds.yaml,
// /etc/openstack/clouds.yaml; the first that exists.
func findCloudsFile() (string, error) {
	var locations []string
	if p := os.Getenv("OS_CLIENT_CONFIG_FILE"); p != "" {
		locations = []string{p}
	} else {
		cfg := os.Getenv("XDG_CONFIG_HOME")
		if cfg == "" {
			home, err := os.UserHomeDir()
			if err == nil {
				cfg = filepath.Join(home, ".config")
			}
		}
		locations = []string{"clouds.yaml"}
		if cfg != "" {
			locations = append(locations, filepath.Join(cfg, "openstack", "clouds.yaml"))
		}
		locations = append(locations, "/etc/openstack/clouds.yaml")
	}
	for _, p := range locations {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("clouds.yaml not found (searched %s)", strings.Join(locations, ", "))
}

// flatten turns what gophercloud read from clouds.yaml back into the
// keys of its auth section, so that flags and environment variables can
// replace them one by one, as the openstack CLI does.
func flatten(ao gophercloud.AuthOptions) map[string]string {
	m := map[string]string{
		"auth_url": ao.IdentityEndpoint, "username": ao.Username, "user_id": ao.UserID, "password": ao.Password,
		"user_domain_id": ao.DomainID, "user_domain_name": ao.DomainName,
		"project_id": ao.TenantID, "project_name": ao.TenantName, "token": ao.TokenID,
		"application_credential_id": ao.ApplicationCredentialID, "application_credential_name": ao.ApplicationCredentialName,
		"application_credential_secret": ao.ApplicationCredentialSecret,
	}
	if s := ao.Scope; s != nil {
		switch {
		case s.System:
			m["system_scope"] = "all"
		case s.ProjectID != "":
			m["project_id"] = s.ProjectID
		case s.ProjectName != "":
			m["project_name"], m["project_domain_id"], m["project_domain_name"] = s.ProjectName, s.DomainID, s.DomainName
		default:
			m["domain_id"], m["domain_name"] = s.DomainID, s.DomainName
		}
	}
	return m
}

// build applies openstacksdk's rules to the merged settings (a domain given
// with a project is the default user and project domain; the default
// domain fills what is still missing for password auth) and picks the auth
// type.
func build(a map[string]string, extra cloudExtras, eo gophercloud.EndpointOpts, tlsCfg *tls.Config) (client.Config, error) {
	projectScoped := a["project_id"] != "" || a["project_name"] != ""
	if projectScoped {
		for _, k := range []string{"id", "name"} {
			if d := a["domain_"+k]; d != "" {
				for _, target := range []string{"user_domain_", "project_domain_"} {
					if a[target+"id"] == "" && a[target+"name"] == "" {
						a[target+k] = d
					}
				}
			}
			a["domain_"+k] = ""
		}
	}
	typ := a["auth_type"]
	if typ == "" {
		typ = extra.AuthType
	}
	if typ == "" {
		typ = inferAuthType(a)
	}
	typ, err := client.NormalizeAuthType(typ)
	if err != nil {
		return client.Config{}, err
	}
	if typ == client.AuthPassword {
		def := a["default_domain"]
		if def == "" {
			def = "default"
		}
		if a["user_id"] == "" && a["user_domain_id"] == "" && a["user_domain_name"] == "" {
			a["user_domain_id"] = def
		}
		if a["project_id"] == "" && a["project_name"] != "" && a["project_domain_id"] == "" && a["project_domain_name"] == "" {
			a["project_domain_id"] = def
		}
	}
	scope, err := scopeOf(a, projectScoped)
	if err != nil {
		return client.Config{}, err
	}
	ao := gophercloud.AuthOptions{
		IdentityEndpoint: a["auth_url"], Username: a["username"], UserID: a["user_id"], Password: a["password"],
		DomainID: a["user_domain_id"], DomainName: a["user_domain_name"], TokenID: a["token"], Scope: scope,
		ApplicationCredentialID: a["application_credential_id"], ApplicationCredentialName: a["application_credential_name"],
		ApplicationCredentialSecret: a["application_credential_secret"],
	}
	if ao.DomainID != "" {
		ao.DomainName = "" // an id is exact; gophercloud refuses both
	}
	endpoint := a["endpoint"]
	if endpoint == "" {
		endpoint = extra.endpoint()
	}
	cfg := client.Config{AuthType: typ, URL: endpoint, Keystone: ao, Catalog: eo, TLS: tlsCfg}
	if typ == client.AuthNone || typ == client.AuthHTTPBasic {
		if cfg.URL == "" {
			cfg.URL = DefaultEndpoint
		}
		if typ == client.AuthHTTPBasic {
			cfg.User, cfg.Password = a["username"], a["password"]
		}
		cfg.Keystone = gophercloud.AuthOptions{}
	}
	return cfg, nil
}

// inferAuthType picks the auth type when none is given: an application
// credential or a token says which; an identity endpoint means a password;
// a user name alone means http_basic; nothing at all: none.
func inferAuthType(a map[string]string) string {
	switch {
	case a["application_credential_id"] != "" || a["application_credential_name"] != "":
		return client.AuthAppCred
	case a["token"] != "" && a["password"] == "":
		return client.AuthToken
	case a["auth_url"] != "":
		return client.AuthPassword
	case a["username"] != "" || a["password"] != "":
		return client.AuthHTTPBasic
	}
	return client.AuthNone
}

// scopeOf is the token's scope; like keystoneauth it refuses two targets.
func scopeOf(a map[string]string, projectScoped bool) (*gophercloud.AuthScope, error) {
	domain := a["domain_id"] != "" || a["domain_name"] != ""
	system := a["system_scope"] != ""
	n := 0
	for _, b := range []bool{projectScoped, domain, system} {
		if b {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("authentication cannot be scoped to multiple targets: give one of project, domain or system scope")
	}
	switch {
	case system:
		if a["system_scope"] != "all" {
			return nil, fmt.Errorf("system scope %q: only all is supported", a["system_scope"])
		}
		return &gophercloud.AuthScope{System: true}, nil
	case a["project_id"] != "":
		return &gophercloud.AuthScope{ProjectID: a["project_id"]}, nil
	case a["project_name"] != "":
		s := &gophercloud.AuthScope{ProjectName: a["project_name"], DomainID: a["project_domain_id"]}
		if s.DomainID == "" {
			s.DomainName = a["project_domain_name"]
		}
		return s, nil
	case a["domain_id"] != "":
		return &gophercloud.AuthScope{DomainID: a["domain_id"]}, nil
	case a["domain_name"] != "":
		return &gophercloud.AuthScope{DomainName: a["domain_name"]}, nil
	}
	return nil, nil
}

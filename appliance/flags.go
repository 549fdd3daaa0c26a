package appliance

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"castiron/engine"
	"castiron/httpapi"
	"castiron/httpapi/identity"
)

// serveConfig is serve's settings: the flags below, and the version the
// binary reports (from main, not a flag).
type serveConfig struct {
	version                                        string
	configPath                                     string
	listen, dataDir, conductorName, conductorGroup string
	database, conductorURL                         string
	databaseNonDurableTest                         bool
	heartbeatInterval, heartbeatTimeout            time.Duration
	htpasswd, tlsCert, tlsKey, logLevel, logFormat string
	tlsCA                                          string
	tlsAuto                                        bool
	insecureNoauth, automatedClean                 bool
	callbackTimeout, powerSync                     time.Duration
	powerSyncTimeout                               time.Duration
	stepPollInterval, stepTimeout                  time.Duration
	powerSyncWorkers, powerSyncPerBMC              int
	viewCacheMiB                                   int
	memoryLimitMiB                                 int
	pprofListen                                    string
	pxe                                            pxeConfig
	inspectOverwrite, cleanFullErase               bool
	inspectKernelArgs                              string
	metrics                                        bool
	rulesFile, rulesMask                           string
	discovery                                      discoveryConfig
	// maxAPIVersion pins the API's ceiling (--max-api-version); maxMinor
	// is its minor (0: the newest).
	maxAPIVersion string
	maxMinor      int
	access        accessConfig
	console       consoleConfig
}

// consoleConfig are the serial console flags (Ironic's [console]).
type consoleConfig struct {
	portRange, address string
	idle               time.Duration
}

// accessConfig is who may call the API: the auth strategy, Keystone's
// settings (Ironic's [keystone_authtoken]), the http_basic users file and
// the policy file.
type accessConfig struct {
	strategy, usersFile, policyFile string
	keystone                        identity.KeystoneConfig
}

// discoveryConfig are the discovery flags beside --pxe-discovery.
type discoveryConfig struct {
	driver, bmcUser string
	manage          bool
	maxEnroll       int
	rate            float64
}

// serveFlags declares serve's flags. Declare a new setting here the usual
// way: it then also reads CASTIRON_<NAME> and the configuration file's
// <name> key (config.go), and `castiron config` prints it.
func serveFlags() (*flag.FlagSet, *serveConfig) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c := &serveConfig{}
	str := func(p *string, name, def, help string) { fs.StringVar(p, name, def, help) }
	boolFlag := func(p *bool, name string, def bool, help string) { fs.BoolVar(p, name, def, help) }
	dur := func(p *time.Duration, name string, def time.Duration, help string) {
		fs.DurationVar(p, name, def, help)
	}
	str(&c.configPath, configFlag, "", "configuration file (YAML, keys are these flags' names); flags and CASTIRON_* variables win over it")
	str(&c.listen, "listen", "127.0.0.1:6385", "address:port of the API")
	str(&c.dataDir, "data-dir", "./castiron-data", "directory for the SQLite database")
	str(&c.database, "database", "", "postgres://user:password@host/db to share one PostgreSQL database between conductors (default: SQLite in DATA-DIR)")
	boolFlag(&c.databaseNonDurableTest, "database-non-durable-test", false, "accept a PostgreSQL server with fsync or synchronous_commit off, which castiron otherwise refuses (throwaway test servers only: a crash of the server can lose acknowledged writes)")
	str(&c.conductorName, "conductor-name", "", "this conductor's hostname in the API (default: this host's name)")
	str(&c.conductorGroup, "conductor-group", "", "this conductor's conductor_group")
	str(&c.conductorURL, "conductor-url", "", "how the other conductors on --database reach this one's API (default: http(s)://LISTEN, with the conductor name for a wildcard address)")
	dur(&c.heartbeatInterval, "heartbeat-interval", 5*time.Second, "how often this conductor records that it is alive")
	dur(&c.heartbeatTimeout, "heartbeat-timeout", 15*time.Second, "a conductor silent this long is dead: its nodes move to the others")
	str(&c.htpasswd, "htpasswd", "", "bcrypt htpasswd file: enables Ironic's http_basic auth")
	ac := &c.access
	fs.Var(&choiceValue{p: &ac.strategy, allowed: []string{"noauth", "http_basic", "keystone", ""}}, "auth-strategy",
		"Ironic's auth_strategy: noauth, http_basic (--htpasswd) or keystone (--keystone-*) (default: http_basic with --htpasswd, else noauth)")
	str(&ac.usersFile, "users-file", "", "with http_basic: YAML file giving each htpasswd user roles and a scope (system or a project), so Ironic's policies apply; without it every user may do everything")
	str(&ac.policyFile, "policy-file", "", "oslo.policy YAML file overriding Ironic's default rules by name (castiron policy list prints the effective rules)")
	ks := &ac.keystone
	str(&ks.AuthURL, "keystone-auth-url", "", "keystone: Keystone's URL, e.g. http://keystone:5000 ([keystone_authtoken] auth_url)")
	str(&ks.Username, "keystone-username", "", "keystone: castiron's service user, whose token validates callers' tokens")
	str(&ks.Password, "keystone-password", "", "keystone: the service user's password")
	str(&ks.ProjectName, "keystone-project-name", "", "keystone: the service user's project (usually service)")
	str(&ks.UserDomainName, "keystone-user-domain-name", "Default", "keystone: the service user's domain")
	str(&ks.ProjectDomainName, "keystone-project-domain-name", "Default", "keystone: the service project's domain")
	str(&c.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key serves HTTPS")
	str(&c.tlsKey, "tls-key", "", "TLS private key (PEM)")
	boolFlag(&c.tlsAuto, "tls-auto", false, "without --tls-cert: serve HTTPS with a certificate from castiron's own CA, made on first use in DATA-DIR/tls (castiron tls rotate replaces it)")
	str(&c.tlsCA, "tls-ca", "", "CA bundle (PEM) the ramdisk trusts for castiron with --tls-cert (default: the --tls-cert file's certificates)")
	str(&c.maxAPIVersion, "max-api-version", "", fmt.Sprintf("newest API microversion served, 1.N (Ironic's pin_release_version: clients see an older Ironic); default: the newest, 1.%d", httpapi.MaxMinor))
	choice(fs, &c.logLevel, "log-level", "info", []string{"debug", "info", "warn", "error"}, "log level")
	choice(fs, &c.logFormat, "log-format", "text", []string{"text", "json"}, "log lines on stderr as logfmt text or JSON objects")
	boolFlag(&c.insecureNoauth, "insecure-noauth", false, "allow unauthenticated access on a non-loopback address")
	boolFlag(&c.automatedClean, "automated-clean", true, "clean nodes on provide and undeploy unless a node says otherwise")
	dur(&c.callbackTimeout, "callback-timeout", 1800*time.Second, "how long a node may wait for the ramdisk (inspect wait, clean wait, wait call-back, ...)")
	dur(&c.stepPollInterval, "step-poll-interval", 10*time.Second, "pause between two checks of a step the BMC finishes on its own (a BIOS or RAID job, a firmware update task, settings applied by a reboot)")
	dur(&c.stepTimeout, "step-timeout", 30*time.Minute, "longest such a step may take before it fails the clean, service or deploy")
	dur(&c.powerSync, "power-sync-interval", 60*time.Second, "how often power states are read back from BMCs")
	fs.IntVar(&c.powerSyncWorkers, "power-sync-workers", engine.DefaultPowerSyncWorkers, "BMC reads of a power sync in flight at once")
	fs.IntVar(&c.powerSyncPerBMC, "power-sync-per-bmc", 1, "power sync reads in flight at once per BMC address (nodes behind one BMC)")
	dur(&c.powerSyncTimeout, "power-sync-timeout", 15*time.Second, "longest one node's power sync read may take (a dead BMC holds one worker this long)")
	fs.IntVar(&c.viewCacheMiB, "view-cache-mib", 0, "MiB of rendered node views kept for reads; 0 follows the fleet (2 KiB a node, 1-32 MiB), negative keeps none")
	fs.IntVar(&c.memoryLimitMiB, "memory-limit-mib", 0, "Go runtime soft memory limit in MiB (GOMEMLIMIT); 0 leaves the runtime's (GOMEMLIMIT from the environment, else none)")
	str(&c.pprofListen, "pprof-listen", "", "loopback address:port serving Go's pprof profiles (off when empty)")
	p := &c.pxe
	str(&p.iface, "pxe-interface", "", "network interface of the provisioning network; unset: no DHCP/TFTP/PXE")
	choice(fs, &p.dhcpMode, "dhcp-mode", "full", []string{"full", "proxy"}, "full (castiron hands out addresses) or proxy (the site's DHCP server does; castiron adds boot options)")
	str(&p.dhcpRange, "dhcp-range", "", "FIRST,LAST addresses to hand out in full mode (default: the upper part of the interface's subnet)")
	choice(fs, &p.dhcp6Mode, "dhcp6-mode", "full", []string{"full", "off"}, "full: DHCPv6 hands out addresses and boot files when the PXE interface has a global IPv6 address; off: no DHCPv6")
	str(&p.dhcp6Range, "dhcp6-range", "", "FIRST,LAST IPv6 addresses (one /64) DHCPv6 hands out (default: <prefix>::1000 to <prefix>::1fff of the interface's /64)")
	choice(fs, &p.raMode, "router-advertisements", "auto", []string{"auto", "managed", "empty", "off"},
		"IPv6 router advertisements on the PXE interface: managed (M/O flags, the interface's prefix on-link), empty (configure nothing; stops iPXE waiting for IPv6), off (the site has a router), auto (managed with DHCPv6, else empty)")
	str(&p.publicURL, "public-url", "", "how nodes reach castiron's API, e.g. http://10.0.0.1:6385 (default: the PXE interface's address and the API port; https with TLS)")
	str(&p.ipxeDir, "ipxe-dir", "/usr/lib/ipxe", "directory of the iPXE binaries (Debian package ipxe)")
	str(&p.bootHTTPPort, "boot-http-port", "8080", "with TLS: plain-HTTP port on the provisioning addresses for iPXE's script, kernel, initramfs and CA bundle (iPXE cannot check castiron's certificate)")
	str(&p.ramdiskDir, "ramdisk-dir", "", "directory with vmlinuz and initramfs written by make ramdisk (default DATA-DIR/ramdisk)")
	str(&p.imagesDir, "images-dir", "", "directory of OS images castiron serves to nodes at /images/ (default DATA-DIR/images)")
	boolFlag(&p.netbootHTTP, "netboot-http", false, "without --pxe-interface: serve /boot/ (each MAC's iPXE script, kernel, initramfs) on the API listener anyway, for machines whose boot loader comes from another DHCP server, and for castiron demo's simulated rack")
	boolFlag(&p.discovery, "pxe-discovery", false, "network-boot unknown machines and enroll them as nodes (discovery)")
	dc := &c.discovery
	choice(fs, &dc.driver, "discovery-driver", "ipmi", []string{"ipmi", "redfish", "fake-hardware", "manual-management"}, "hardware type of discovered nodes")
	boolFlag(&dc.manage, "discovery-manage", false, "move every discovered node on to manage, also one without BMC credentials (with credentials, from a rule or --discovery-bmc-user, it goes anyway)")
	str(&dc.bmcUser, "discovery-bmc-user", "", "IPMI user the ramdisk of a discovered machine creates (or resets) in-band with a random password, admin on LAN; driver_info gets it (off when empty)")
	fs.IntVar(&dc.maxEnroll, "discovery-max-enroll", engine.DefaultDiscoveryMaxEnroll, "discovery stops while this many nodes wait in enroll (negative: no cap)")
	fs.Float64Var(&dc.rate, "discovery-rate", engine.DefaultDiscoveryRate, "at most this many nodes discovered per minute")
	cc := &c.console
	str(&cc.portRange, "console-port-range", "", "MIN:MAX TCP ports serial consoles (ipmitool-socat) are served on, one per enabled node (Ironic's [console]port_range); unset: only nodes with ipmi_terminal_port")
	str(&cc.address, "console-address", "", "address console URLs name and console ports listen on (Ironic's socat_address; default: the host of --public-url, else of --listen)")
	dur(&cc.idle, "console-idle-timeout", 600*time.Second, "a console TCP client with no traffic either way this long is disconnected (Ironic's terminal_timeout)")
	boolFlag(&c.inspectOverwrite, "inspect-overwrite", false, "let inspection replace properties that are already set")
	str(&c.inspectKernelArgs, "inspection-kernel-args", "", "more kernel arguments for the ramdisk when it boots to inspect (Ironic's [inspector] extra_kernel_params), e.g. \"ipa-collect-lldp=1 ipa-lldp-timeout=10\" to report the switch ports' LLDP")
	boolFlag(&c.cleanFullErase, "clean-full-erase", false, "automated cleaning overwrites whole disks, not only their metadata")
	boolFlag(&c.metrics, "metrics", true, "serve Prometheus metrics at /metrics (with the API's authentication)")
	str(&c.rulesFile, "inspection-rules-file", "", "YAML file of built-in inspection rules, applied after every inspection (Ironic's [inspection_rules]built_in_rules)")
	choice(fs, &c.rulesMask, "inspection-rules-mask-secrets", "always", []string{"always", "never", "sensitive"},
		"what inspection rules see of secrets in the inspection data: always masked, never, or sensitive (rules marked sensitive see them)")
	return fs, c
}

// parseServeFlags resolves serve's settings: flag > environment > file >
// default (resolveFlags).
func parseServeFlags(args []string, lookupEnv func(string) (string, bool)) (*serveConfig, error) {
	fs, c := serveFlags()
	if err := resolveFlags(fs, args, lookupEnv); err != nil {
		return nil, err
	}
	var err error
	if c.maxMinor, err = httpapi.ParseMaxAPIVersion(c.maxAPIVersion); err != nil {
		return nil, fmt.Errorf("--max-api-version: %w", err)
	}
	if c.conductorName == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--conductor-name not set and no hostname: %w", err)
		}
		c.conductorName = host
	}
	if _, err := consolePorts(c.console.portRange); err != nil {
		return nil, err
	}
	p := &c.pxe
	if p.ramdiskDir == "" {
		p.ramdiskDir = filepath.Join(c.dataDir, "ramdisk")
	}
	if p.imagesDir == "" {
		p.imagesDir = filepath.Join(c.dataDir, "images")
	}
	return c, nil
}

// PrintConfig is `castiron config [serve flags]`: the configuration file
// for the settings given (flags, environment, --config), every other key
// commented out at its default.
func PrintConfig(args []string) error {
	fs, _ := serveFlags()
	if err := resolveFlags(fs, args, os.LookupEnv); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return writeConfig(os.Stdout, fs, set)
}

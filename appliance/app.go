package appliance

import (
	"castiron/engine/console"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/inspectrules"
	"castiron/httpapi"
	"castiron/httpapi/policy"
	"castiron/ramdisk/iso"
	"castiron/storage"
	"castiron/web"
)

// shutdownTimeout bounds a clean stop: in-flight requests, then the
// conductor's background work.
const shutdownTimeout = 20 * time.Second

// app is one `castiron serve`: newApp builds every part (nothing listens
// yet), run starts them and stops them again, close releases what newApp
// opened.
type app struct {
	cfg   *serveConfig
	log   *slog.Logger
	auth  httpapi.Authenticator
	store *storage.SQLite
	cond  *engine.Conductor
	prov  *provisioning
	// redfish holds BMC sessions, deleted once the conductor has stopped.
	redfish *redfish.Driver
	api     http.Handler
	apiUp   atomic.Bool
	// tls serves the certificate; nil without TLS.
	tls *tlsSource
	// ln, when set, is the API's listener already bound (castiron demo
	// needs its URL before the app is built).
	ln net.Listener
}

func newApp(ctx context.Context, c *serveConfig, log *slog.Logger) (*app, error) {
	auth, err := authFor(c)
	if err != nil {
		return nil, err
	}
	rules, err := policy.Load(c.access.policyFile)
	if err != nil {
		return nil, err
	}
	site, err := siteOf(c)
	if err != nil {
		return nil, err
	}
	database := c.database
	if database == "" {
		database = filepath.Join(c.dataDir, "castiron.db")
	}
	store, err := storage.OpenDatabaseWith(ctx, database, storage.Config{NonDurableTest: c.databaseNonDurableTest})
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	a := &app{cfg: c, log: log, auth: auth, store: store}
	if a.tls, err = newTLSSource(c, site, log); err != nil {
		a.close()
		return nil, err
	}
	hw, rf := hardwareTypes(log)
	a.redfish = rf
	obs := newObservers(c.metrics, c.version, store)
	cfg := conductorConfig(c, site, obs.engine, log)
	if a.tls != nil {
		cfg.VMedia.CABundle = a.tls.bundle
	}
	if c.rulesFile != "" {
		if cfg.BuiltInRules, err = inspectrules.LoadBuiltIn(c.rulesFile); err != nil {
			a.close()
			return nil, err
		}
		log.Info("built-in inspection rules loaded", "file", c.rulesFile, "rules", len(cfg.BuiltInRules))
	}
	a.cond = engine.New(store, hw, cfg)
	if a.prov, err = newProvisioning(c, site, store, a.cond, obs.boot, a.tls, log); err != nil {
		a.close()
		return nil, err
	}
	obs.watchLeases(a.prov)
	ui := web.Handler(web.Options{Auth: auth, Policy: rules})
	mounts := web.Mounts(ui)
	for pattern, h := range a.prov.mounts {
		mounts[pattern] = h
	}
	for pattern, h := range readiness(store, a.cond, &a.apiUp, a.prov).Mounts() {
		mounts[pattern] = h
	}
	obs.mount(mounts, auth)
	// The web UI's console stream attaches to the conductor's serial
	// consoles (engine.Conductor.AttachConsole, engine/console).
	console, _ := any(a.cond).(httpapi.ConsoleAttacher)
	a.api = httpapi.New(a.cond, httpapi.Options{Auth: auth, Policy: rules, Logger: log, HTML: ui, Extra: mounts,
		BootRecorder: a.prov.recorder, Observer: obs.api, MaxMinor: c.maxMinor, ViewCacheBytes: viewCacheBytes(c.viewCacheMiB),
		Console: console})
	return a, nil
}

// viewCacheBytes is --view-cache-mib for httpapi.Options: 0 (follow the
// fleet) and negative (none) pass through.
func viewCacheBytes(mib int) int {
	if mib <= 0 {
		return mib
	}
	return mib << 20
}

// hardwareTypes is the enabled hardware types, and the redfish driver whose
// BMC sessions the app deletes at the end.
func hardwareTypes(log *slog.Logger) (*engine.Registry, *redfish.Driver) {
	fakeDriver := fake.New()
	ipmiDriver := ipmi.New(ipmi.Config{Logger: log})
	redfishDriver := redfish.New(redfish.Config{Logger: log})
	// Serial consoles of the Redfish family: SOL on the BMC's IPMI side
	// (ipmitool-*), the BMC's SSH console (redfish-ssh).
	sol, ssh := ipmi.RedfishSerial(ipmiDriver), redfishDriver.SSHConsole()
	return engine.NewRegistry(
		engine.NewFakeHardware(fakeDriver),
		engine.NewIPMIHardware(ipmiDriver, ipmiDriver, ipmi.Properties()),
		engine.WithSerialConsoles(engine.NewRedfishHardware(redfishDriver, redfish.Properties()), sol, ssh),
		engine.WithSerialConsoles(engine.NewIDRACHardware(redfishDriver, redfish.Properties()), sol, ssh),
		engine.WithSerialConsoles(engine.NewILO5Hardware(redfishDriver, redfish.ILOProperties()), sol, ssh),
		engine.NewManualManagement(fakeDriver),
	), redfishDriver
}

func conductorConfig(c *serveConfig, site provisioningSite, obs engine.Observer, log *slog.Logger) engine.Config {
	imageBase := ""
	if site.publicURL != "" {
		imageBase = strings.TrimRight(site.publicURL, "/") + "/images"
	}
	cfg := engine.Config{
		Hostname:           c.conductorName,
		ConductorGroup:     strings.ToLower(c.conductorGroup),
		APIURL:             conductorURL(c),
		HeartbeatInterval:  c.heartbeatInterval,
		HeartbeatTimeout:   c.heartbeatTimeout,
		CallbackTimeout:    c.callbackTimeout,
		StepPollInterval:   c.stepPollInterval,
		StepTimeout:        c.stepTimeout,
		PowerSyncInterval:  c.powerSync,
		PowerSyncWorkers:   c.powerSyncWorkers,
		PowerSyncPerBMC:    c.powerSyncPerBMC,
		PowerSyncTimeout:   c.powerSyncTimeout,
		AutomatedClean:     c.automatedClean,
		Discovery:          c.pxe.discovery,
		InspectOverwrite:   c.inspectOverwrite,
		CleanFullErase:     c.cleanFullErase,
		ImageBaseURL:       imageBase,
		RulesMaskSecrets:   c.rulesMask,
		DiscoveryDriver:    c.discovery.driver,
		DiscoveryManage:    c.discovery.manage,
		DiscoveryBMCUser:   c.discovery.bmcUser,
		DiscoveryMaxEnroll: c.discovery.maxEnroll,
		DiscoveryRate:      c.discovery.rate,
		Firmware:           firmwareConfig(c, imageBase),
		VMedia: &engine.VMediaConfig{
			ISOs:       iso.NewCache(vmediaDir(c)),
			RamdiskDir: c.pxe.ramdiskDir,
			APIURL:     strings.TrimRight(site.publicURL, "/"),
		},
		Logger:   log,
		Observer: obs,

		// Ironic's [inspector] extra_kernel_params, for ISO boots.
		InspectionKernelArgs: strings.Fields(c.inspectKernelArgs),
	}
	cfg.ConsolePorts, _ = consolePorts(c.console.portRange) // checked by parseServeFlags
	cfg.ConsoleHost, cfg.ConsoleListen = consoleAddress(c, site)
	// Scrollback survives restarts in the data directory (engine/console/keep.go).
	cfg.Console = console.Config{IdleTimeout: c.console.idle, Dir: filepath.Join(c.dataDir, "console"), Logger: log}
	return cfg
}

// firmwareConfig stages firmware images under the images directory
// (served at /images/firmware/, unguessable names) when BMCs can reach
// castiron (--public-url); without it BMCs get the operator's URLs.
func firmwareConfig(c *serveConfig, imageBase string) *engine.FirmwareConfig {
	if imageBase == "" {
		return nil
	}
	return &engine.FirmwareConfig{Dir: filepath.Join(c.pxe.imagesDir, "firmware"), BaseURL: imageBase + "/firmware"}
}

// conductorURL is how other conductors reach this one's API.
func conductorURL(c *serveConfig) string {
	if c.conductorURL != "" {
		return c.conductorURL
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(c.listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = c.conductorName
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// close releases what newApp opened.
func (a *app) close() {
	if err := a.store.Close(); err != nil {
		a.log.Warn("closing the database", "err", err)
	}
}

// run starts the conductor, serves until ctx ends or a part fails, and
// stops the conductor last: one place, whatever ended the run.
func (a *app) run(ctx context.Context) error {
	if err := a.cond.Start(ctx); err != nil {
		return fmt.Errorf("start conductor: %w", err)
	}
	setMemoryLimit(a.cfg.memoryLimitMiB, a.log)
	ensureProcs(os.Getenv, a.log)
	if a.cfg.pprofListen != "" {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			if err := servePprof(pctx, a.cfg.pprofListen, a.log); err != nil {
				a.log.Warn("pprof", "err", err)
			}
		}()
	}
	err := a.serve(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = errors.Join(err, a.cond.Stop(stopCtx))
	// No task uses a BMC any more: log out of every Redfish session.
	return errors.Join(err, a.redfish.Close(stopCtx))
}

// serve runs the provisioning network and the API until ctx ends or one of
// them fails, then shuts both down.
func (a *app) serve(ctx context.Context) error {
	srv, ln, err := a.listen()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	provErr := make(chan error, 1)
	go func() { provErr <- a.prov.run(runCtx, a.api) }()
	apiErr := make(chan error, 1)
	a.apiUp.Store(true)
	go func() { apiErr <- srv.Serve(ln); a.apiUp.Store(false) }()
	a.log.Info("castiron serving", "listen", ln.Addr().String(), "data_dir", a.cfg.dataDir,
		"conductor", a.cfg.conductorName, "auth", authName(a.auth), "version", a.cfg.version)
	// Start-up (migrations, package inits, the first periodic tasks) leaves
	// garbage behind: hand it back to the OS instead of keeping the heap at
	// its start-up peak until the scavenger gets to it. A second after
	// serving starts, so that this full collection does not hold up the
	// first requests.
	freeOS := time.AfterFunc(time.Second, debug.FreeOSMemory)
	defer freeOS.Stop()

	select {
	case err = <-apiErr:
		apiErr <- nil // for the wait below
	case err = <-provErr:
		provErr <- nil
		if err != nil {
			err = fmt.Errorf("provisioning network: %w", err)
		}
	case <-ctx.Done():
		a.log.Info("shutting down")
	}
	shutCtx, cancelShut := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelShut()
	if shutErr := srv.Shutdown(shutCtx); shutErr != nil {
		a.log.Warn("http shutdown", "err", shutErr)
	}
	if serveErr := <-apiErr; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	cancel()
	<-provErr
	return err
}

// listen opens the API listener (with TLS when configured).
func (a *app) listen() (*http.Server, net.Listener, error) {
	srv := &http.Server{
		Handler:           a.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	ln := a.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.listen); err != nil {
			return nil, nil, err
		}
	}
	if a.tls != nil {
		srv.TLSConfig = a.tls.config()
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	return srv, ln, nil
}

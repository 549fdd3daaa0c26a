// Package appliance is one castiron assembled: serve's settings (flags >
// CASTIRON_* environment > configuration file, config.go and flags.go), the
// app value and its one stop (app.go), its listeners and TLS, the PXE stack
// (pxe.go, site.go), metrics, health, logging, backup and restore, and the
// version it reports. The castiron command (main.go at the repository's
// top) parses only the subcommand and calls in here.
package appliance

package redfish

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"sync"
)

// Authentication methods (redfish_auth_type), as Ironic names them.
const (
	authBasic   = "basic"
	authSession = "session"
	authAuto    = "auto" // session, falling back to basic
)

const defaultRoot = "/redfish/v1"

// schemeRE matches an address that names its scheme ("https://..."); any
// other address gets Ironic's default scheme, https.
var schemeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`) })

// info is a node's driver_info, parsed and checked.
type info struct {
	uuid string
	// base is scheme://authority; root the service root path (from the
	// address's path, default /redfish/v1).
	base string
	root string
	// systemID is redfish_system_id as a path ("" : the only system).
	systemID string
	username string
	password string
	// verify is true, false, or the path of a CA file/directory (caPath).
	verify   bool
	caPath   string
	authType string
	vendor   string // properties.vendor, lower case
}

// address is the BMC for messages: base plus root when not the default.
func (i *info) address() string {
	if i.root != defaultRoot {
		return i.base + i.root
	}
	return i.base
}

// key identifies an authenticated endpoint: the same BMC, user, password
// and trust settings share one session. The password enters only as a hash.
func (i *info) key() string {
	h := sha256.New()
	for _, s := range []string{i.base, i.root, i.username, i.password, i.authType, i.caPath} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if i.verify {
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// parseInfo reads n.DriverInfo as Ironic's redfish_utils.parse_driver_info
// does, with its messages (fault.Invalid: HTTP 400).
func parseInfo(n driver.Node) (*info, error) {
	di := n.DriverInfo
	if driver.IsEmpty(di["redfish_address"]) && !driver.IsEmpty(di["ilo_address"]) {
		di = iloInfo(di)
	}
	if driver.IsEmpty(di["redfish_address"]) {
		return nil, fault.New(fault.Invalid, "Missing the following Redfish properties in node %s driver_info: ['redfish_address']", n.UUID)
	}
	inf := &info{uuid: n.UUID, verify: true, authType: authAuto}
	addr, ok := di["redfish_address"].(string)
	badAddr := func() error {
		return fault.New(fault.Invalid, "Invalid Redfish address %v set in driver_info/redfish_address on node %s", di["redfish_address"], n.UUID)
	}
	if !ok {
		return nil, badAddr()
	}
	addr = strings.TrimSpace(addr)
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		addr = "[" + addr + "]" // Ironic's escape_ipv6
	}
	if !schemeRE().MatchString(addr) {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Scheme != "http" && u.Scheme != "https") {
		return nil, badAddr()
	}
	inf.base = u.Scheme + "://" + u.Host
	inf.root = strings.TrimRight(u.EscapedPath(), "/")
	if inf.root == "" {
		inf.root = defaultRoot
	}

	if v, has := di["redfish_system_id"]; has && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, fault.New(fault.Invalid, "Invalid value \"%v\" set in driver_info/redfish_system_id on node %s. The value should be a path (string) to the resource that the driver will interact with. For example: /redfish/v1/Systems/1", v, n.UUID)
		}
		inf.systemID = systemPath(inf.root, s)
	}
	if v, has := di["redfish_username"]; has && v != nil {
		inf.username = driver.ScalarString(v)
	}
	if v, has := di["redfish_password"]; has && v != nil {
		inf.password = driver.ScalarString(v) // Ironic str()s it: numbers are fine
	}

	if v, has := di["redfish_verify_ca"]; has && v != nil {
		badCA := fault.New(fault.Invalid, "Invalid value type set in driver_info/redfish_verify_ca on node %s. The value should be a Boolean or the path to a file/directory, not \"%v\"", n.UUID, v)
		switch v := v.(type) {
		case bool:
			inf.verify = v
		case string:
			if _, err := os.Stat(v); err == nil {
				inf.caPath = v
			} else if b, ok := driver.ParseBool(v); ok {
				inf.verify = b
			} else {
				return nil, badCA
			}
		default:
			return nil, badCA
		}
	}

	if v, has := di["redfish_auth_type"]; has && v != nil {
		s, _ := v.(string)
		if s != authBasic && s != authSession && s != authAuto {
			return nil, fault.New(fault.Invalid, "Invalid value \"%v\" set in driver_info/redfish_auth_type on node %s. The value should be one of \"basic\", \"session\" or \"auto\".", v, n.UUID)
		}
		inf.authType = s
	}
	if v, ok := n.Properties["vendor"].(string); ok {
		inf.vendor = strings.ToLower(v)
	}
	return inf, nil
}

// iloInfo reads Ironic's ilo driver_info (the ilo5 hardware type) as the
// Redfish keys of the same BMC: iLO 5's Redfish service at
// https://ilo_address[:client_port], its only system /redfish/v1/Systems/1,
// ilo_username/ilo_password, ilo_verify_ca. The node's driver_info is left
// as the operator wrote it.
func iloInfo(di map[string]any) map[string]any {
	out := map[string]any{}
	addr := strings.TrimSpace(driver.ScalarString(di["ilo_address"]))
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		addr = "[" + addr + "]"
	}
	if p := driver.ScalarString(di["client_port"]); p != "" && p != "<nil>" {
		addr += ":" + p
	}
	out["redfish_address"] = "https://" + addr
	out["redfish_system_id"] = defaultRoot + "/Systems/1"
	for from, to := range map[string]string{"ilo_username": "redfish_username", "ilo_password": "redfish_password", "ilo_verify_ca": "redfish_verify_ca"} {
		if v, ok := di[from]; ok {
			out[to] = v
		}
	}
	return out
}

// ILOProperties documents the ilo5 type's driver_info keys: Ironic's ilo
// keys, which castiron reads as the Redfish service of iLO 5 (the redfish_*
// keys are accepted too and win when redfish_address is set).
func ILOProperties() []driver.Property {
	return []driver.Property{
		{Name: "ilo_address", Description: "IP address or host name of the iLO; castiron talks to its Redfish service at https://ilo_address. Required (unless redfish_address is set)."},
		{Name: "ilo_username", Description: "iLO user with the right to change power and boot settings. Required."},
		{Name: "ilo_password", Description: "Password of ilo_username. Required."},
		{Name: "client_port", Description: "Port of the iLO's HTTPS service; default 443. Optional."},
		{Name: "ilo_verify_ca", Description: "true (default) to verify the iLO's TLS certificate, false to skip verification, or the path of a CA bundle. Optional."},
	}
}

// systemPath turns redfish_system_id into a resource path. Ironic documents
// it as a path (/redfish/v1/Systems/1); a bare id ("1", a UUID) is taken as
// a member of the Systems collection, as sushy-tools users often write it.
func systemPath(root, id string) string {
	id = strings.TrimSpace(id)
	if strings.HasPrefix(id, "/") {
		return strings.TrimRight(id, "/")
	}
	return root + "/Systems/" + url.PathEscape(id)
}

// Properties documents the driver_info keys (GET
// /v1/drivers/redfish/properties): Ironic's keys, castiron's words.
func Properties() []driver.Property {
	return []driver.Property{
		{Name: "redfish_address", Description: "URL of the BMC's Redfish service, e.g. https://10.0.0.5 or https://bmc.example.com:8443. Without a scheme, https is used; a path, if given, replaces the service root /redfish/v1. Required."},
		{Name: "redfish_system_id", Description: "Path of the node's ComputerSystem on the BMC, e.g. /redfish/v1/Systems/1 (a bare id is taken under the Systems collection). Needed only when the BMC manages more than one system; otherwise its only system is used. Optional."},
		{Name: "redfish_username", Description: "BMC user with the right to change power and boot settings. Optional, but without it most BMCs refuse every call."},
		{Name: "redfish_password", Description: "Password of redfish_username. Optional."},
		{Name: "redfish_verify_ca", Description: "true (default) to verify the BMC's TLS certificate against the system's trusted CAs, false to skip verification, or the path of a CA bundle file or a directory of CA certificates to verify against. Optional."},
		{Name: "redfish_auth_type", Description: "\"session\" (a Redfish session, reused across calls), \"basic\" (HTTP basic authentication on every call) or \"auto\" (default: a session when the BMC offers one, basic otherwise). Optional."},
	}
}

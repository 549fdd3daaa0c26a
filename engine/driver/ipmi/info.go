package ipmi

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/bougou/go-ipmi/pkg/types"
	"sync"
)

// Ironic's defaults and limits for driver_info (ironic/drivers/modules/ipmitool.py).
const (
	defaultPort     = 623
	protocol20      = "2.0"
	protocol15      = "1.5"
	maxUserLen      = 16 // IPMI user names are 16 bytes in both protocol versions
	maxPassLen20    = 20 // RMCP+ keys are 20 bytes
	maxPassLen15    = 16 // IPMI 1.5 passwords are 16 bytes
	privAdmin       = "ADMINISTRATOR"
	bridgingNone    = "no"
	internalBootDev = "persistent_boot_device"
	internalNextPer = "is_next_boot_persistent"
)

// validPrivLevels is in Ironic's order, which its error message lists.
var validPrivLevels = []string{"ADMINISTRATOR", "CALLBACK", "OPERATOR", "USER"}

var privLevels = map[string]types.PrivilegeLevel{
	"ADMINISTRATOR": types.PrivilegeLevelAdministrator,
	"CALLBACK":      types.PrivilegeLevelCallback,
	"OPERATOR":      types.PrivilegeLevelOperator,
	"USER":          types.PrivilegeLevelUser,
}

// hostnameRE is Ironic's is_hostname_safe pattern (RFC 952/1123).
var hostnameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?(\.[a-z0-9\-_]{0,62}[a-z0-9])*\.?$`)
})

// info is a node's driver_info, parsed and checked.
type info struct {
	uuid     string
	address  string
	port     int
	username string
	password string
	priv     types.PrivilegeLevel
	// v15 selects IPMI 1.5 ("lan"); otherwise IPMI 2.0 RMCP+ ("lanplus").
	v15 bool
	// suite is ipmi_cipher_suite, or -1 when unset (then probe 17, then 3).
	suite              int
	forceBootDevice    bool
	disableBootTimeout bool
	// vendor is properties.vendor, lower case: Supermicro needs another UEFI
	// disk selector, as in Ironic.
	vendor string
	uefi   bool
}

// target is host:port, for messages.
func (i *info) target() string {
	return netipJoin(i.address, i.port)
}

func netipJoin(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// parseInfo reads n.DriverInfo the way Ironic's _parse_driver_info does and
// answers fault.Invalid (or fault.NotImplemented for features go-ipmi lacks)
// with Ironic's wording.
func parseInfo(n driver.Node) (*info, error) {
	di := n.DriverInfo
	if driver.IsEmpty(di["ipmi_address"]) {
		return nil, fault.New(fault.Invalid, "Missing the following IPMI credentials in node's driver_info: ipmi_address.")
	}
	inf := &info{uuid: n.UUID, port: defaultPort, priv: types.PrivilegeLevelAdministrator, suite: -1,
		disableBootTimeout: true, uefi: n.BootMode == "uefi"}

	addr, ok := di["ipmi_address"].(string)
	if !ok {
		return nil, fault.New(fault.Invalid, "Invalid IPMI address \"%v\" for node %s. Must be a valid IP address or hostname.", di["ipmi_address"], n.UUID)
	}
	addr = strings.TrimSpace(addr)
	if _, err := netip.ParseAddr(addr); err != nil && (len(addr) > 255 || !hostnameRE().MatchString(addr)) {
		return nil, fault.New(fault.Invalid, "Invalid IPMI address \"%s\" for node %s. Must be a valid IP address or hostname.", addr, n.UUID)
	}
	inf.address = addr

	var err error
	if inf.port, err = portValue(di, "ipmi_port", defaultPort); err != nil {
		return nil, err
	}
	// Only the console uses it, but Ironic rejects a bad one here too.
	if _, err = portValue(di, "ipmi_terminal_port", 0); err != nil {
		return nil, err
	}

	if v, ok := di["ipmi_username"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, fault.New(fault.Invalid, "Invalid value for ipmi_username: expected a string.")
		}
		if len(s) > maxUserLen {
			return nil, fault.New(fault.Invalid, "Invalid value for ipmi_username: IPMI user names are at most %d bytes long.", maxUserLen)
		}
		inf.username = s
	}

	proto := protocol20
	if v, ok := di["ipmi_protocol_version"]; ok && v != nil {
		proto = driver.ScalarString(v)
		if f, ok := v.(float64); ok { // JSON 2.0 arrives as float64(2)
			proto = strconv.FormatFloat(f, 'f', 1, 64)
		}
	}
	switch proto {
	case protocol20:
	case protocol15:
		inf.v15 = true
	default:
		return nil, fault.New(fault.Invalid, "Invalid IPMI protocol version value %s, the valid value can be one of %s, %s", proto, protocol20, protocol15)
	}

	if v, ok := di["ipmi_password"]; ok && v != nil {
		inf.password = driver.ScalarString(v) // Ironic str()s it: numbers are fine
	}
	maxPass := maxPassLen20
	if inf.v15 {
		maxPass = maxPassLen15
	}
	if len(inf.password) > maxPass {
		return nil, fault.New(fault.Invalid, "Invalid value for ipmi_password: IPMI %s passwords are at most %d bytes long.", proto, maxPass)
	}

	if v, ok := di["ipmi_priv_level"]; ok && v != nil {
		s, _ := v.(string)
		p, ok := privLevels[s]
		if !ok {
			return nil, fault.New(fault.Invalid, "Invalid privilege level value:%v, the valid value can be one of %s", v, strings.Join(validPrivLevels, ", "))
		}
		inf.priv = p
	}

	if v, ok := di["ipmi_bridging"]; ok && v != nil && v != bridgingNone {
		switch v {
		case "single", "dual":
			return nil, fault.New(fault.NotImplemented, "Value for ipmi_bridging is provided as %s, but IPMI bridging is not supported by castiron's ipmi driver.", v)
		default:
			return nil, fault.New(fault.Invalid, "Invalid value for ipmi_bridging: %v, the valid value can be one of: single, dual, no", v)
		}
	}

	if v, ok := di["ipmi_hex_kg_key"]; ok && !driver.IsEmpty(v) {
		s, _ := v.(string)
		if len(s)%2 != 0 {
			return nil, fault.New(fault.Invalid, "Number of ipmi_hex_kg_key characters is not even")
		}
		if _, err := hex.DecodeString(s); err != nil {
			return nil, fault.New(fault.Invalid, "Invalid ipmi_hex_kg_key: expected hexadecimal digits.")
		}
		// go-ipmi v0.9.1 has no way to set the BMC key (K_G).
		return nil, fault.New(fault.NotImplemented, "ipmi_hex_kg_key is not supported by castiron's ipmi driver; remove it or clear the BMC's K_G key.")
	}

	if v, ok := di["ipmi_cipher_suite"]; ok && v != nil {
		cs, err := intValue(v)
		if err != nil {
			return nil, fault.New(fault.Invalid, "Invalid cipher suite %v, expected a number", v)
		}
		if inf.v15 {
			return nil, fault.New(fault.Invalid, "Cipher suites cannot be used with IPMI 1.5")
		}
		if cs < 0 || cs > math.MaxUint8 {
			return nil, fault.New(fault.Invalid, "Invalid cipher suite %d, expected 0 to 17 (3 or 17 recommended)", cs)
		}
		if _, _, _, ok := types.GetCipherSuiteAlgorithms(types.CipherSuiteID(cs)); !ok {
			return nil, fault.New(fault.Invalid, "Invalid cipher suite %d, expected 0 to 17 (3 or 17 recommended)", cs)
		}
		inf.suite = cs
	}

	if inf.forceBootDevice, err = boolValue(di, "ipmi_force_boot_device", false); err != nil {
		return nil, err
	}
	if inf.disableBootTimeout, err = boolValue(di, "ipmi_disable_boot_timeout", true); err != nil {
		return nil, err
	}
	if v, ok := n.Properties["vendor"].(string); ok {
		inf.vendor = strings.ToLower(v)
	}
	return inf, nil
}

// intValue accepts an integer or a string holding one (JSON numbers arrive as
// float64).
func intValue(v any) (int, error) {
	switch v := v.(type) {
	case int:
		return v, nil
	case int64:
		return int(v), nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
			return 0, fmt.Errorf("not an integer: %v", v)
		}
		return int(v), nil
	case string:
		return strconv.Atoi(strings.TrimSpace(v))
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}

// portValue reads an optional port key, like Ironic's validate_network_port
// but without port 0, which no BMC listens on.
func portValue(di map[string]any, key string, def int) (int, error) {
	v, ok := di[key]
	if !ok || v == nil {
		return def, nil
	}
	p, err := intValue(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, fault.New(fault.Invalid, "%s \"%v\" is not a valid port.", key, v)
	}
	return p, nil
}

// boolValue is oslo's strutils.bool_from_string with strict=True.
func boolValue(di map[string]any, key string, def bool) (bool, error) {
	v, ok := di[key]
	if !ok || v == nil {
		return def, nil
	}
	if b, ok := driver.ParseBool(v); ok {
		return b, nil
	}
	return false, fault.New(fault.Invalid, "Invalid value for %s: \"%v\" is not a boolean.", key, v)
}

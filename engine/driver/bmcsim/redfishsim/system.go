package redfishsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// machineTimeout bounds one Machine call made for a request.
const machineTimeout = 2 * time.Minute

func (s *Server) routeSystem(r *http.Request, p string, segs []string, body []byte, unlock func()) (answer, error) {
	sp := s.SystemPath()
	if len(segs) == 0 {
		switch r.Method {
		case http.MethodGet:
			return answer{code: http.StatusOK, body: s.system()}, nil
		case http.MethodPatch:
			return s.patchSystem(body)
		}
		return answer{}, notAllowed(r)
	}
	switch segs[0] {
	case "Actions":
		if len(segs) == 2 && segs[1] == "ComputerSystem.Reset" {
			if r.Method != http.MethodPost {
				return answer{}, notAllowed(r)
			}
			return s.reset(r.Context(), body, unlock)
		}
	case "SecureBoot":
		if len(segs) == 1 {
			return s.secureBootResource(r, body)
		}
		if len(segs) == 3 && segs[1] == "Actions" && segs[2] == "SecureBoot.ResetKeys" {
			return s.resetSecureBootKeys(r, body)
		}
	case "EthernetInterfaces":
		nics := s.nicIDs()
		if len(segs) == 1 {
			return get(r, func() (any, error) {
				var ms []string
				for _, id := range nics {
					ms = append(ms, sp+"/EthernetInterfaces/"+id)
				}
				return s.collection(sp+"/EthernetInterfaces", "EthernetInterface", "System Ethernet Interface Collection", ms), nil
			})
		}
		if i := slices.Index(nics, segs[1]); i >= 0 && len(segs) == 2 {
			return get(r, func() (any, error) { return s.nic(i), nil })
		}
	case "Processors":
		if len(segs) == 1 {
			return get(r, func() (any, error) {
				var ms []string
				for i := range s.cfg.CPUs {
					ms = append(ms, fmt.Sprintf("%s/Processors/CPU%d", sp, i+1))
				}
				return s.collection(sp+"/Processors", "Processor", "Processors Collection", ms), nil
			})
		}
		var n int
		if len(segs) == 2 && sscanCPU(segs[1], &n) && n >= 1 && n <= s.cfg.CPUs {
			return get(r, func() (any, error) { return s.processor(n), nil })
		}
	case "Bios":
		return s.routeBIOS(r, p, segs[1:], body)
	case "Storage":
		if !s.cfg.NoStorage {
			return s.routeStorage(r, p, segs[1:], body)
		}
	case "VirtualMedia":
		if s.cfg.VirtualMedia != "manager" {
			return s.routeMedia(r, p, sp+"/VirtualMedia", segs[1:], body, unlock)
		}
	}
	return answer{}, notFound(p)
}

func sscanCPU(s string, n *int) bool {
	_, err := fmt.Sscanf(s, "CPU%d", n)
	return err == nil && s == fmt.Sprintf("CPU%d", *n)
}

func (s *Server) nicIDs() []string {
	var ids []string
	for i, mac := range s.cfg.MACs {
		switch s.cfg.Flavour {
		case IDRAC:
			ids = append(ids, fmt.Sprintf("NIC.Integrated.1-%d-1", i+1))
		case ILO:
			ids = append(ids, fmt.Sprint(i+1))
		default:
			ids = append(ids, strings.ToUpper(strings.ReplaceAll(mac, ":", "")))
		}
	}
	return ids
}

func (s *Server) nic(i int) map[string]any {
	id := s.nicIDs()[i]
	mac := strings.ToUpper(s.cfg.MACs[i])
	return map[string]any{
		"@odata.id": s.odata(s.SystemPath() + "/EthernetInterfaces/" + id), "@odata.type": "#EthernetInterface.v1_6_0.EthernetInterface",
		"Id": id, "Name": fmt.Sprintf("Ethernet Interface %d", i+1), "MACAddress": mac, "PermanentMACAddress": mac,
		"SpeedMbps": 25000, "LinkStatus": "LinkUp", "InterfaceEnabled": true,
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
	}
}

func (s *Server) processor(n int) map[string]any {
	return map[string]any{
		"@odata.id": s.odata(fmt.Sprintf("%s/Processors/CPU%d", s.SystemPath(), n)), "@odata.type": "#Processor.v1_7_0.Processor",
		"Id": fmt.Sprintf("CPU%d", n), "Name": "Processor", "Socket": fmt.Sprintf("CPU %d", n),
		"ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64",
		"Manufacturer": "Intel(R) Corporation", "Model": "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
		"MaxSpeedMHz": 3700, "TotalCores": max(1, s.cfg.Threads/2), "TotalThreads": s.cfg.Threads,
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
	}
}

func (s *Server) powerState() string {
	if m := s.cfg.Machine; m != nil {
		if m.Running() {
			return "On"
		}
		return "Off"
	}
	return s.sys.power
}

func (s *Server) componentVersion(resetRequired bool) string {
	for _, c := range s.firmware {
		if c.ResetRequired == resetRequired {
			return c.Version
		}
	}
	return ""
}

func (s *Server) system() map[string]any {
	sp := s.SystemPath()
	boot := map[string]any{
		"BootSourceOverrideEnabled":                         s.sys.enabled,
		"BootSourceOverrideTarget":                          s.sys.target,
		"BootSourceOverrideTarget@Redfish.AllowableValues":  s.fl.bootTargets,
		"BootSourceOverrideMode":                            s.sys.mode,
		"BootSourceOverrideMode@Redfish.AllowableValues":    []string{"Legacy", "UEFI"},
		"BootSourceOverrideEnabled@Redfish.AllowableValues": []string{"Disabled", "Once", "Continuous"},
		"HttpBootUri":                  s.sys.httpBootURI,
		"UefiTargetBootSourceOverride": nil,
	}
	sys := map[string]any{
		"@odata.id": s.odata(sp), "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
		"Id": s.cfg.SystemID, "Name": "System", "SystemType": "Physical",
		"Manufacturer": s.fl.manufacturer, "Model": s.fl.model, "SKU": "SIM-" + s.cfg.SystemID,
		"SerialNumber": "SIM" + strings.ToUpper(strings.ReplaceAll(s.cfg.UUID, "-", "")[:10]),
		"UUID":         s.cfg.UUID, "AssetTag": s.sys.assetTag, "HostName": "",
		"PowerState": s.powerState(), "IndicatorLED": s.sys.led, "LocationIndicatorActive": s.sys.led != "Off",
		"BiosVersion": s.componentVersion(true),
		"Status":      map[string]any{"State": "Enabled", "Health": s.sys.health, "HealthRollup": s.sys.health},
		"Boot":        boot,
		"ProcessorSummary": map[string]any{"Count": s.cfg.CPUs, "LogicalProcessorCount": s.cfg.CPUs * s.cfg.Threads,
			"Model": "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", "Status": map[string]any{"State": "Enabled", "Health": "OK"}},
		"MemorySummary": map[string]any{"TotalSystemMemoryGiB": s.cfg.MemoryGiB,
			"Status": map[string]any{"State": "Enabled", "Health": "OK"}},
		"Processors":         s.link(sp + "/Processors"),
		"EthernetInterfaces": s.link(sp + "/EthernetInterfaces"),
		"Storage":            s.link(sp + "/Storage"),
		"Bios":               s.link(sp + "/Bios"),
		"SecureBoot":         s.link(sp + "/SecureBoot"),
		"Links": map[string]any{
			"Chassis":   []any{s.link(s.ChassisPath())},
			"ManagedBy": []any{s.link(s.ManagerPath())},
		},
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target":                            s.odata(sp + "/Actions/ComputerSystem.Reset"),
			"ResetType@Redfish.AllowableValues": s.fl.resetTypes,
		}},
	}
	if s.cfg.VirtualMedia != "manager" {
		sys["VirtualMedia"] = s.link(sp + "/VirtualMedia")
	}
	if s.cfg.NoStorage {
		delete(sys, "Storage")
	}
	if sc := s.hostSerialConsole(); sc != nil {
		sys["SerialConsole"] = sc
	}
	return sys
}

func (s *Server) manager() (any, error) {
	mp := s.ManagerPath()
	m := map[string]any{
		"@odata.id": s.odata(mp), "@odata.type": "#Manager.v1_10_0.Manager",
		"Id": s.cfg.ManagerID, "Name": "Manager", "ManagerType": "BMC", "UUID": s.cfg.UUID,
		"Model": s.fl.product, "FirmwareVersion": s.componentVersion(false), "PowerState": "On",
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Links": map[string]any{
			"ManagerForServers": []any{s.link(s.SystemPath())},
			"ManagerForChassis": []any{s.link(s.ChassisPath())},
		},
		"Actions": map[string]any{"#Manager.Reset": map[string]any{
			"target": s.odata(mp + "/Actions/Manager.Reset"), "ResetType@Redfish.AllowableValues": []string{"GracefulRestart"},
		}},
	}
	if s.cfg.VirtualMedia != "system" {
		m["VirtualMedia"] = s.link(mp + "/VirtualMedia")
	}
	m["NetworkProtocol"] = s.link(mp + "/NetworkProtocol")
	if sc := s.managerSerialConsole(); sc != nil {
		m["SerialConsole"] = sc
	}
	if s.cfg.Flavour == IDRAC {
		m["Links"].(map[string]any)["Oem"] = map[string]any{"Dell": map[string]any{
			"DellJobService": s.link(s.jobServicePath()), "Jobs": s.link(s.jobsPath()),
			"DelliDRACCardService": s.link(s.idracCardServicePath())}}
	}
	return m, nil
}

func (s *Server) chassis() map[string]any {
	return map[string]any{
		"@odata.id": s.odata(s.ChassisPath()), "@odata.type": "#Chassis.v1_14_0.Chassis",
		"Id": s.cfg.ChassisID, "Name": "Computer System Chassis", "ChassisType": "RackMount",
		"Manufacturer": s.fl.manufacturer, "Model": s.fl.model, "SerialNumber": "SIMCH" + s.cfg.SystemID,
		"PowerState": s.powerState(), "IndicatorLED": s.sys.chassisLED,
		"Status":          map[string]any{"State": "Enabled", "Health": s.sys.health},
		"NetworkAdapters": s.link(s.ChassisPath() + "/NetworkAdapters"),
		"Links": map[string]any{
			"ComputerSystems": []any{s.link(s.SystemPath())},
			"ManagedBy":       []any{s.link(s.ManagerPath())},
		},
	}
}

// patchSystem changes the boot override, the indicator or the asset tag.
func (s *Server) patchSystem(body []byte) (answer, error) {
	var in struct {
		Boot *struct {
			BootSourceOverrideTarget     *string
			BootSourceOverrideEnabled    *string
			BootSourceOverrideMode       *string
			HttpBootUri                  *string //nolint:revive // the Redfish name
			UefiTargetBootSourceOverride *string
		}
		IndicatorLED            *string
		LocationIndicatorActive *bool
		AssetTag                *string
	}
	if err := decodePatch(body, &in, "Boot", "IndicatorLED", "LocationIndicatorActive", "AssetTag"); err != nil {
		return answer{}, err
	}
	if b := in.Boot; b != nil {
		if v := b.BootSourceOverrideTarget; v != nil && !slices.Contains(s.fl.bootTargets, *v) {
			return answer{}, errf(http.StatusBadRequest, "PropertyValueNotInList",
				"The value %s for the property BootSourceOverrideTarget is not in the list of acceptable values.", *v)
		}
		if v := b.BootSourceOverrideEnabled; v != nil && !slices.Contains([]string{"Disabled", "Once", "Continuous"}, *v) {
			return answer{}, errf(http.StatusBadRequest, "PropertyValueNotInList",
				"The value %s for the property BootSourceOverrideEnabled is not in the list of acceptable values.", *v)
		}
		if v := b.BootSourceOverrideMode; v != nil && *v != "UEFI" && *v != "Legacy" {
			return answer{}, errf(http.StatusBadRequest, "PropertyValueNotInList",
				"The value %s for the property BootSourceOverrideMode is not in the list of acceptable values.", *v)
		}
		if v := b.BootSourceOverrideTarget; v != nil {
			s.sys.target = *v
		}
		if v := b.BootSourceOverrideEnabled; v != nil {
			s.sys.enabled = *v
		}
		if s.cfg.OnceReadsContinuous && s.sys.enabled == "Once" {
			s.sys.enabled = "Continuous"
		}
		if v := b.BootSourceOverrideMode; v != nil {
			s.sys.mode = *v
			s.bios.syncBootMode(*v)
		}
		if v := b.HttpBootUri; v != nil {
			s.sys.httpBootURI = *v
		}
	}
	if v := in.IndicatorLED; v != nil {
		if err := checkLED(*v); err != nil {
			return answer{}, err
		}
		s.sys.led = *v
	}
	if v := in.LocationIndicatorActive; v != nil {
		s.sys.led = map[bool]string{true: "Lit", false: "Off"}[*v]
	}
	if v := in.AssetTag; v != nil {
		s.sys.assetTag = *v
	}
	return answer{code: http.StatusNoContent}, nil
}

func (s *Server) secureBootResource(r *http.Request, body []byte) (answer, error) {
	switch r.Method {
	case http.MethodGet:
		cur := map[bool]string{true: "Enabled", false: "Disabled"}[s.sys.secureActive]
		return answer{code: http.StatusOK, body: map[string]any{
			"@odata.id": s.odata(s.SystemPath() + "/SecureBoot"), "@odata.type": "#SecureBoot.v1_1_0.SecureBoot",
			"Id": "SecureBoot", "Name": "UEFI Secure Boot", "SecureBootEnable": s.sys.secureBoot,
			"SecureBootCurrentBoot": cur, "SecureBootMode": map[bool]string{false: "DeployedMode", true: "SetupMode"}[s.sys.keysDeleted],
			"Actions": map[string]any{"#SecureBoot.ResetKeys": map[string]any{
				"target":                                s.odata(s.SystemPath() + "/SecureBoot/Actions/SecureBoot.ResetKeys"),
				"ResetKeysType@Redfish.AllowableValues": []string{"ResetAllKeysToDefault", "DeleteAllKeys", "DeletePK"}}},
		}}, nil
	case http.MethodPatch:
		var in struct{ SecureBootEnable *bool }
		if err := decodePatch(body, &in, "SecureBootEnable"); err != nil {
			return answer{}, err
		}
		if in.SecureBootEnable != nil {
			if *in.SecureBootEnable && s.sys.mode != "UEFI" {
				return answer{}, errf(http.StatusConflict, "ActionNotSupported", "Secure boot can only be enabled in UEFI boot mode.")
			}
			s.sys.secureBoot = *in.SecureBootEnable
		}
		return answer{code: http.StatusNoContent}, nil
	}
	return answer{}, notAllowed(r)
}

// resetSecureBootKeys is SecureBoot.ResetKeys: deleting the keys (or the
// PK) leaves the firmware in SetupMode, the defaults restore DeployedMode.
func (s *Server) resetSecureBootKeys(r *http.Request, body []byte) (answer, error) {
	if r.Method != http.MethodPost {
		return answer{}, notAllowed(r)
	}
	var in struct{ ResetKeysType string }
	if err := json.Unmarshal(body, &in); err != nil {
		return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.")
	}
	switch in.ResetKeysType {
	case "ResetAllKeysToDefault":
		s.sys.keysDeleted = false
	case "DeleteAllKeys", "DeletePK":
		s.sys.keysDeleted = true
	default:
		return answer{}, errf(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter ResetKeysType for the action SecureBoot.ResetKeys is not supported on the target resource.")
	}
	return answer{code: http.StatusNoContent}, nil
}

// bootForStart is called by the Machine (or the state-only power code) at
// every start: pending BIOS settings and staged firmware apply, secure boot
// takes effect, and a Once override is used up.
func (s *Server) bootForStart() Boot {
	s.mu.Lock()
	b := s.startLocked()
	dir := s.cfg.MediaDir
	s.mu.Unlock()
	if b.Target == "UefiHttp" && b.HTTPBootURI != "" && b.Mode == "UEFI" {
		b.HTTPBootFile = s.fetchHTTPBoot(dir, b.HTTPBootURI)
		s.mu.Lock()
		s.sys.lastBoot.HTTPBootFile = b.HTTPBootFile
		s.mu.Unlock()
	}
	return b
}

// fetchHTTPBoot is the firmware's half of a UEFI HTTP boot: the image at
// uri, downloaded for the machine to boot ("" when it cannot be fetched:
// the firmware then goes on to the next boot device, as OVMF does).
func (s *Server) fetchHTTPBoot(dir, uri string) string {
	ctx, cancel := context.WithTimeout(context.Background(), machineTimeout)
	defer cancel()
	local := filepath.Join(dir, "httpboot.img")
	if err := s.download(ctx, uri, local); err != nil {
		s.cfg.Logger.Warn("redfishsim: UEFI HTTP boot: fetching the image failed", "uri", uri, "err", err)
		return ""
	}
	s.cfg.Logger.Info("redfishsim: UEFI HTTP boot image fetched", "uri", uri, "file", local)
	return local
}

func (s *Server) startLocked() Boot {
	if s.runBIOSJob() { // iDRAC: only through a configuration job
		if mode, changed := s.bios.applyPending(s.cfg.Now()); changed {
			s.sys.mode = mode
		}
	}
	for _, c := range s.firmware {
		if c.pending != "" {
			c.Version, c.pending = c.pending, ""
		}
	}
	s.sys.secureActive = s.sys.secureBoot && s.sys.mode == "UEFI"
	b := Boot{Target: "None", Mode: s.sys.mode, HTTPBootURI: s.sys.httpBootURI, SecureBoot: s.sys.secureActive}
	if s.sys.enabled != "Disabled" {
		b.Target = s.sys.target
	}
	if s.sys.enabled == "Once" {
		s.sys.enabled, s.sys.target = "Disabled", "None"
	}
	s.sys.lastBoot = b
	return b
}

// reset is ComputerSystem.Reset.
func (s *Server) reset(ctx context.Context, body []byte, unlock func()) (answer, error) {
	var in struct{ ResetType string }
	if err := json.Unmarshal(body, &in); err != nil {
		return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
	}
	if in.ResetType == "" {
		return answer{}, errf(http.StatusBadRequest, "ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.")
	}
	if !slices.Contains(s.fl.resetTypes, in.ResetType) {
		return answer{}, errf(http.StatusBadRequest, "ActionParameterNotSupported",
			"The parameter ResetType for the action ComputerSystem.Reset is not supported on the target resource (value %s).", in.ResetType)
	}
	on := s.powerState() == "On"
	rt := in.ResetType
	if rt == "PushPowerButton" {
		rt = map[bool]string{true: "GracefulShutdown", false: "On"}[on]
	}
	switch {
	case (rt == "On" || rt == "ForceOn") && on, (rt == "ForceOff" || rt == "GracefulShutdown") && !on:
		if s.cfg.Flavour == IDRAC { // iDRAC refuses a reset to the state the server is in
			return answer{}, errf(http.StatusConflict, "ActionNotSupported", "Unable to perform %s: the server is already powered %s.",
				in.ResetType, map[bool]string{true: "ON", false: "OFF"}[on])
		}
		s.stats.Resets = append(s.stats.Resets, in.ResetType)
		return answer{code: http.StatusNoContent}, nil
	case (rt == "GracefulRestart" || rt == "ForceRestart" || rt == "Nmi") && !on:
		return answer{}, errf(http.StatusConflict, "ActionNotSupported", "Unable to perform %s: the server is powered off.", in.ResetType)
	case rt == "PowerCycle" && !on:
		rt = "On"
	}
	s.stats.Resets = append(s.stats.Resets, in.ResetType)
	m := s.cfg.Machine
	if m == nil {
		switch rt {
		case "On", "ForceOn", "ForceRestart", "GracefulRestart", "PowerCycle":
			s.startLocked()
			s.sys.power = "On"
		case "ForceOff", "GracefulShutdown":
			s.sys.power = "Off"
		}
		return answer{code: http.StatusNoContent}, nil
	}
	unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), machineTimeout)
	defer cancel()
	var err error
	switch rt {
	case "On", "ForceOn":
		err = m.PowerOn(ctx, s.bootForStart)
	case "ForceOff":
		err = m.PowerOff(ctx, true)
	case "GracefulShutdown":
		err = m.PowerOff(ctx, false)
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		err = m.Restart(ctx, s.bootForStart)
	case "Nmi":
		err = m.NMI(ctx)
	}
	if err != nil {
		s.cfg.Logger.Error("redfishsim: machine", "reset", in.ResetType, "err", err)
		return answer{}, errf(http.StatusInternalServerError, "InternalError", "%s failed: %v", in.ResetType, err)
	}
	return answer{code: http.StatusNoContent}, nil
}

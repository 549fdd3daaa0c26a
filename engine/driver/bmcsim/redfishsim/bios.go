package redfishsim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// Attribute is one BIOS setting of the attribute registry
// (AttributeRegistry.v1_3 RegistryEntries.Attributes).
type Attribute struct {
	Name          string
	Type          string // "Enumeration", "Integer", "String", "Boolean"
	Values        []string
	Default       any
	ReadOnly      bool
	ResetRequired bool
	Lower, Upper  int // Integer bounds
	MaxLength     int // String
	DisplayName   string
}

type biosState struct {
	registry []Attribute
	current  map[string]any
	pending  map[string]any // nil: nothing pending
	// applied is when pending settings were last applied, and what came of it
	applied  time.Time
	messages []any
}

// biosRegistries are each flavour's attributes: the DMTF Bios mockup's
// names (generic), Dell's (iDRAC) and HPE's (iLO), as their public
// attribute registries list them; values chosen for the tests.
var biosRegistries = map[Flavour][]Attribute{
	Generic: {
		{Name: "BootMode", Type: "Enumeration", Values: []string{"Uefi", "Bios"}, Default: "Uefi", ResetRequired: true, DisplayName: "Boot Mode"},
		{Name: "ProcTurboMode", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Turbo Boost"},
		{Name: "ProcHyperthreading", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Hyper-Threading"},
		{Name: "ProcVirtualization", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Virtualization Technology"},
		{Name: "PowerProfile", Type: "Enumeration", Values: []string{"MaxPerf", "PerfPerWatt", "Custom"}, Default: "MaxPerf", ResetRequired: true, DisplayName: "Power Profile"},
		{Name: "EmbeddedSata", Type: "Enumeration", Values: []string{"Raid", "Ahci", "Off"}, Default: "Raid", ResetRequired: true, DisplayName: "Embedded SATA"},
		{Name: "ProcCoreDisable", Type: "Integer", Lower: 0, Upper: 31, Default: 0, ResetRequired: true, DisplayName: "Disabled cores"},
		{Name: "AdminPhone", Type: "String", MaxLength: 32, Default: "", DisplayName: "Administrator phone"},
		{Name: "SriovEnable", Type: "Boolean", Default: false, ResetRequired: true, DisplayName: "SR-IOV"},
		{Name: "SystemSerialNumber", Type: "String", Default: "SIM-437XR1138R2", ReadOnly: true, DisplayName: "Serial number"},
	},
	IDRAC: {
		{Name: "BootMode", Type: "Enumeration", Values: []string{"Uefi", "Bios"}, Default: "Uefi", ResetRequired: true, DisplayName: "Boot Mode"},
		{Name: "ProcVirtualization", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Virtualization Technology"},
		{Name: "LogicalProc", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Logical Processor"},
		{Name: "SysProfile", Type: "Enumeration", Values: []string{"PerfPerWattOptimizedDapc", "PerfPerWattOptimizedOs", "PerfOptimized", "Custom"}, Default: "PerfPerWattOptimizedDapc", ResetRequired: true, DisplayName: "System Profile"},
		{Name: "SriovGlobalEnable", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Disabled", ResetRequired: true, DisplayName: "SR-IOV Global Enable"},
		{Name: "EmbSata", Type: "Enumeration", Values: []string{"AhciMode", "RaidMode", "Off"}, Default: "AhciMode", ResetRequired: true, DisplayName: "Embedded SATA"},
		{Name: "MemTest", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Disabled", ResetRequired: true, DisplayName: "System Memory Testing"},
		{Name: "NumLock", Type: "Enumeration", Values: []string{"On", "Off"}, Default: "On", ResetRequired: true, DisplayName: "Keyboard NumLock"},
		{Name: "AcPwrRcvryUserDelay", Type: "Integer", Lower: 60, Upper: 600, Default: 60, ResetRequired: true, DisplayName: "User Defined Delay (60s to 600s)"},
		{Name: "AssetTag", Type: "String", MaxLength: 63, Default: "", ResetRequired: true, DisplayName: "Asset Tag"},
		{Name: "SystemServiceTag", Type: "String", Default: "8GKWJX2", ReadOnly: true, DisplayName: "Service Tag"},
	},
	ILO: {
		{Name: "BootMode", Type: "Enumeration", Values: []string{"Uefi", "LegacyBios"}, Default: "Uefi", ResetRequired: true, DisplayName: "Boot Mode"},
		{Name: "ProcHyperthreading", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Intel(R) Hyperthreading"},
		{Name: "ProcVirtualization", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Intel(R) Virtualization Technology"},
		{Name: "WorkloadProfile", Type: "Enumeration", Values: []string{"GeneralPowerEfficientCompute", "GeneralPeakFrequencyCompute", "Virtualization-MaxPerformance", "Custom"}, Default: "GeneralPowerEfficientCompute", ResetRequired: true, DisplayName: "Workload Profile"},
		{Name: "PowerRegulator", Type: "Enumeration", Values: []string{"DynamicPowerSavings", "StaticLowPower", "StaticHighPerf", "OsControl"}, Default: "DynamicPowerSavings", ResetRequired: true, DisplayName: "Power Regulator"},
		{Name: "EmbeddedSata", Type: "Enumeration", Values: []string{"Ahci", "Raid"}, Default: "Ahci", ResetRequired: true, DisplayName: "Embedded SATA Configuration"},
		{Name: "Sriov", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "SR-IOV"},
		{Name: "ServerAssetTag", Type: "String", MaxLength: 31, Default: "", ResetRequired: true, DisplayName: "Server Asset Tag"},
		{Name: "ThermalShutdown", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetRequired: true, DisplayName: "Thermal Shutdown"},
		{Name: "SerialNumber", Type: "String", Default: "MXQ92100AB", ReadOnly: true, DisplayName: "Serial Number"},
	},
}

func newBIOS(f Flavour, bootMode string) biosState {
	b := biosState{registry: biosRegistries[f], current: map[string]any{}}
	for _, a := range b.registry {
		b.current[a.Name] = a.Default
	}
	b.syncBootMode(bootMode)
	return b
}

func (b *biosState) attr(name string) (Attribute, bool) {
	i := slices.IndexFunc(b.registry, func(a Attribute) bool { return a.Name == name })
	if i < 0 {
		return Attribute{}, false
	}
	return b.registry[i], true
}

// syncBootMode sets the BootMode attribute to a Redfish boot mode (a PATCH
// of BootSourceOverrideMode is the same setting on real BMCs).
func (b *biosState) syncBootMode(mode string) {
	a, ok := b.attr("BootMode")
	if !ok {
		return
	}
	if mode == "UEFI" {
		b.current["BootMode"] = "Uefi"
	} else {
		b.current["BootMode"] = a.Values[1]
	}
}

// applyPending applies the pending settings (at a reset) and returns the
// Redfish boot mode they leave.
func (b *biosState) applyPending(now time.Time) (string, bool) {
	if b.pending == nil {
		return "", false
	}
	maps.Copy(b.current, b.pending)
	b.messages = []any{map[string]any{"MessageId": "Base.1.8.Success", "Message": fmt.Sprintf("%d BIOS settings applied.", len(b.pending))}}
	b.pending, b.applied = nil, now
	if m, ok := b.current["BootMode"].(string); ok {
		if m == "Uefi" {
			return "UEFI", true
		}
		return "Legacy", true
	}
	return "", false
}

// check validates one setting against the registry (400s as a BMC
// answers them).
func (b *biosState) check(name string, raw json.RawMessage) (any, error) {
	a, ok := b.attr(name)
	if !ok {
		return nil, errf(http.StatusBadRequest, "PropertyUnknown", "The property %s is not in the list of valid properties for the resource.", name)
	}
	if a.ReadOnly {
		return nil, errf(http.StatusBadRequest, "PropertyNotWritable", "The property %s is a read only property and cannot be assigned a value.", name)
	}
	bad := func() error {
		return errf(http.StatusBadRequest, "PropertyValueTypeError", "The value %s for the property %s is of a different type than the property can accept.", raw, name)
	}
	switch a.Type {
	case "Enumeration":
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return nil, bad()
		}
		if !slices.Contains(a.Values, v) {
			return nil, errf(http.StatusBadRequest, "PropertyValueNotInList", "The value %s for the property %s is not in the list of acceptable values.", v, name)
		}
		return v, nil
	case "Integer":
		var v int
		if json.Unmarshal(raw, &v) != nil {
			return nil, bad()
		}
		if v < a.Lower || v > a.Upper {
			return nil, errf(http.StatusBadRequest, "PropertyValueOutOfRange", "The value %d for the property %s is not in the supported range of acceptable values (%d-%d).", v, name, a.Lower, a.Upper)
		}
		return v, nil
	case "Boolean":
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			return nil, bad()
		}
		return v, nil
	default:
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return nil, bad()
		}
		if a.MaxLength > 0 && len(v) > a.MaxLength {
			return nil, errf(http.StatusBadRequest, "PropertyValueFormatError", "The value %s for the property %s is longer than %d characters.", v, name, a.MaxLength)
		}
		return v, nil
	}
}

func (s *Server) biosPath() string { return s.SystemPath() + "/Bios" }

const biosRegistryID = "BiosAttributeRegistry.v1_0_0"

func (s *Server) routeBIOS(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	bp := s.biosPath()
	settings := bp + "/" + s.fl.biosSettings
	switch {
	case len(segs) == 0:
		if r.Method == http.MethodPatch {
			return answer{}, errf(http.StatusMethodNotAllowed, "OperationNotAllowed",
				"BIOS attributes are changed through the settings object %s.", s.odata(settings))
		}
		return get(r, func() (any, error) {
			times := []string{"OnReset"}
			if s.cfg.Flavour == IDRAC {
				times = []string{"OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"}
			}
			st := map[string]any{"@odata.type": "#Settings.v1_3_0.Settings", "SettingsObject": s.link(settings),
				"SupportedApplyTimes": times, "Messages": s.bios.messages}
			if !s.bios.applied.IsZero() {
				st["Time"] = s.bios.applied.UTC().Format(time.RFC3339)
			}
			return map[string]any{
				"@odata.id": s.odata(bp), "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Bios", "Name": "BIOS Configuration Current Settings",
				"AttributeRegistry": biosRegistryID, "Attributes": maps.Clone(s.bios.current), "@Redfish.Settings": st,
				"Actions": map[string]any{
					"#Bios.ResetBios":      map[string]any{"target": s.odata(bp + "/Actions/Bios.ResetBios")},
					"#Bios.ChangePassword": map[string]any{"target": s.odata(bp + "/Actions/Bios.ChangePassword")},
				},
			}, nil
		})
	case len(segs) == 1 && segs[0] == s.fl.biosSettings:
		switch r.Method {
		case http.MethodGet:
			attrs := map[string]any{}
			maps.Copy(attrs, s.bios.pending)
			return answer{code: http.StatusOK, body: map[string]any{
				"@odata.id": s.odata(settings), "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Settings",
				"Name": "BIOS Configuration Pending Settings", "AttributeRegistry": biosRegistryID, "Attributes": attrs,
			}}, nil
		case http.MethodPatch:
			var in struct {
				Attributes map[string]json.RawMessage
				ApplyTime  struct{ ApplyTime string } `json:"@Redfish.SettingsApplyTime"`
			}
			if err := decodePatch(body, &in, "Attributes"); err != nil {
				return answer{}, err
			}
			if s.cfg.Flavour == IDRAC && s.scheduledBIOSJob() != nil {
				return answer{}, errf(http.StatusBadRequest, "ActionNotSupported", "Pending configuration values are already committed, unable to perform another set operation. (SYS011)")
			}
			if len(in.Attributes) == 0 {
				return answer{}, errf(http.StatusBadRequest, "PropertyMissing", "The property Attributes is a required property and must be included in the request.")
			}
			vals := map[string]any{}
			for k, raw := range in.Attributes {
				v, err := s.bios.check(k, raw)
				if err != nil {
					return answer{}, err // nothing staged when one is bad
				}
				vals[k] = v
			}
			if s.bios.pending == nil {
				s.bios.pending = map[string]any{}
			}
			maps.Copy(s.bios.pending, vals)
			if s.cfg.Flavour == IDRAC && in.ApplyTime.ApplyTime != "" && in.ApplyTime.ApplyTime != "Immediate" {
				// iDRAC makes the configuration job itself for an apply time.
				j, err := s.newBIOSJob()
				if err != nil {
					return answer{}, err
				}
				return answer{code: http.StatusAccepted, header: map[string]string{"Location": s.jobsPath() + "/" + j.ID}}, nil
			}
			return answer{code: http.StatusNoContent}, nil
		}
		return answer{}, notAllowed(r)
	case len(segs) == 2 && segs[0] == "Actions" && segs[1] == "Bios.ResetBios":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		// Factory defaults, applied at the next reset like any setting.
		s.bios.pending = map[string]any{}
		for _, a := range s.bios.registry {
			if !a.ReadOnly {
				s.bios.pending[a.Name] = a.Default
			}
		}
		if s.cfg.Flavour == IDRAC && s.scheduledBIOSJob() == nil {
			if _, err := s.newBIOSJob(); err != nil { // iDRAC resets at the next reboot, job or not
				return answer{}, err
			}
		}
		return answer{code: http.StatusNoContent}, nil
	case len(segs) == 2 && segs[0] == "Actions" && segs[1] == "Bios.ChangePassword":
		if r.Method != http.MethodPost {
			return answer{}, notAllowed(r)
		}
		return answer{code: http.StatusNoContent}, nil
	}
	return answer{}, notFound(p)
}

// routeRegistries serves the BIOS attribute registry: the registry file
// (MessageRegistryFile) and the registry itself (AttributeRegistry), where
// sushy and gofish look for it.
func (s *Server) routeRegistries(r *http.Request, p string, segs []string) (answer, error) {
	file := Rooted + "/Registries/" + biosRegistryID
	reg := file + "/BiosAttributeRegistry"
	switch {
	case len(segs) == 0:
		return get(r, func() (any, error) {
			return s.collection(Rooted+"/Registries", "MessageRegistryFile", "Registry File Collection", []string{file}), nil
		})
	case len(segs) == 1 && segs[0] == biosRegistryID:
		return get(r, func() (any, error) {
			return map[string]any{"@odata.id": s.odata(file), "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
				"Id": biosRegistryID, "Name": "BIOS Attribute Registry File", "Registry": "BiosAttributeRegistry.1.0.0",
				"Languages": []string{"en"},
				"Location":  []any{map[string]any{"Language": "en", "Uri": s.odata(reg)}}}, nil
		})
	case len(segs) == 2 && segs[0] == biosRegistryID && segs[1] == "BiosAttributeRegistry":
		return get(r, func() (any, error) {
			var attrs []any
			for _, a := range s.bios.registry {
				e := map[string]any{"AttributeName": a.Name, "Type": a.Type, "DisplayName": a.DisplayName,
					"ReadOnly": a.ReadOnly, "ResetRequired": a.ResetRequired, "DefaultValue": a.Default,
					"CurrentValue": s.bios.current[a.Name], "Immutable": a.ReadOnly}
				switch a.Type {
				case "Enumeration":
					var vs []any
					for _, v := range a.Values {
						vs = append(vs, map[string]any{"ValueName": v, "ValueDisplayName": v})
					}
					e["Value"] = vs
				case "Integer":
					e["LowerBound"], e["UpperBound"], e["ScalarIncrement"] = a.Lower, a.Upper, 1
				case "String":
					if a.MaxLength > 0 {
						e["MaxLength"], e["MinLength"] = a.MaxLength, 0
					}
				}
				attrs = append(attrs, e)
			}
			return map[string]any{"@odata.id": s.odata(reg), "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
				"Id": "BiosAttributeRegistry", "Name": "BIOS Attribute Registry", "Language": "en",
				"RegistryVersion": "1.0.0", "OwningEntity": s.fl.vendor,
				"RegistryEntries": map[string]any{"Attributes": attrs}}, nil
		})
	}
	return answer{}, notFound(p)
}

// BIOS returns copies of the current and the pending settings (nil when
// none are pending).
func (s *Server) BIOS() (current, pending map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.bios.current), maps.Clone(s.bios.pending)
}

// BIOSRegistry returns the attribute registry.
func (s *Server) BIOSRegistry() []Attribute {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bios.registry)
}

package redfishsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

type storageState struct {
	id, name  string
	raidTypes []string
	drives    []*drive
	volumes   []*Volume
	building  []*Volume // created by a task still running: their drives are taken
	nextVol   int
}

type drive struct {
	DriveConfig
	led string
}

// Volume is one logical disk a controller built.
type Volume struct {
	ID            string
	Name          string
	RAIDType      string
	CapacityBytes int64
	Drives        []string // drive IDs
	WWN           string
}

func newStorage(fl flavourDefaults, drives []DriveConfig, raidTypes []string) storageState {
	if raidTypes == nil {
		raidTypes = fl.raidTypes
	}
	st := storageState{id: fl.storageID, name: fl.storageName, raidTypes: raidTypes}
	for _, d := range drives {
		st.drives = append(st.drives, &drive{DriveConfig: d, led: "Off"})
	}
	return st
}

// raidRules: smallest number of drives, whether the count must be even,
// and the capacity from n drives of the smallest size c.
var raidRules = map[string]struct {
	min      int
	even     bool
	exact    int
	capacity func(n int, c int64) int64
}{
	"RAID0":  {min: 1, capacity: func(n int, c int64) int64 { return int64(n) * c }},
	"RAID1":  {min: 2, exact: 2, capacity: func(n int, c int64) int64 { return c }},
	"RAID5":  {min: 3, capacity: func(n int, c int64) int64 { return int64(n-1) * c }},
	"RAID6":  {min: 4, capacity: func(n int, c int64) int64 { return int64(n-2) * c }},
	"RAID10": {min: 4, even: true, capacity: func(n int, c int64) int64 { return int64(n/2) * c }},
	"RAID50": {min: 6, even: true, capacity: func(n int, c int64) int64 { return int64(n-2) * c }},
	"RAID60": {min: 8, even: true, capacity: func(n int, c int64) int64 { return int64(n-4) * c }},
}

// legacyVolumeTypes maps the older VolumeType to a RAIDType (Volume.v1_0).
var legacyVolumeTypes = map[string]string{"NonRedundant": "RAID0", "Mirrored": "RAID1", "StripedWithParity": "RAID5", "SpannedMirrors": "RAID10"}

func (s *Server) storagePath() string { return s.SystemPath() + "/Storage/" + s.storage.id }

func (s *Server) drivePath(id string) string { return s.storagePath() + "/Drives/" + id }

func (s *Server) volumePath(id string) string { return s.storagePath() + "/Volumes/" + id }

func (s *Server) routeStorage(r *http.Request, p string, segs []string, body []byte) (answer, error) {
	st := &s.storage
	if len(segs) == 0 {
		return get(r, func() (any, error) {
			return s.collection(s.SystemPath()+"/Storage", "Storage", "Storage Collection", []string{s.storagePath()}), nil
		})
	}
	if segs[0] != st.id {
		return answer{}, notFound(p)
	}
	switch {
	case len(segs) == 1:
		return get(r, func() (any, error) { return s.storageResource(), nil })
	case len(segs) == 3 && segs[1] == "Drives":
		i := slices.IndexFunc(st.drives, func(d *drive) bool { return d.ID == segs[2] })
		if i < 0 {
			return answer{}, notFound(p)
		}
		d := st.drives[i]
		switch r.Method {
		case http.MethodGet:
			return answer{code: http.StatusOK, body: s.driveResource(d)}, nil
		case http.MethodPatch:
			var in struct{ IndicatorLED *string }
			if err := decodePatch(body, &in, "IndicatorLED"); err != nil {
				return answer{}, err
			}
			if in.IndicatorLED != nil {
				if err := checkLED(*in.IndicatorLED); err != nil {
					return answer{}, err
				}
				d.led = *in.IndicatorLED
			}
			return answer{code: http.StatusNoContent}, nil
		}
		return answer{}, notAllowed(r)
	case len(segs) == 2 && segs[1] == "Volumes":
		switch r.Method {
		case http.MethodGet:
			var ms []string
			for _, v := range st.volumes {
				ms = append(ms, s.volumePath(v.ID))
			}
			c := s.collection(s.storagePath()+"/Volumes", "Volume", "Volume Collection", ms)
			c["@Redfish.OperationApplyTimeSupport"] = map[string]any{"@odata.type": "#Settings.v1_3_0.OperationApplyTimeSupport",
				"SupportedValues": []string{"Immediate", "OnReset"}}
			return answer{code: http.StatusOK, body: c}, nil
		case http.MethodPost:
			return s.createVolume(body)
		}
		return answer{}, notAllowed(r)
	case len(segs) == 3 && segs[1] == "Volumes":
		i := slices.IndexFunc(st.volumes, func(v *Volume) bool { return v.ID == segs[2] })
		if i < 0 {
			return answer{}, notFound(p)
		}
		v := st.volumes[i]
		switch r.Method {
		case http.MethodGet:
			return answer{code: http.StatusOK, body: s.volumeResource(v)}, nil
		case http.MethodDelete:
			del := func() error {
				s.storage.volumes = slices.DeleteFunc(s.storage.volumes, func(x *Volume) bool { return x == v })
				return nil
			}
			if s.fl.volumeTask {
				t := s.newTask("Delete volume "+v.ID, del)
				return s.taskAccepted(t), nil
			}
			_ = del()
			return answer{code: http.StatusNoContent}, nil
		}
		return answer{}, notAllowed(r)
	}
	return answer{}, notFound(p)
}

func (s *Server) storageResource() map[string]any {
	st := &s.storage
	var drives []any
	for _, d := range st.drives {
		drives = append(drives, s.link(s.drivePath(d.ID)))
	}
	return map[string]any{
		"@odata.id": s.odata(s.storagePath()), "@odata.type": "#Storage.v1_9_0.Storage",
		"Id": st.id, "Name": st.name, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"StorageControllers": []any{map[string]any{
			"MemberId": "0", "Name": st.name, "Manufacturer": s.fl.manufacturer,
			"SupportedRAIDTypes": st.raidTypes, "SupportedControllerProtocols": []string{"PCIe"},
			"SupportedDeviceProtocols": []string{"SAS", "SATA"}, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		}},
		"Drives": drives, "Drives@odata.count": len(drives),
		"Volumes": s.link(s.storagePath() + "/Volumes"),
	}
}

func (s *Server) driveResource(d *drive) map[string]any {
	var vols []any
	for _, v := range s.storage.volumes {
		if slices.Contains(v.Drives, d.ID) {
			vols = append(vols, s.link(s.volumePath(v.ID)))
		}
	}
	return map[string]any{
		"@odata.id": s.odata(s.drivePath(d.ID)), "@odata.type": "#Drive.v1_9_0.Drive",
		"Id": d.ID, "Name": d.ID, "CapacityBytes": d.CapacityBytes, "MediaType": d.MediaType, "Protocol": d.Protocol,
		"Model": d.Model, "SerialNumber": d.SerialNumber, "Manufacturer": s.fl.manufacturer,
		"IndicatorLED": d.led, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Links": map[string]any{"Volumes": vols},
	}
}

func (s *Server) volumeResource(v *Volume) map[string]any {
	var drives []any
	for _, id := range v.Drives {
		drives = append(drives, s.link(s.drivePath(id)))
	}
	vt := ""
	for k, rt := range legacyVolumeTypes {
		if rt == v.RAIDType {
			vt = k
		}
	}
	return map[string]any{
		"@odata.id": s.odata(s.volumePath(v.ID)), "@odata.type": "#Volume.v1_5_0.Volume",
		"Id": v.ID, "Name": v.Name, "RAIDType": v.RAIDType, "VolumeType": vt, "CapacityBytes": v.CapacityBytes,
		"Encrypted": false, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Identifiers": []any{map[string]any{"DurableNameFormat": "NAA", "DurableName": v.WWN}},
		"Links":       map[string]any{"Drives": drives},
	}
}

// createVolume validates a volume as a controller does and builds it (at
// once, or through a task for the iDRAC flavour).
func (s *Server) createVolume(body []byte) (answer, error) {
	var in struct {
		Name          string
		RAIDType      string
		VolumeType    string
		CapacityBytes *int64
		Links         struct {
			Drives []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return answer{}, errf(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON: %v", err)
	}
	rt := in.RAIDType
	if rt == "" {
		rt = legacyVolumeTypes[in.VolumeType]
	}
	if rt == "" {
		return answer{}, errf(http.StatusBadRequest, "PropertyMissing", "The property RAIDType is a required property and must be included in the request.")
	}
	if !slices.Contains(s.storage.raidTypes, rt) {
		return answer{}, errf(http.StatusBadRequest, "PropertyValueNotInList", "The value %s for the property RAIDType is not in the list of acceptable values (%s).", rt, strings.Join(s.storage.raidTypes, ", "))
	}
	if len(in.Links.Drives) == 0 {
		return answer{}, errf(http.StatusBadRequest, "PropertyMissing", "The property Links/Drives is a required property and must be included in the request.")
	}
	var ids []string
	var smallest int64
	for _, l := range in.Links.Drives {
		id := l.ID[strings.LastIndex(strings.TrimRight(l.ID, "/"), "/")+1:]
		id = strings.TrimRight(id, "/")
		i := slices.IndexFunc(s.storage.drives, func(d *drive) bool { return d.ID == id })
		if i < 0 || slices.Contains(ids, id) {
			return answer{}, errf(http.StatusBadRequest, "PropertyValueNotInList", "The drive %s is not a drive of controller %s (or is listed twice).", l.ID, s.storage.id)
		}
		for _, v := range slices.Concat(s.storage.volumes, s.storage.building) {
			if slices.Contains(v.Drives, id) {
				return answer{}, errf(http.StatusConflict, "ResourceInUse", "The drive %s is already used by volume %s.", id, v.ID)
			}
		}
		ids = append(ids, id)
		if c := s.storage.drives[i].CapacityBytes; smallest == 0 || c < smallest {
			smallest = c
		}
	}
	rule := raidRules[rt]
	n := len(ids)
	if n < rule.min || (rule.exact > 0 && n != rule.exact) || (rule.even && n%2 != 0) {
		return answer{}, errf(http.StatusBadRequest, "ActionParameterValueError", "%s cannot be built from %d drives.", rt, n)
	}
	maxBytes := rule.capacity(n, smallest)
	size := maxBytes
	if in.CapacityBytes != nil {
		if *in.CapacityBytes <= 0 || *in.CapacityBytes > maxBytes {
			return answer{}, errf(http.StatusBadRequest, "PropertyValueOutOfRange", "CapacityBytes %d is out of range: %s on these %d drives holds at most %d bytes.", *in.CapacityBytes, rt, n, maxBytes)
		}
		size = *in.CapacityBytes
	}
	s.storage.nextVol++
	v := &Volume{ID: fmt.Sprintf("Volume%d", s.storage.nextVol), Name: in.Name, RAIDType: rt, CapacityBytes: size, Drives: ids,
		WWN: fmt.Sprintf("6%015X", s.storage.nextVol*0x1234567+0x5000)}
	if s.cfg.Flavour == IDRAC {
		v.ID = fmt.Sprintf("Disk.Virtual.%d:%s", s.storage.nextVol-1, s.storage.id)
	}
	if v.Name == "" {
		v.Name = v.ID
	}
	build := func() error {
		s.storage.building = slices.DeleteFunc(s.storage.building, func(x *Volume) bool { return x == v })
		s.storage.volumes = append(s.storage.volumes, v)
		return nil
	}
	if s.fl.volumeTask {
		// Dell builds volumes in a job; the drives are taken at once.
		s.storage.building = append(s.storage.building, v)
		t := s.newTask("Create volume "+v.ID, build)
		return s.taskAccepted(t), nil
	}
	_ = build()
	return answer{code: http.StatusCreated, body: s.volumeResource(v),
		header: map[string]string{"Location": s.odata(s.volumePath(v.ID))}}, nil
}

// Volumes returns copies of the controller's volumes.
func (s *Server) Volumes() []Volume {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Volume
	for _, v := range s.storage.volumes {
		c := *v
		c.Drives = slices.Clone(v.Drives)
		out = append(out, c)
	}
	return out
}

// StoragePath is the RAID controller's Storage resource.
func (s *Server) StoragePath() string { return s.storagePath() }

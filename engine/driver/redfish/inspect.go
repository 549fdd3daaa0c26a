package redfish

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
)

// Out-of-band inspection reads the resources itself, leniently: BMCs put
// strings where the schema wants numbers (sushy-tools' "TotalThreads": "2",
// which gofish's strict decoding refuses) and nulls where it wants
// objects, and an inspection must not fail over a field it does not need.

// num is a JSON number that may also arrive as a numeric string or null.
type num struct {
	v  float64
	ok bool
}

func (n *num) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(bytes.TrimSpace(b), `"`)
	if f, err := strconv.ParseFloat(string(b), 64); err == nil {
		n.v, n.ok = f, true
	}
	return nil // anything else: absent
}

type link struct {
	ID string `json:"@odata.id"`
}

type status struct {
	State  string
	Health string
}

type rfSystem struct {
	ID, Name, UUID, Model, Manufacturer, SerialNumber string
	MemorySummary                                     struct{ TotalSystemMemoryGiB num }
	ProcessorSummary                                  struct{ Count num }
	Boot                                              struct{ BootSourceOverrideMode string }
	Processors, EthernetInterfaces, SimpleStorage     link
	Storage                                           link
}

type rfProcessor struct {
	Model          string
	InstructionSet string
	TotalThreads   num
	TotalCores     num
	MaxSpeedMHz    num
	ProcessorType  string
}

type rfNIC struct {
	ID                  string `json:"Id"`
	MACAddress          string
	PermanentMACAddress string
	SpeedMbps           num
	Status              *status
}

type rfSimpleStorage struct {
	Devices []struct {
		Name          string
		CapacityBytes num
		Status        *status
	}
}

type rfStorage struct {
	ID      string `json:"Id"`
	Drives  []link
	Volumes link
}

type rfDrive struct {
	ID            string `json:"Id"`
	Name          string
	CapacityBytes num
	MediaType     string
	SerialNumber  string
	Model         string
	Manufacturer  string
}

// cpuArch is Ironic's PROCESSOR_INSTRUCTION_SET_MAP.
var cpuArch = map[string]string{
	"ARM-A32": "arm", "ARM-A64": "aarch64", "IA-64": "ia64", "MIPS32": "mips",
	"MIPS64": "mips64", "x86": "i686", "x86-64": "x86_64",
}

// minDiskBytes is the smallest disk Ironic counts for local_gb (4 GiB).
const minDiskBytes = 4 << 30

// members lists a collection's member paths.
func members(c *conn, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	var coll struct{ Members []link }
	if err := getJSON(c, path, &coll); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(coll.Members))
	for _, m := range coll.Members {
		if m.ID != "" {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// InspectHardware reads CPUs, memory, disks, NICs, vendor data and the
// boot mode from the node's Redfish resources, as Ironic's redfish inspect
// interface does, and sets memory_mb, local_gb and cpu_arch. It fails, as
// Ironic does, when no NIC has a valid MAC or when one of those properties
// cannot be found.
func (d *Driver) InspectHardware(ctx context.Context, n driver.Node) (*driver.Inspection, error) {
	o, err := d.begin(ctx, n)
	if err != nil {
		return nil, err
	}
	path := o.inf.systemID
	if path == "" {
		if path, err = o.onlySystem(); err != nil {
			return nil, err
		}
	}
	if _, err := o.system(); err != nil { // the clear "not found" message
		return nil, err
	}
	var sys rfSystem
	if err := getJSON(o.c, path, &sys); err != nil {
		return nil, opError(o.inf, err, "Redfish read of system %s failed", path)
	}
	inv := map[string]any{}
	props := map[string]any{}
	out := &driver.Inspection{Inventory: inv, Properties: props}

	if m := sys.MemorySummary.TotalSystemMemoryGiB; m.ok && m.v > 0 {
		mb := int64(m.v * 1024)
		props["memory_mb"] = mb
		inv["memory"] = map[string]any{"physical_mb": mb}
	}
	cpu, err := o.processors(sys.Processors.ID)
	if err != nil {
		return nil, err
	}
	inv["cpu"] = cpu
	if arch, _ := cpu["architecture"].(string); arch != "" {
		props["cpu_arch"] = arch
	}

	disks, localGB := o.disks(sys)
	props["local_gb"] = localGB
	if disks != nil {
		inv["disks"] = disks
	}

	ifaces, macs, err := o.nics(sys.EthernetInterfaces.ID)
	if err != nil {
		return nil, err
	}
	inv["interfaces"] = ifaces
	out.MACs = macs

	vendor := map[string]any{}
	for k, v := range map[string]string{"product_name": sys.Model, "serial_number": sys.SerialNumber,
		"manufacturer": sys.Manufacturer, "system_uuid": sys.UUID} {
		if v != "" {
			vendor[k] = v
		}
	}
	if len(vendor) > 0 {
		inv["system_vendor"] = vendor
	}
	switch sys.Boot.BootSourceOverrideMode {
	case "UEFI":
		out.BootMode = "uefi"
	case "Legacy":
		out.BootMode = "bios"
	}
	if out.BootMode != "" {
		inv["boot"] = map[string]any{"current_boot_mode": out.BootMode}
	}

	if len(macs) == 0 {
		return nil, fault.New(fault.Invalid, "Inventory for node %s is invalid: no valid network interfaces", o.inf.uuid)
	}
	var missing []string
	for _, k := range []string{"cpu_arch", "local_gb", "memory_mb"} {
		_, found := props[k]
		_, had := n.Properties[k]
		if !found && !had {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("Failed to discover the following properties: %s on node %s", strings.Join(missing, ", "), o.inf.uuid)
	}
	return out, nil
}

// processors is Ironic's _get_processor_info: the logical CPU count (sum
// of TotalThreads), and model, frequency and architecture of the first.
func (o *op) processors(path string) (map[string]any, error) {
	cpu := map[string]any{"count": 0, "architecture": ""}
	paths, err := members(o.c, path)
	if err != nil {
		return nil, opError(o.inf, err, "Redfish read of processors failed")
	}
	count := 0
	for i, p := range paths {
		var pr rfProcessor
		if err := getJSON(o.c, p, &pr); err != nil {
			return nil, opError(o.inf, err, "Redfish read of processor %s failed", p)
		}
		if pr.ProcessorType != "" && pr.ProcessorType != "CPU" {
			continue // GPUs, FPGAs and friends are not the node's CPUs
		}
		if pr.TotalThreads.ok {
			count += int(pr.TotalThreads.v)
		}
		if i == 0 || cpu["architecture"] == "" {
			if pr.Model != "" {
				cpu["model_name"] = pr.Model
			}
			if pr.MaxSpeedMHz.ok {
				cpu["frequency"] = int(pr.MaxSpeedMHz.v)
			}
			cpu["architecture"] = cpuArch[pr.InstructionSet]
		}
	}
	cpu["count"] = count
	return cpu, nil
}

// disks lists the drives (Storage, else SimpleStorage) and computes
// local_gb as Ironic's _detect_local_gb: the smallest volume of at least
// 4 GiB, else the smallest such drive; the smaller of that and the
// smallest such SimpleStorage device; in GiB, minus one. As in Ironic, a
// storage resource the BMC fails to serve (sushy-tools answers 500 for
// Storage on a domain without one) only leaves its sizes out.
func (o *op) disks(sys rfSystem) ([]any, int64) {
	var disks []any
	var driveSizes, volumeSizes, simpleSizes []int64
	skip := func(what string, err error) {
		o.d.log.DebugContext(o.c.ctx, "redfish: inspection skips "+what, "node", o.inf.uuid, "err", err)
	}
	storages, err := members(o.c, sys.Storage.ID)
	if err != nil {
		skip("storage", err)
	}
	for _, sp := range storages {
		var st rfStorage
		if err := getJSON(o.c, sp, &st); err != nil {
			skip(sp, err)
			continue
		}
		for _, dl := range st.Drives {
			var dr rfDrive
			if err := getJSON(o.c, dl.ID, &dr); err != nil {
				skip(dl.ID, err)
				continue
			}
			size := int64(dr.CapacityBytes.v)
			disks = append(disks, map[string]any{"name": dr.Name, "size": size})
			if dr.CapacityBytes.ok {
				driveSizes = append(driveSizes, size)
			}
		}
		vols, err := members(o.c, st.Volumes.ID)
		if err != nil {
			skip(st.Volumes.ID, err)
		}
		for _, vp := range vols {
			var v struct{ CapacityBytes num }
			if err := getJSON(o.c, vp, &v); err != nil {
				skip(vp, err)
				continue
			}
			if v.CapacityBytes.ok {
				volumeSizes = append(volumeSizes, int64(v.CapacityBytes.v))
			}
		}
	}
	simples, err := members(o.c, sys.SimpleStorage.ID)
	if err != nil {
		skip("simple storage", err)
	}
	useSimple := disks == nil
	for _, sp := range simples {
		var ss rfSimpleStorage
		if err := getJSON(o.c, sp, &ss); err != nil {
			skip(sp, err)
			continue
		}
		for _, dev := range ss.Devices {
			if !dev.CapacityBytes.ok {
				continue // an empty bay
			}
			size := int64(dev.CapacityBytes.v)
			simpleSizes = append(simpleSizes, size)
			if useSimple {
				disks = append(disks, map[string]any{"name": dev.Name, "size": size})
			}
		}
	}
	storage := smallestUsable(volumeSizes)
	if storage == 0 {
		storage = smallestUsable(driveSizes)
	}
	simple := smallestUsable(simpleSizes)
	size := max(storage, simple)
	if storage > 0 && simple > 0 {
		size = min(storage, simple)
	}
	if size == 0 {
		o.d.log.WarnContext(o.c.ctx, "redfish: no disk of 4 GiB or more found; local_gb is 0", "node", o.inf.uuid)
	}
	return disks, max(0, size/(1<<30)-1)
}

// smallestUsable is the smallest size of at least 4 GiB, or 0.
func smallestUsable(sizes []int64) int64 {
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	for _, s := range sizes {
		if s >= minDiskBytes {
			return s
		}
	}
	return 0
}

// nics lists the Ethernet interfaces with a valid MAC (Ironic's
// _get_interface_info), and their MACs for ports.
func (o *op) nics(path string) ([]any, []string, error) {
	paths, err := members(o.c, path)
	if err != nil {
		return nil, nil, opError(o.inf, err, "Redfish read of Ethernet interfaces failed")
	}
	ifaces := []any{}
	var macs []string
	for _, p := range paths {
		var nic rfNIC
		if err := getJSON(o.c, p, &nic); err != nil {
			return nil, nil, opError(o.inf, err, "Redfish read of Ethernet interface %s failed", p)
		}
		raw := nic.MACAddress
		if raw == "" {
			raw = nic.PermanentMACAddress
		}
		hw, err := net.ParseMAC(raw)
		if err != nil || len(hw) != 6 {
			o.d.log.WarnContext(o.c.ctx, "redfish: ignoring a NIC without a valid MAC", "node", o.inf.uuid, "nic", nic.ID, "mac", raw)
			continue
		}
		mac := hw.String()
		iface := map[string]any{"mac_address": mac, "name": nic.ID}
		if nic.SpeedMbps.ok {
			iface["speed_mbps"] = int(nic.SpeedMbps.v)
		}
		ifaces = append(ifaces, iface)
		if !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	return ifaces, macs, nil
}

package agentsim

import (
	"fmt"
	"strings"
	"sync"

	"castiron/ramdisk/protocol"
)

// Hardware is a simulated machine's hardware, what the real agent reads
// from sysfs, procfs and DMI.
type Hardware struct {
	Manufacturer, Product, Serial, SystemUUID string
	FirmwareVendor, FirmwareVersion           string
	CPUModel                                  string
	CPUs, Sockets                             int
	MemoryMiB                                 int64
	BootMode                                  string // "uefi" or "bios"
	Arch                                      string // "x86_64"
	NICs                                      []NIC
	Disks                                     []DiskSpec
	// BMCAddress is what the agent reads in-band from the BMC ("" : none).
	BMCAddress string
}

// NIC is one network interface.
type NIC struct {
	Name, MAC, Vendor, Product string
	SpeedMbps                  int
}

// DiskSpec is one block device.
type DiskSpec struct {
	Name, Model, Vendor, Serial, WWN string
	Size                             int64
	Rotational                       bool
}

// model is one kind of server the generator makes.
type model struct {
	manufacturer, product, fwVendor, fwVersion, cpu string
	cpus, sockets                                   int
	memGiB                                          int64
	nicVendor, nicProduct, nicDriver                string
	nicSpeed                                        int
	disks                                           []DiskSpec
}

// models are common edge and rack servers (public specifications).
var models = []model{
	{"Dell Inc.", "PowerEdge R650", "Dell Inc.", "1.10.2", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 64, 2, 256,
		"0x8086", "0x1593", "ice", 25000,
		[]DiskSpec{{Name: "/dev/sda", Model: "PERC H755 Front", Vendor: "DELL", Size: 479559942144}, {Name: "/dev/nvme0n1", Model: "Dell Ent NVMe P5600 MU U.2 1.6TB", Size: 1600321314816}}},
	{"HPE", "ProLiant DL360 Gen10 Plus", "HPE", "U46 v1.68", "Intel(R) Xeon(R) Silver 4314 CPU @ 2.40GHz", 32, 2, 128,
		"0x14e4", "0x16d7", "bnxt_en", 25000,
		[]DiskSpec{{Name: "/dev/sda", Model: "LOGICAL VOLUME", Vendor: "HPE", Size: 479559942144}, {Name: "/dev/sdb", Model: "MB002000GWFGH", Vendor: "HPE", Size: 2000398934016, Rotational: true}}},
	{"Supermicro", "SYS-1029P-WTR", "American Megatrends Inc.", "3.4", "Intel(R) Xeon(R) Silver 4210 CPU @ 2.20GHz", 40, 2, 192,
		"0x8086", "0x1572", "i40e", 10000,
		[]DiskSpec{{Name: "/dev/sda", Model: "SAMSUNG MZ7LH480HAHQ-00005", Vendor: "ATA", Size: 480103981056}}},
	{"Lenovo", "ThinkSystem SR630 V2", "Lenovo", "AFE120G-1.20", "Intel(R) Xeon(R) Gold 5318Y CPU @ 2.10GHz", 48, 2, 384,
		"0x15b3", "0x1017", "mlx5_core", 25000,
		[]DiskSpec{{Name: "/dev/nvme0n1", Model: "SAMSUNG MZQL2960HCJR-00A07", Size: 960197124096}, {Name: "/dev/nvme1n1", Model: "SAMSUNG MZQL2960HCJR-00A07", Size: 960197124096}}},
}

// NewHardware makes believable hardware for machine i of a rack, with
// the NICs' MACs given (the first is the one that network-boots).
func NewHardware(i int, macs []string) *Hardware {
	m := models[i%len(models)]
	h := &Hardware{
		Manufacturer: m.manufacturer, Product: m.product,
		Serial:         fmt.Sprintf("SIM%07d", i+1),
		SystemUUID:     fmt.Sprintf("5ca1ab1e-0000-4000-8000-%012x", i+1),
		FirmwareVendor: m.fwVendor, FirmwareVersion: m.fwVersion,
		CPUModel: m.cpu, CPUs: m.cpus, Sockets: m.sockets,
		MemoryMiB: m.memGiB << 10, BootMode: "uefi", Arch: "x86_64",
	}
	if i%len(models) == 2 {
		h.BootMode = "bios" // an older BIOS-mode machine in every rack
	}
	for j, mac := range macs {
		h.NICs = append(h.NICs, NIC{Name: fmt.Sprintf("eno%d", j+1), MAC: strings.ToLower(mac), Vendor: m.nicVendor, Product: m.nicProduct, SpeedMbps: m.nicSpeed})
	}
	for j, d := range m.disks {
		d.Serial = fmt.Sprintf("S%dX%06dD%d", i%10, i+1, j)
		d.WWN = fmt.Sprintf("0x5002538%09x", (i+1)*16+j)
		h.Disks = append(h.Disks, d)
	}
	return h
}

// Inventory is the hardware in Ironic's inventory format, as the real
// agent collects it (booted from bootMAC).
func (h *Hardware) Inventory(bootMAC string) *protocol.Inventory {
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	inv := &protocol.Inventory{
		CPU: protocol.CPU{ModelName: h.CPUModel, Frequency: "2000.000", Count: h.CPUs, Architecture: h.Arch,
			Flags: []string{"fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sse", "sse2", "ht", "lm", "vmx", "aes", "avx", "avx2"}, SocketCount: h.Sockets},
		Memory:       protocol.Memory{Total: h.MemoryMiB<<20 - 3<<30, PhysicalMB: h.MemoryMiB},
		SystemVendor: protocol.SystemVendor{ProductName: h.Product, SerialNumber: h.Serial, Manufacturer: h.Manufacturer, SystemUUID: h.SystemUUID, Firmware: protocol.Firmware{Vendor: h.FirmwareVendor, Version: h.FirmwareVersion, BuildDate: "03/15/2024"}},
		Boot:         protocol.Boot{CurrentBootMode: h.BootMode, PXEInterface: bootMAC},
		Hostname:     "castiron-ramdisk",
		BMCAddress:   str(h.BMCAddress),
	}
	for _, n := range h.NICs {
		speed := n.SpeedMbps
		inv.Interfaces = append(inv.Interfaces, protocol.Interface{Name: n.Name, MACAddress: n.MAC, HasCarrier: true,
			Vendor: str(n.Vendor), Product: str(n.Product), SpeedMbps: &speed})
	}
	for i, d := range h.Disks {
		hctl := fmt.Sprintf("%d:0:0:0", i)
		inv.Disks = append(inv.Disks, protocol.Disk{Name: d.Name, Model: d.Model, Size: d.Size, Rotational: d.Rotational,
			WWN: str(d.WWN), Serial: str(d.Serial), Vendor: str(d.Vendor), HCTL: &hctl,
			ByPath: str("/dev/disk/by-path/pci-0000:0" + fmt.Sprint(i+1) + ":00.0"), LogicalSectors: 512, PhysicalSectors: 4096})
	}
	return inv
}

// Disks are a machine's virtual disks: what the steps did to them.
type Disks struct {
	mu    sync.Mutex
	state map[string]*DiskState
}

// DiskState is one virtual disk's content.
type DiskState struct {
	// Erased: every byte zeroed (erase_devices); MetadataErased: partition
	// tables and signatures gone (erase_devices_metadata).
	Erased, MetadataErased bool
	// Image is the image written (its URL), "" when none; ImageBytes and
	// ImageChecksum what was downloaded.
	Image         string
	ImageBytes    int64
	ImageChecksum string
	ConfigDrive   int // bytes of the config drive written, 0 when none
}

// NewDisks are blank disks for h (as delivered: an old OS on them).
func NewDisks(h *Hardware) *Disks {
	d := &Disks{state: map[string]*DiskState{}}
	for _, s := range h.Disks {
		d.state[s.Name] = &DiskState{Image: "factory"}
	}
	return d
}

// Get returns a copy of a disk's state.
func (d *Disks) Get(name string) (DiskState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.state[name]
	if !ok {
		return DiskState{}, false
	}
	return *s, true
}

// Bootable reports whether some disk holds a written image (the machine
// boots its OS from disk).
func (d *Disks) Bootable() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.state {
		if s.Image != "" && !s.Erased && !s.MetadataErased {
			return true
		}
	}
	return false
}

func (d *Disks) update(name string, fn func(*DiskState)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.state[name]
	if !ok {
		return fmt.Errorf("%s: no such device", name)
	}
	fn(s)
	return nil
}

package driver

import (
	"context"
	"io"
)

// ReadSeekCloser is an image a driver may send more than once (a retried
// push).
type ReadSeekCloser interface {
	io.ReadSeekCloser
}

// PhysicalDisk is one drive behind a hardware RAID controller.
type PhysicalDisk struct {
	ID            string // the BMC's identity of the drive (Redfish Drive Id)
	Controller    string // the controller's identity (Redfish Storage Id)
	CapacityBytes int64
	MediaType     string // "SSD", "HDD" ("" when unknown)
	Protocol      string // "SAS", "SATA", "NVMe", …
	Model         string
	SerialNumber  string
}

// RAIDController is one hardware RAID controller.
type RAIDController struct {
	ID        string
	Name      string
	RAIDTypes []string // Redfish RAIDType values it supports ("RAID0", "RAID1", …)
	Disks     []PhysicalDisk
}

// LogicalDisk is a volume as Ironic's raid_config records it.
type LogicalDisk struct {
	ID           string `json:"id,omitempty"`
	Name         string `json:"name,omitempty"`
	Controller   string `json:"controller,omitempty"`
	SizeGB       int64  `json:"size_gb"`
	RAIDLevel    string `json:"raid_level"`
	IsRootVolume bool   `json:"is_root_volume,omitempty"`
}

// RAID builds and removes hardware RAID volumes through the BMC (Ironic's
// raid interface, hardware flavour).
type RAID interface {
	// RAIDControllers lists the controllers that can build volumes (those
	// with an empty list of RAID types are left out, as Ironic does) and
	// their drives. A BMC without storage is a fault.Invalid error.
	RAIDControllers(ctx context.Context, n Node) ([]RAIDController, error)
	// CreateRAIDConfiguration builds the logical disks of target (Ironic's
	// target_raid_config logical_disks) and waits for the BMC's tasks,
	// bounded by ctx. createRoot / createNonRoot select as Ironic's
	// create_root_volume / create_nonroot_volumes.
	CreateRAIDConfiguration(ctx context.Context, n Node, target []map[string]any, createRoot, createNonRoot bool) error
	// DeleteRAIDConfiguration deletes every volume of every RAID
	// controller and waits for the BMC's tasks, bounded by ctx.
	DeleteRAIDConfiguration(ctx context.Context, n Node) error
	// RAIDConfig reads the volumes as Ironic's raid_config records them.
	RAIDConfig(ctx context.Context, n Node) ([]LogicalDisk, error)
}

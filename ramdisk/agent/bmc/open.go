package bmc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/app"
	"github.com/bougou/go-ipmi/pkg/types"
)

// ErrNoDevice: the machine has no IPMI system interface (or its driver
// did not come up).
var ErrNoDevice = errors.New("no IPMI device")

// devicePaths are where ipmi_devintf's first device appears (the paths
// ironic-python-agent and ipmitool look at).
var devicePaths = []string{"ipmi0", "ipmi/0", "ipmidev/0"}

// Hardware says whether the firmware describes an IPMI system interface:
// SMBIOS type 38, or the ACPI device IPI0001 that ipmi_si binds to.
func Hardware(sysRoot string) bool {
	for _, p := range []string{"firmware/dmi/entries/38-0", "bus/acpi/devices/IPI0001:00", "bus/platform/devices/dmi-ipmi-si.0"} {
		if _, err := os.Stat(filepath.Join(sysRoot, p)); err == nil {
			return true
		}
	}
	return false
}

// WaitDevice waits (at most wait) for the IPMI character device under
// devRoot and returns its path; the driver creates it about a second after
// it binds.
func WaitDevice(ctx context.Context, devRoot string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		for _, p := range devicePaths {
			full := filepath.Join(devRoot, p)
			if fi, err := os.Stat(full); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				return full, nil
			}
		}
		if time.Now().After(deadline) {
			return "", ErrNoDevice
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Device is Conn over go-ipmi's open (system) interface.
type Device struct{ c *client.Client }

// OpenDevice connects to /dev/ipmi0 through go-ipmi's open interface.
// Close it when done.
func OpenDevice(ctx context.Context, timeout time.Duration) (*Device, error) {
	c, err := client.NewOpenClient()
	if err != nil {
		return nil, err
	}
	c = c.WithTimeout(timeout)
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("open IPMI system interface: %w", err)
	}
	return &Device{c: c}, nil
}

// Close releases the device.
func (d *Device) Close(ctx context.Context) error { return d.c.Close(ctx) }

func (d *Device) ChannelMedium(ctx context.Context, ch uint8) (uint8, error) {
	r, err := d.c.GetChannelInfo(ctx, ch)
	if err != nil {
		return 0, err
	}
	return uint8(r.ChannelMedium), nil
}

func (d *Device) LanParam(ctx context.Context, ch, param, set uint8) ([]byte, error) {
	r, err := d.c.GetLanConfigParam(ctx, ch, types.LanConfigParamSelector(param), set, 0)
	if err != nil {
		return nil, err
	}
	return r.ParamData, nil
}

func (d *Device) MaxUsers(ctx context.Context, ch uint8) (uint8, error) {
	r, err := d.c.GetUserAccess(ctx, ch, 1)
	if err != nil {
		return 0, err
	}
	return r.MaxUsersIDCount, nil
}

func (d *Device) UserName(ctx context.Context, id uint8) (string, error) {
	r, err := d.c.GetUsername(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Username, nil
}

func (d *Device) SetUserName(ctx context.Context, id uint8, name string) error {
	_, err := d.c.SetUsername(ctx, id, name)
	return err
}

func (d *Device) SetPassword(ctx context.Context, id uint8, password string) error {
	_, err := d.c.SetUserPassword(ctx, id, password, false)
	return err
}

func (d *Device) EnableUser(ctx context.Context, id uint8) error { return d.c.EnableUser(ctx, id) }

func (d *Device) SetAccess(ctx context.Context, ch, id, priv uint8) error {
	_, err := d.c.SetUserAccess(ctx, &app.SetUserAccessRequest{
		EnableChanging:      true,
		EnableLinkAuth:      true,
		EnableIPMIMessaging: true,
		ChannelNumber:       ch,
		UserID:              id,
		MaxPrivLevel:        priv,
	})
	return err
}

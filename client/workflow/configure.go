package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"castiron/client"
)

// ConfigureOptions are the defaults `castiron configure` sets.
type ConfigureOptions struct {
	BootMode      string         // uefi or bios: properties/capabilities boot_mode
	RootDevice    map[string]any // properties/root_device hints
	DeployKernel  string         // driver_info/deploy_kernel
	DeployRamdisk string         // driver_info/deploy_ramdisk
}

// ParseConfigure checks the flag values.
func ParseConfigure(bootMode, rootDevice, deployImage, kernel, ramdisk string) (ConfigureOptions, error) {
	o := ConfigureOptions{BootMode: bootMode, DeployKernel: kernel, DeployRamdisk: ramdisk}
	if bootMode != "" && bootMode != "uefi" && bootMode != "bios" {
		return o, fmt.Errorf("--boot-mode must be uefi or bios, not %q", bootMode)
	}
	if rootDevice != "" {
		if err := json.Unmarshal([]byte(rootDevice), &o.RootDevice); err != nil || o.RootDevice == nil {
			return o, fmt.Errorf(`--root-device must be a JSON object such as '{"size": 100}' or '{"serial": "S1"}'`)
		}
	}
	if deployImage != "" {
		// ironic-python-agent's own naming: PREFIX.kernel and PREFIX.initramfs
		if o.DeployKernel == "" {
			o.DeployKernel = deployImage + ".kernel"
		}
		if o.DeployRamdisk == "" {
			o.DeployRamdisk = deployImage + ".initramfs"
		}
	}
	if o.BootMode == "" && o.RootDevice == nil && o.DeployKernel == "" && o.DeployRamdisk == "" {
		return o, fmt.Errorf("nothing to configure: give --boot-mode, --root-device or --deploy-image (--deploy-kernel/--deploy-ramdisk)")
	}
	return o, nil
}

// Configure sets boot defaults on manageable nodes (seed 003: configure
// before providing); nodes in other states are refused up front.
func (r *Runner) Configure(ctx context.Context, nodes []*client.Node, o ConfigureOptions) ([]Result, error) {
	err := refuse(nodes, func(n *client.Node) string {
		if n.ProvisionState == "manageable" {
			return ""
		}
		return "only manageable nodes are configured"
	})
	if err != nil {
		return nil, err
	}
	return r.each(ctx, labelsOf(nodes), func(ctx context.Context, i int, t Task) Result {
		n := nodes[i]
		res := Result{Label: n.Label(), UUID: n.UUID, State: n.ProvisionState, Action: "configured"}
		var ops []client.PatchOp
		add := func(path string, v any) { ops = append(ops, client.PatchOp{Op: "add", Path: path, Value: v}) }
		if o.BootMode != "" {
			caps, _ := n.Properties["capabilities"].(string)
			add("/properties/capabilities", setCapability(caps, "boot_mode", o.BootMode))
		}
		if o.RootDevice != nil {
			add("/properties/root_device", o.RootDevice)
		}
		if o.DeployKernel != "" {
			add("/driver_info/deploy_kernel", o.DeployKernel)
		}
		if o.DeployRamdisk != "" {
			add("/driver_info/deploy_ramdisk", o.DeployRamdisk)
		}
		t.State("updating")
		if _, err := r.Client.PatchNode(ctx, n.UUID, ops); err != nil {
			res.LastError = faultOf(err)
			return res
		}
		res.OK = true
		return res
	}), nil
}

// setCapability sets key:value in Ironic's "k1:v1,k2:v2" capabilities string.
func setCapability(caps, key, value string) string {
	var out []string
	done := false
	for _, part := range strings.Split(caps, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, _, _ := strings.Cut(part, ":")
		if strings.TrimSpace(k) == key {
			if !done {
				out = append(out, key+":"+value)
				done = true
			}
			continue
		}
		out = append(out, part)
	}
	if !done {
		out = append(out, key+":"+value)
	}
	return strings.Join(out, ",")
}

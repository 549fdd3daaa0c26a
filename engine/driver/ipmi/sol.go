package ipmi

import (
	"context"
	"fmt"
	"io"
	"time"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/transport"
	"github.com/bougou/go-ipmi/pkg/types"
)

// solInstance is the SOL payload instance; BMCs have one serial port for it.
const solInstance = 1

// solPoll is how often an idle session asks the BMC for new output (SOL has
// no push on an idle session). ipmitool polls the same way.
const solPoll = 50 * time.Millisecond

var _ driver.SerialConsole = (*Driver)(nil)

// ValidateSerial is Ironic's IPMIConsole.validate without the port range
// check (the conductor owns the range): valid driver_info, IPMI 2.0.
func (d *Driver) ValidateSerial(n driver.Node) (int, error) {
	inf, err := parseInfo(n)
	if err != nil {
		return 0, err
	}
	if inf.v15 {
		return 0, fault.New(fault.Invalid, "Serial over lan only works with IPMI protocol version 2.0. Check the 'ipmi_protocol_version' parameter in node's driver_info")
	}
	return portValue(n.DriverInfo, "ipmi_terminal_port", 0)
}

// OpenSerial opens an RMCP+ session and activates the SOL payload (type 1,
// instance 1), deactivating first an instance some other session left
// active, as Ironic's ipmitool console runs "sol deactivate" before
// "sol activate". go-ipmi does the payload work (Activate/Deactivate
// Payload, SOL packet sequence/ack/accepted counts, retransmits); castiron
// adds only the session choice and the error wording.
func (d *Driver) OpenSerial(ctx context.Context, n driver.Node) (driver.SerialLink, error) {
	if _, err := d.ValidateSerial(n); err != nil {
		return nil, err
	}
	inf, err := parseInfo(n)
	if err != nil {
		return nil, err
	}
	c, err := d.connect(ctx, inf)
	if err != nil {
		return nil, err
	}
	// A stale instance (ours before a crash, or another tool's) makes
	// Activate answer "already active"; the error of this one is moot.
	_, _ = c.DeactivatePayload(ctx, &transport.DeactivatePayloadRequest{
		PayloadType: types.PayloadTypeSOL, PayloadInstance: solInstance,
	})
	// Encrypted and authenticated as ipmitool asks for them on a session
	// that has them; go-ipmi seals SOL packets with the session's keys.
	_, err = c.ActivatePayload(ctx, &transport.ActivatePayloadRequest{
		PayloadType: types.PayloadTypeSOL, PayloadInstance: solInstance,
		EnableEncryption: inf.suite != 0, EnableAuthentication: inf.suite != 0,
	})
	if err != nil {
		l := &solLink{c: c, inf: inf}
		_ = l.closeSession(ctx)
		return nil, wrapBMC(ctx, inf, err, "IPMI Serial-over-LAN activation failed")
	}
	return &solLink{c: c, inf: inf}, nil
}

// solLink is one active SOL payload on its own session.
type solLink struct {
	c   *client.Client
	inf *info
}

// Run streams until ctx ends or the BMC stops answering. go-ipmi sends
// input one character per packet and retries unaccepted characters; its
// input reader goroutine ends when in does, so callers pass a pipe they
// close.
func (l *solLink) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	err := l.c.SOLStream(ctx, in, out, &client.SOLStreamOptions{PollInterval: solPoll})
	if err != nil && ctx.Err() == nil {
		return wrapBMC(ctx, l.inf, err, "IPMI Serial-over-LAN session ended")
	}
	return nil
}

// Close deactivates the payload and closes the session, on a context of its
// own so a cancelled console still frees the BMC's SOL instance.
func (l *solLink) Close(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, err := l.c.DeactivatePayload(cctx, &transport.DeactivatePayloadRequest{
		PayloadType: types.PayloadTypeSOL, PayloadInstance: solInstance,
	})
	if cerr := l.closeSession(cctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close SOL on node %s: %w", l.inf.uuid, err)
	}
	return nil
}

func (l *solLink) closeSession(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	return l.c.Close(cctx)
}

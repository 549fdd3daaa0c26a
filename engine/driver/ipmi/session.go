package ipmi

import (
	"context"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
)

// closeTimeout bounds Close Session. It runs on a context detached from the
// caller's, so a cancelled operation still frees the BMC's session slot
// (BMCs have only a handful).
const closeTimeout = 500 * time.Millisecond

// conn is one operation's session with a BMC. It connects lazily and can be
// dropped and reopened, so a long wait for a power state survives a BMC that
// forgets the session while the node changes state.
type conn struct {
	d   *Driver
	inf *info
	c   *client.Client
}

func (d *Driver) conn(inf *info) *conn { return &conn{d: d, inf: inf} }

// client returns the open session, opening one if needed.
func (s *conn) client(ctx context.Context) (*client.Client, error) {
	if s.c != nil {
		return s.c, nil
	}
	c, err := s.d.connect(ctx, s.inf)
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// drop closes the session; the next client call opens a new one.
func (s *conn) drop(ctx context.Context) {
	if s.c == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	// A failed Close Session only leaves a slot the BMC times out itself.
	_ = s.c.Close(cctx)
	s.c = nil
}

// session runs fn on one session and always closes it.
func (d *Driver) session(ctx context.Context, inf *info, fn func(s *conn) error) error {
	s := d.conn(inf)
	defer s.drop(ctx)
	return fn(s)
}

// connect opens an authenticated session: IPMI 1.5 if asked, otherwise RMCP+
// with the node's cipher suite (explicit, remembered, or probed: 17, then 3).
func (d *Driver) connect(ctx context.Context, inf *info) (*client.Client, error) {
	if inf.v15 {
		c, err := d.dial(ctx, inf, -1, d.cfg.Timeout, d.cfg.Retries)
		if err != nil {
			return nil, d.connectError(ctx, inf, err)
		}
		return c, nil
	}
	if inf.suite >= 0 {
		c, err := d.dial(ctx, inf, inf.suite, d.cfg.Timeout, d.cfg.Retries)
		if err != nil {
			return nil, d.connectError(ctx, inf, err)
		}
		return c, nil
	}
	key := suiteKey{uuid: inf.uuid, address: inf.address, port: inf.port}
	if suite, ok := d.suites.get(key); ok {
		c, err := d.dial(ctx, inf, suite, d.cfg.Timeout, d.cfg.Retries)
		if err == nil {
			return c, nil
		}
		if !suiteFailure(err) || isAuthFailure(err) || unreachable(ctx, err) {
			return nil, d.connectError(ctx, inf, err)
		}
		// The BMC no longer takes the suite it took before (firmware
		// update, settings change): forget it and probe again.
		d.suites.forget(key)
		d.log.InfoContext(ctx, "ipmi: remembered cipher suite refused, probing again",
			"node", inf.uuid, "bmc", inf.target(), "suite", suite, "error", oneLine(err))
	}
	return d.probe(ctx, inf, key)
}

// probe tries suite 17 (SHA-256, Ironic's preference) with short timeouts,
// then suite 3 (SHA-1, what ipmi_sim and many older BMCs speak), and
// remembers the first that works. It never sends Get Channel Cipher Suites:
// ipmi_sim does not answer it and ipmitool loses ~10 s there.
func (d *Driver) probe(ctx context.Context, inf *info, key suiteKey) (*client.Client, error) {
	c, err17 := d.dial(ctx, inf, int(types.CipherSuiteID17), d.cfg.ProbeTimeout, 1)
	if err17 == nil {
		d.suites.set(key, int(types.CipherSuiteID17))
		return c, nil
	}
	if isAuthFailure(err17) || unreachable(ctx, err17) {
		return nil, d.connectError(ctx, inf, err17)
	}
	c, err3 := d.dial(ctx, inf, int(types.CipherSuiteID3), d.cfg.Timeout, d.cfg.Retries)
	if err3 != nil {
		return nil, d.connectError(ctx, inf, err3)
	}
	d.suites.set(key, int(types.CipherSuiteID3))
	d.log.InfoContext(ctx, "ipmi: cipher suite 17 refused, using 3",
		"node", inf.uuid, "bmc", inf.target(), "error", oneLine(err17))
	return c, nil
}

// dial opens one session with one cipher suite (suite < 0: IPMI 1.5).
// timeout bounds each UDP exchange, retries re-sends after a timeout; ctx
// bounds everything.
func (d *Driver) dial(ctx context.Context, inf *info, suite int, timeout time.Duration, retries int) (*client.Client, error) {
	for try := 0; ; try++ {
		c, err := client.NewClient(inf.address, inf.port, inf.username, inf.password)
		if err != nil {
			return nil, err
		}
		c.WithTimeout(timeout).WithRetry(retries).WithMaxPrivilegeLevel(inf.priv)
		if suite < 0 {
			c.WithInterface(client.InterfaceLan)
		} else {
			c.WithCipherSuiteID(types.CipherSuiteID(suite))
		}
		err = c.Connect(ctx)
		if err == nil {
			return c, nil
		}
		closeSocket(c)
		if try > 0 || !shiftedAnswers(err) || ctxErr(ctx) != nil {
			return nil, err
		}
		// A fresh socket holds no late answer.
		d.log.DebugContext(ctx, "ipmi: session setup answers out of step, opening a new session",
			"node", inf.uuid, "bmc", inf.target(), "error", oneLine(err))
	}
}

// closeSocket frees the UDP socket of a client whose Connect failed. There is
// no session to close, so Close runs on a cancelled context: Close Session is
// not sent, the socket is closed.
func closeSocket(c *client.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Close(ctx)
}

// connectError classifies a failed Connect for the caller.
func (d *Driver) connectError(ctx context.Context, inf *info, err error) error {
	if isAuthFailure(err) {
		return authError(inf, err, "")
	}
	if inf.v15 && ctxErr(ctx) == nil && isActivateTimeout(err) {
		return authError(inf, err, " (IPMI 1.5 BMCs do not answer a wrong password)")
	}
	return wrapBMC(ctx, inf, err, "IPMI session setup failed")
}

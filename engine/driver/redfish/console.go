package redfish

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
	"golang.org/x/crypto/ssh"
)

// The redfish-ssh console interface: the host serial console a BMC offers
// over SSH, found through Redfish and reached with the node's Redfish
// credentials (golang.org/x/crypto/ssh). Where the BMC says so:
//
//  1. ComputerSystem.SerialConsole.SSH (Redfish 2020.4+, DMTF
//     ComputerSystem v1_13): ServiceEnabled, Port, and the
//     ConsoleEntryCommand to send when the SSH service is the BMC's CLI
//     (SharedWithManagerCLI);
//  2. otherwise the Manager's older SerialConsole (ServiceEnabled and "SSH"
//     in ConnectTypesSupported, as iDRAC 9 and iLO 5 show it), the port
//     from the Manager's NetworkProtocol SSH (22 without one), and the
//     vendor's well-known entry command: Dell "console com2", HPE "vsp".
//
// driver_info redfish_console_entry_command replaces the entry command
// ("" for none). With an entry command, castiron asks for a pty and sends
// it as an exec request; a BMC that refuses exec gets a shell and the
// command typed on it. Without one the session's shell is the console
// (OpenBMC's port 2200).
//
// Host keys: driver_info redfish_console_host_key, when set, is the only
// key accepted (an authorized_keys line, or its SHA256 fingerprint).
// Otherwise the first key seen is trusted and recorded in
// driver_internal_info redfish_console_host_key, and every later
// connection must show it (a BMC whose key changed needs the new key in
// driver_info).

// Driver-info and internal-info keys of the SSH console.
const (
	ConsoleHostKeyKey      = "redfish_console_host_key"
	consoleEntryCommandKey = "redfish_console_entry_command"
)

// SSHConsole is the driver's redfish-ssh serial console.
func (d *Driver) SSHConsole() driver.SerialConsole { return sshConsole{d} }

type sshConsole struct{ d *Driver }

// sshDialTimeout bounds the TCP connection and the SSH handshake.
const sshDialTimeout = 20 * time.Second

// ValidateSerial checks driver_info without touching the BMC. The console
// port comes from the conductor's range.
func (c sshConsole) ValidateSerial(n driver.Node) (int, error) {
	if _, err := parseInfo(n); err != nil {
		return 0, err
	}
	if v, ok := n.DriverInfo[ConsoleHostKeyKey]; ok && !driver.IsEmpty(v) {
		s, _ := v.(string)
		if _, err := parseHostKey(s); err != nil {
			return 0, fault.New(fault.Invalid, "Invalid value %q set in driver_info/%s on node %s: %v", driver.ScalarString(v), ConsoleHostKeyKey, n.UUID, err)
		}
	}
	if v, ok := n.DriverInfo[consoleEntryCommandKey]; ok && v != nil {
		if _, isStr := v.(string); !isStr {
			return 0, fault.New(fault.Invalid, "Invalid value set in driver_info/%s on node %s: it must be a string", consoleEntryCommandKey, n.UUID)
		}
	}
	return 0, nil
}

// sshTarget is where and how the BMC's SSH console is reached.
type sshTarget struct {
	port  int
	entry string
}

// target reads the BMC's SerialConsole resources.
func (o *op) sshTarget(sys *schemas.ComputerSystem, n driver.Node) (sshTarget, error) {
	t := sshTarget{}
	found := false
	if ssh := sys.SerialConsole.SSH; ssh.ServiceEnabled {
		found, t.port, t.entry = true, 22, ssh.ConsoleEntryCommand
		if ssh.Port != nil && *ssh.Port > 0 {
			t.port = int(*ssh.Port)
		}
	} else {
		managers, err := sys.ManagedBy()
		if err != nil {
			return t, opError(o.inf, err, "Redfish read of the managers of system %s failed", sys.ODataID)
		}
		for _, m := range managers {
			sc := m.SerialConsole
			if !sc.ServiceEnabled || !slices.Contains(sc.ConnectTypesSupported, schemas.SSHSerialConnectTypesSupported) {
				continue
			}
			found, t.port = true, 22
			if np, err := m.NetworkProtocol(); err == nil && np.SSH.Port != nil && *np.SSH.Port > 0 {
				t.port = int(*np.SSH.Port)
			}
			switch vendor := strings.ToLower(sys.Manufacturer); {
			case strings.Contains(vendor, "dell"):
				t.entry = "console com2"
			case strings.Contains(vendor, "hpe") || strings.HasPrefix(vendor, "hp"):
				t.entry = "vsp"
			}
			break
		}
	}
	if !found {
		return t, fault.New(fault.Invalid, "The BMC of node %s offers no serial console over SSH (no SerialConsole with SSH enabled in its Redfish ComputerSystem or Manager)", n.UUID)
	}
	if v, ok := n.DriverInfo[consoleEntryCommandKey].(string); ok {
		t.entry = v
	}
	return t, nil
}

// OpenSerial finds the BMC's SSH console and opens it: a BMC without one,
// a refused login, a host key that does not match, or a BMC that refuses
// the console end in an error.
func (c sshConsole) OpenSerial(ctx context.Context, n driver.Node) (driver.SerialLink, error) {
	o, sys, err := c.d.open(ctx, n)
	if err != nil {
		return nil, err
	}
	t, err := o.sshTarget(sys, n)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.inf.base) // parseInfo checked it
	addr := net.JoinHostPort(u.Hostname(), strconv.Itoa(t.port))
	hk, err := newHostKeys(n)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:            o.inf.username,
		Auth:            []ssh.AuthMethod{ssh.Password(o.inf.password), keyboardPassword(o.inf.password)},
		HostKeyCallback: hk.check,
		Timeout:         sshDialTimeout,
	}
	dctx, cancel := context.WithTimeout(ctx, sshDialTimeout)
	defer cancel()
	var dialer net.Dialer
	raw, err := dialer.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, &bmcError{msg: fmt.Sprintf("SSH console of the BMC at %s: %v", addr, err), causes: []error{err}}
	}
	// ctx and the dial timeout bound the handshake and the session's start
	// too: a BMC that stops answering closes the connection.
	stop := context.AfterFunc(dctx, func() { raw.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(raw, addr, cfg)
	if err != nil {
		stop()
		raw.Close()
		if hk.mismatch != nil {
			return nil, fault.New(fault.Invalid, "The SSH host key of the BMC's serial console at %s for node %s does not match: %v", addr, n.UUID, hk.mismatch)
		}
		return nil, &bmcError{msg: fmt.Sprintf("SSH login to the serial console of the BMC at %s as %q failed: %v", addr, o.inf.username, err), causes: []error{err}}
	}
	client := ssh.NewClient(cc, chans, reqs)
	link, err := startConsole(client, t)
	if !stop() && err == nil {
		err = dctx.Err() // the connection was closed under it
	}
	if err != nil {
		client.Close()
		return nil, &bmcError{msg: fmt.Sprintf("SSH serial console of the BMC at %s: %v", addr, err), causes: []error{err}}
	}
	if hk.learned != nil {
		link.learned = map[string]any{ConsoleHostKeyKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hk.learned)))}
	}
	return link, nil
}

// keyboardPassword answers keyboard-interactive prompts with the password
// (BMCs that offer no "password" method).
func keyboardPassword(pw string) ssh.AuthMethod {
	return ssh.KeyboardInteractive(func(_, _ string, qs []string, _ []bool) ([]string, error) {
		out := make([]string, len(qs))
		for i := range qs {
			out[i] = pw
		}
		return out, nil
	})
}

// startConsole opens the session: a pty, then the entry command as an exec
// request, or a shell (with the command typed when exec is refused).
func startConsole(client *ssh.Client, t sshTarget) (*sshLink, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return nil, err
	}
	sess.Stderr = io.Discard
	// The host does the echo; the BMC's pty only carries bytes.
	if err := sess.RequestPty("vt100", 24, 80, ssh.TerminalModes{ssh.ECHO: 0, ssh.TTY_OP_ISPEED: 115200, ssh.TTY_OP_OSPEED: 115200}); err != nil {
		return nil, fmt.Errorf("pty request refused: %w", err)
	}
	switch {
	case t.entry == "":
		err = sess.Shell()
	default:
		if err = sess.Start(t.entry); err != nil {
			if err = sess.Shell(); err == nil {
				_, err = io.WriteString(stdin, t.entry+"\r")
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("console session refused: %w", err)
	}
	return &sshLink{client: client, sess: sess, stdin: stdin, stdout: stdout}, nil
}

// hostKeys checks the BMC's host key against driver_info's, or the one
// recorded, or learns it.
type hostKeys struct {
	pinned   string        // driver_info: authorized_keys line or fingerprint
	known    ssh.PublicKey // driver_internal_info
	learned  ssh.PublicKey
	mismatch error
}

func newHostKeys(n driver.Node) (*hostKeys, error) {
	hk := &hostKeys{}
	if s, _ := n.DriverInfo[ConsoleHostKeyKey].(string); strings.TrimSpace(s) != "" {
		if _, err := parseHostKey(s); err != nil {
			return nil, fault.New(fault.Invalid, "Invalid value %q set in driver_info/%s on node %s: %v", s, ConsoleHostKeyKey, n.UUID, err)
		}
		hk.pinned = strings.TrimSpace(s)
		return hk, nil
	}
	if s, _ := n.InternalInfo[ConsoleHostKeyKey].(string); s != "" {
		if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s)); err == nil {
			hk.known = k
		}
	}
	return hk, nil
}

func (h *hostKeys) check(_ string, _ net.Addr, key ssh.PublicKey) error {
	switch {
	case h.pinned != "":
		if strings.HasPrefix(h.pinned, "SHA256:") {
			if subtle.ConstantTimeCompare([]byte(ssh.FingerprintSHA256(key)), []byte(h.pinned)) == 1 {
				return nil
			}
		} else if want, err := parseHostKey(h.pinned); err == nil && keysEqual(want, key) {
			return nil
		}
		h.mismatch = fmt.Errorf("the BMC shows %s, driver_info/%s wants %s", ssh.FingerprintSHA256(key), ConsoleHostKeyKey, fingerprintOf(h.pinned))
	case h.known != nil:
		if keysEqual(h.known, key) {
			return nil
		}
		h.mismatch = fmt.Errorf("the BMC shows %s, the key recorded at the first connection (driver_internal_info/%s) is %s; if the BMC's key changed, set the new one in driver_info/%s",
			ssh.FingerprintSHA256(key), ConsoleHostKeyKey, ssh.FingerprintSHA256(h.known), ConsoleHostKeyKey)
	default:
		h.learned = key // trust on first use; recorded by the conductor
		return nil
	}
	return h.mismatch
}

func keysEqual(a, b ssh.PublicKey) bool {
	return subtle.ConstantTimeCompare(a.Marshal(), b.Marshal()) == 1
}

func fingerprintOf(pinned string) string {
	if strings.HasPrefix(pinned, "SHA256:") {
		return pinned
	}
	if k, err := parseHostKey(pinned); err == nil {
		return ssh.FingerprintSHA256(k)
	}
	return pinned
}

// parseHostKey reads an authorized_keys line; a SHA256 fingerprint is
// accepted as is (nil key).
func parseHostKey(s string) (ssh.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "SHA256:") {
		if len(s) < len("SHA256:")+43 {
			return nil, errors.New("a SHA256 fingerprint has 43 base64 characters after \"SHA256:\"")
		}
		return nil, nil
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s))
	if err != nil {
		return nil, errors.New("want an authorized_keys line (\"ssh-ed25519 AAAA...\") or a fingerprint (\"SHA256:...\")")
	}
	return k, nil
}

// sshLink is one open SSH console session.
type sshLink struct {
	client  *ssh.Client
	sess    *ssh.Session
	stdin   io.WriteCloser
	stdout  io.Reader
	learned map[string]any
	once    sync.Once
}

// InternalInfoUpdates is the host key learned at this connection (trust on
// first use), for the conductor to record.
func (l *sshLink) InternalInfoUpdates() map[string]any { return l.learned }

// Run copies in to the console and the console to out until ctx ends, in
// ends, or the BMC ends the session. The copy from in is owned by the
// caller's in: it ends when in is closed (the console session does so
// once Run returns).
func (l *sshLink) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	outDone := make(chan error, 1)
	inDone := make(chan struct{})
	go func() {
		_, err := io.Copy(out, l.stdout)
		outDone <- err
	}()
	go func() {
		defer close(inDone)
		_, _ = io.Copy(l.stdin, in)
	}()
	select {
	case <-ctx.Done():
		l.shut()
		<-outDone
		return nil
	case <-inDone:
		l.shut()
		<-outDone
		return nil
	case err := <-outDone:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("the BMC ended the SSH console session")
		}
		return err
	}
}

func (l *sshLink) shut() {
	l.once.Do(func() {
		_ = l.sess.Close()
		_ = l.client.Close()
	})
}

// Close ends the session and the connection.
func (l *sshLink) Close(context.Context) error {
	l.shut()
	return nil
}

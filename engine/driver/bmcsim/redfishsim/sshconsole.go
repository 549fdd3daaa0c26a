package redfishsim

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The host serial console over SSH, as BMCs offer it (ServeSSH). What a
// client does after the SSH login depends on the flavour, as on the real
// BMCs:
//
//   - Generic (OpenBMC's obmc-console on port 2200): the session is the host
//     console at once (a shell request, or an exec request of any command).
//   - IDRAC: the session is the BMC's CLI ("racadm>>"); the command
//     "console com2" (typed, or as an exec request) enters the host console.
//   - ILO: the CLI is "</>hpiLO->"; "vsp" enters the host console.
//
// The Redfish resources say so (DMTF ComputerSystem.v1_13
// SerialConsole.SSH: ServiceEnabled, Port, SharedWithManagerCLI,
// ConsoleEntryCommand, HotKeySequenceDisplay), and the Manager carries the
// older, deprecated SerialConsole (ServiceEnabled, MaxConcurrentSessions,
// ConnectTypesSupported ["SSH"]) and its NetworkProtocol the SSH port, for
// clients that read those. The host console is the Machine's serial port
// (SerialMachine: the qemu VM's), or, in state-only mode, a simulated one
// that prints a boot log and echoes what is typed. One console session at
// a time (MaxConcurrentSessions 1): a second is refused with a message. The
// exit hot keys are shown, not emulated: the console ends when the client
// closes the session.

// SerialMachine is a Machine with a serial port a console can reach.
type SerialMachine interface {
	// DialSerial connects to the running machine's serial port; an error
	// when it is off. Closing the connection leaves the machine alone.
	DialSerial(ctx context.Context) (net.Conn, error)
}

// consoleCLI is how a flavour's SSH session reaches the host console.
type consoleCLI struct {
	entry  string // command that enters the host console ("": none, direct)
	prompt string
	banner string // printed when the host console starts
	hotKey string // HotKeySequenceDisplay
}

var consoleCLIs = map[Flavour]consoleCLI{
	Generic: {hotKey: "Press ~. to exit console"},
	IDRAC: {entry: "console com2", prompt: "racadm>>",
		banner: "Connected to serial device com2. To end type: ^\\\r\n", hotKey: "Press ^\\ to exit console"},
	ILO: {entry: "vsp", prompt: "</>hpiLO-> ",
		banner: "Virtual Serial Port Active: IO=0x02F8 INT=3\r\nStarting virtual serial port.\r\nPress 'ESC (' to return to the CLI Session.\r\n",
		hotKey: "Press 'ESC (' to return to the CLI Session"},
}

// sshState is the SSH console service (guarded by Server.mu).
type sshState struct {
	ln      net.Listener
	port    int
	key     ssh.Signer
	busy    bool // a host console session is running
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	started bool
}

// ServeSSH serves the host serial console over SSH on ln until ctx ends or
// Close; the Redfish resources advertise it (with ln's port) while it
// runs. The host key is a new Ed25519 key (SSHHostKey).
func (s *Server) ServeSSH(ctx context.Context, ln net.Listener) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	cfg := &ssh.ServerConfig{
		PasswordCallback: func(c ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			okUser := subtle.ConstantTimeCompare([]byte(c.User()), []byte(s.cfg.User)) == 1
			want := s.cfg.Password
			if s.cfg.SSHPassword != "" {
				want = s.cfg.SSHPassword
			}
			okPass := subtle.ConstantTimeCompare(pw, []byte(want)) == 1
			if okUser && okPass {
				return nil, nil
			}
			s.mu.Lock()
			s.stats.AuthFailures++
			s.mu.Unlock()
			return nil, errors.New("permission denied")
		},
		ServerVersion: "SSH-2.0-redfishsim",
	}
	cfg.AddHostKey(signer)
	s.mu.Lock()
	if s.ssh.started {
		s.mu.Unlock()
		return errors.New("redfishsim: ServeSSH already running")
	}
	s.ssh = sshState{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, key: signer,
		conns: map[net.Conn]struct{}{}, started: true}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, s.closeSSH)
	defer stop()
	defer func() { // the connections end, then the service is no longer advertised
		s.ssh.wg.Wait()
		s.mu.Lock()
		s.ssh.port, s.ssh.ln, s.ssh.started = 0, nil, false
		s.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.mu.Lock()
		s.ssh.conns[c] = struct{}{}
		s.ssh.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.ssh.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.ssh.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serveSSHConn(c, cfg)
		}()
	}
}

// SSHPort is the SSH console's port (0: ServeSSH not running).
func (s *Server) SSHPort() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ssh.port
}

// SSHHostKey is the SSH console's host key (nil: ServeSSH not running).
func (s *Server) SSHHostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ssh.key == nil {
		return nil
	}
	return s.ssh.key.PublicKey()
}

// closeSSH stops the SSH listener and every connection (ServeSSH returns).
func (s *Server) closeSSH() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ssh.ln != nil {
		s.ssh.ln.Close()
	}
	for c := range s.ssh.conns {
		c.Close()
	}
}

func (s *Server) serveSSHConn(c net.Conn, cfg *ssh.ServerConfig) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		s.cfg.Logger.Debug("redfishsim: ssh handshake", "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer sc.Close()
	go ssh.DiscardRequests(reqs) // ends with the connection
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.sshSession(ch, creqs)
		}()
	}
}

// sshSession answers a session's requests; a shell or exec request starts
// what the flavour does (the CLI, or the host console).
func (s *Server) sshSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	cli := consoleCLIs[s.cfg.Flavour]
	var run sync.WaitGroup
	defer run.Wait()
	done := make(chan struct{})
	started := false
	start := func(f func() uint32) {
		started = true
		run.Add(1)
		go func() {
			defer run.Done()
			status := f()
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
			ch.Close()
			close(done)
		}()
	}
	for {
		var req *ssh.Request
		var ok bool
		select {
		case req, ok = <-reqs:
		case <-done:
			return
		}
		if !ok {
			return
		}
		switch {
		case req.Type == "pty-req" || req.Type == "env" || req.Type == "window-change":
			_ = req.Reply(true, nil)
		case req.Type == "shell" && !started:
			_ = req.Reply(true, nil)
			if cli.entry == "" {
				start(func() uint32 { return s.hostConsole(ch, cli) })
			} else {
				start(func() uint32 { return s.consoleCLI(ch, cli) })
			}
		case req.Type == "exec" && !started:
			var cmd struct{ Command string }
			if s.cfg.SSHNoExec || ssh.Unmarshal(req.Payload, &cmd) != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			start(func() uint32 {
				if cli.entry == "" || strings.TrimSpace(cmd.Command) == cli.entry {
					return s.hostConsole(ch, cli)
				}
				fmt.Fprintf(ch, "ERROR: Invalid command: %s\r\n", cmd.Command)
				return 1
			})
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// consoleCLI is the BMC's command line (iDRAC, iLO): it echoes what is
// typed, as a terminal line does, and enters the host console on the
// flavour's entry command.
func (s *Server) consoleCLI(ch ssh.Channel, cli consoleCLI) uint32 {
	r := bufio.NewReader(ch)
	for {
		fmt.Fprintf(ch, "\r\n%s", cli.prompt)
		var line []byte
		for {
			b, err := r.ReadByte()
			if err != nil {
				return 0
			}
			if b == '\r' || b == '\n' {
				_, _ = io.WriteString(ch, "\r\n")
				break
			}
			line = append(line, b)
			_, _ = ch.Write([]byte{b})
		}
		switch cmd := strings.TrimSpace(string(line)); cmd {
		case "":
		case cli.entry:
			return s.hostConsole(readerChannel{ch, r}, cli)
		case "exit", "quit":
			return 0
		default:
			fmt.Fprintf(ch, "ERROR: Invalid command: %s\r\n", cmd)
		}
	}
}

// readerChannel is a channel whose reads go through a reader that may hold
// bytes already typed.
type readerChannel struct {
	ssh.Channel
	r *bufio.Reader
}

func (c readerChannel) Read(p []byte) (int, error) { return c.r.Read(p) }

// hostConsole bridges the session to the host's serial port until the
// client leaves (or the BMC stops). One at a time.
func (s *Server) hostConsole(ch io.ReadWriter, cli consoleCLI) uint32 {
	s.mu.Lock()
	if s.ssh.busy {
		s.mu.Unlock()
		_, _ = io.WriteString(ch, "The serial console is in use by another session.\r\n")
		return 1
	}
	s.ssh.busy = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.ssh.busy = false
		s.mu.Unlock()
	}()
	_, _ = io.WriteString(ch, cli.banner)
	if m, ok := s.cfg.Machine.(SerialMachine); ok {
		s.machineConsole(ch, m)
	} else {
		s.simulatedConsole(ch)
	}
	return 0
}

// machineConsole copies between the session and the machine's serial port;
// while the machine is off, or between its restarts, it waits and
// connects again, so the session outlives power cycles as on a BMC.
func (s *Server) machineConsole(ch io.ReadWriter, m SerialMachine) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var cur net.Conn
	inDone := make(chan struct{})
	go func() { // session -> serial port; ends the console when the client goes
		defer close(inDone)
		defer cancel()
		buf := make([]byte, 1024)
		for {
			n, err := ch.Read(buf)
			if n > 0 {
				mu.Lock()
				c := cur
				mu.Unlock()
				if c != nil { // typed while the machine is off: lost, as on a BMC
					_, _ = c.Write(buf[:n])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { <-inDone }()
	for ctx.Err() == nil {
		c, err := m.DialSerial(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		mu.Lock()
		cur = c
		mu.Unlock()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = io.Copy(ch, c) // until the machine stops or the client goes
		stop()
		mu.Lock()
		cur = nil
		mu.Unlock()
		c.Close()
	}
}

// simulatedConsole is a state-only BMC's host console: a boot log when the
// system is on, then what is typed echoed back (CR as CR LF), as a login
// prompt on a serial line does.
func (s *Server) simulatedConsole(ch io.ReadWriter) {
	s.mu.Lock()
	on := s.powerState() == "On"
	boot := s.sys.lastBoot
	s.mu.Unlock()
	if on {
		fmt.Fprintf(ch, "%s %s\r\nBIOS %s\r\nBooting (%s, target %s)...\r\nsimulated login: ",
			s.fl.manufacturer, s.fl.model, s.componentVersion(true), boot.Mode, boot.Target)
	}
	buf := make([]byte, 1024)
	for {
		n, err := ch.Read(buf)
		if n > 0 {
			out := strings.ReplaceAll(string(buf[:n]), "\r", "\r\n")
			if _, werr := io.WriteString(ch, out); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hostSerialConsole is ComputerSystem.SerialConsole (v1_13) while the SSH
// console is served.
func (s *Server) hostSerialConsole() map[string]any {
	if s.ssh.port == 0 || s.cfg.SSHConsoleManagerOnly {
		return nil
	}
	cli := consoleCLIs[s.cfg.Flavour]
	sshp := map[string]any{"ServiceEnabled": true, "Port": s.ssh.port,
		"SharedWithManagerCLI": cli.entry != "", "HotKeySequenceDisplay": cli.hotKey}
	if cli.entry != "" {
		sshp["ConsoleEntryCommand"] = cli.entry
	}
	return map[string]any{"MaxConcurrentSessions": 1, "SSH": sshp,
		"IPMI": map[string]any{"ServiceEnabled": false}, "Telnet": map[string]any{"ServiceEnabled": false}}
}

// managerSerialConsole is the Manager's (deprecated) SerialConsole.
func (s *Server) managerSerialConsole() map[string]any {
	if s.ssh.port == 0 {
		return nil
	}
	return map[string]any{"ServiceEnabled": true, "MaxConcurrentSessions": 1, "ConnectTypesSupported": []string{"SSH"}}
}

// networkProtocol is the Manager's NetworkProtocol: HTTP(S) and, while it
// is served, the SSH console's port.
func (s *Server) networkProtocol() map[string]any {
	p := s.ManagerPath() + "/NetworkProtocol"
	np := map[string]any{"@odata.id": s.odata(p), "@odata.type": "#ManagerNetworkProtocol.v1_5_0.ManagerNetworkProtocol",
		"Id": "NetworkProtocol", "Name": "Manager Network Protocol",
		"HTTPS": map[string]any{"ProtocolEnabled": true, "Port": 443},
		"SSH":   map[string]any{"ProtocolEnabled": s.ssh.port != 0}}
	if s.ssh.port != 0 {
		np["SSH"].(map[string]any)["Port"] = s.ssh.port
	}
	return np
}

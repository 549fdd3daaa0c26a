package dhcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/ipv4"
)

const (
	// batchSize is the most packets one read (recvmmsg) takes off the socket.
	batchSize = 64
	// When the socket is busy (the last read took several packets, or came
	// less than coalesce after the one before) the next read waits until
	// coalesce has passed since the last (unless it filled the batch), so
	// the packets arriving meanwhile make one round (one wake-up, one read,
	// one commit) instead of one each. Waking for every packet
	// cost more than the packet: on a busy CPU each wake-up waits for a
	// time slice, Go's runtime polls at 20 µs while it sees short bursts of
	// work, and a commit costs about the same for 1 lease as for 20. Per
	// DORA at 3,000-4,000/s (loaded machine, alternating runs): 1 ms 108-146
	// µs, 2 ms 104-137, 4 ms 102-112 (Kea 119-130). A lone packet on an
	// idle server is answered at once; DHCP clients wait seconds before
	// they retransmit.
	coalesce = 4 * time.Millisecond
)

// batchLoop is one DHCPv4 packet loop on a socket. Each round it reads what
// is queued (up to batchSize packets, one recvmmsg), decides each packet
// and sends the answers that need nothing more (OFFERs, NAKs) as it goes,
// makes the round's new leases durable in one commit and only then sends
// their ACKs. No goroutine hand-off per packet, so on a busy CPU the
// scheduler has little to switch between. The loops of a socket take turns
// at reading (reader): one reads and decides while another commits.
//
// Answers go out one by one as they are ready, not in one sendmmsg per
// round: a round's answers at once overflowed the receive queue of the
// relay they go to (perfdhcp's, 208 KiB, on a busy machine: 0.5-27 % of
// the answers lost in alternating runs at 4,500/s, none with Kea's or
// castiron's one-by-one sends), for no measurable CPU saving.
type batchLoop struct {
	s    *Server
	rd   *reader
	port int
	in   []ipv4.Message
	acks []pendingAck
	ls   []Lease
	wire []byte // an answer in wire format, reused for the next
}

// reader is a socket shared by packet loops, read by one at a time so
// that coalescing holds whichever loop reads.
type reader struct {
	conn *net.UDPConn
	pc   *ipv4.PacketConn // conn, for recvmmsg
	mu   sync.Mutex
	last time.Time // when the last read returned
	busy bool      // the last read was part of a burst
	full bool      // the last read took batchSize packets: more are queued
}

// pendingAck is a REQUEST whose ACK waits for the round's commit.
type pendingAck struct {
	ctx   context.Context
	peer  netip.AddrPort
	later *ackLater
}

func (s *Server) newBatchLoop(rd *reader, port int) *batchLoop {
	b := &batchLoop{s: s, rd: rd, port: port, in: make([]ipv4.Message, batchSize)}
	for i := range b.in {
		b.in[i].Buffers = [][]byte{make([]byte, 4096)}
		b.in[i].OOB = make([]byte, oobSpace)
	}
	return b
}

// run serves until the socket is closed or its read deadline passes after
// ctx ended; the round being served is finished first (its leases
// committed, its ACKs sent).
func (b *batchLoop) run(ctx context.Context) {
	for {
		n, err := b.read(ctx)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			b.s.log.Warn("dhcp: read", "err", err)
			time.Sleep(10 * time.Millisecond) // don't spin on a persistent error
			continue
		}
		if n > 0 {
			b.commit(ctx)
		}
	}
}

// read takes the reader's turn: it waits out the coalescing window when
// the socket is busy, reads a batch, decides it and sends the answers
// that need no commit. It returns how many ACKs wait for one.
func (b *batchLoop) read(ctx context.Context) (int, error) {
	rd := b.rd
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.busy && !rd.full && ctx.Err() == nil {
		if d := coalesce - time.Since(rd.last); d > 0 {
			time.Sleep(d)
		}
	}
	n, err := rd.pc.ReadBatch(b.in, 0)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	rd.busy = n > 1 || now.Sub(rd.last) < coalesce
	rd.full = n == len(b.in)
	rd.last = now
	b.decide(ctx, b.in[:n])
	return len(b.acks), nil
}

// decide answers the packets of one read, but for the ACKs, which wait
// for commit.
func (b *batchLoop) decide(ctx context.Context, msgs []ipv4.Message) {
	s := b.s
	for i := range msgs {
		m := &msgs[i]
		at := receivedAt(m.OOB[:m.NN])
		if !at.IsZero() && time.Since(at) > maxQueueWait {
			s.cfg.Meter.DHCPPacket("stale", "none")
			continue
		}
		b.take(ctx, at, m.Buffers[0][:m.N], addrPortOf(m.Addr))
	}
}

// commit makes the round's leases durable, then sends their ACKs.
func (b *batchLoop) commit(ctx context.Context) {
	s := b.s
	// The leases of the round in one transaction; it completes even when
	// ctx ends meanwhile (shutdown), so that its ACKs still go out.
	b.ls = b.ls[:0]
	for _, a := range b.acks {
		b.ls = append(b.ls, a.later.lease)
	}
	errs, err := s.store.PutLeases(context.WithoutCancel(ctx), b.ls)
	for i, a := range b.acks {
		werr := err
		if err == nil {
			werr = errs[i]
		}
		b.finish(a, werr)
	}
	clear(b.acks)
	b.acks = b.acks[:0]
}

// take decides one packet, which the kernel received at (zero: unknown):
// its answer is sent, or, for an ACK, held until the round's commit.
func (b *batchLoop) take(ctx context.Context, at time.Time, pkt []byte, peer netip.AddrPort) {
	s := b.s
	defer s.survive(peer)
	ctx = arrived(ctx, s.rec, at)
	req, err := dhcpv4.FromBytes(pkt) // copies: pkt's buffer is reused
	if err != nil {
		s.cfg.Meter.DHCPPacket("malformed", "none")
		s.log.Debug("dhcp: malformed packet", "peer", peer, "err", err)
		return
	}
	resp, later, err := s.decide(ctx, req, b.port)
	if later != nil {
		b.acks = append(b.acks, pendingAck{ctx: ctx, peer: peer, later: later})
		return
	}
	b.answer(req, resp, err, peer)
}

// finish sends the answer to a REQUEST whose lease write ended with werr.
func (b *batchLoop) finish(a pendingAck, werr error) {
	defer b.s.survive(a.peer)
	resp, err := b.s.finish(a.ctx, a.later, werr)
	b.answer(a.later.req, resp, err, a.peer)
}

// answer counts one handled packet and sends its answer, if any.
func (b *batchLoop) answer(req, resp *dhcpv4.DHCPv4, err error, peer netip.AddrPort) {
	s := b.s
	s.count(req, resp, err)
	if err != nil {
		s.log.Warn("dhcp: request not served", "mac", req.ClientHWAddr.String(), "err", err)
		return
	}
	if resp == nil {
		return
	}
	dst := destination(req, resp, peer, b.port)
	b.wire = appendPacket(b.wire[:0], resp)
	if _, err := b.rd.conn.WriteToUDPAddrPort(b.wire, dst); err != nil {
		s.log.Warn("dhcp: send", "to", dst, "mac", req.ClientHWAddr.String(), "err", err)
	}
}

// addrPortOf is a received packet's source address.
func addrPortOf(a net.Addr) netip.AddrPort {
	if u, ok := a.(*net.UDPAddr); ok {
		ap := u.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

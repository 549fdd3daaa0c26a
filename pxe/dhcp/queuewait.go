package dhcp

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// maxQueueWait is how long a request may have waited in the socket's
// receive queue and still be answered. A server that fell behind (a boot
// storm, or a moment without CPU) and answers its backlog in order answers
// only requests whose clients gave up or retransmitted meanwhile, so
// everyone waits longer and it may never catch up. Skipping what waited
// longer than this costs one read, and the queue drains at once; the
// client asks again (PXE firmware after 4 s, perfdhcp counts an answer
// later than 1 s as lost).
const maxQueueWait = time.Second

// oobSpace holds the receive timestamp (SO_TIMESTAMPNS) of one packet.
var oobSpace = unix.CmsgSpace(16)

// receivedAt is the kernel's receive time of a packet from its control
// messages; zero when there is none.
func receivedAt(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SO_TIMESTAMPNS {
			continue
		}
		switch len(m.Data) { // struct timespec: two longs
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:])))
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(m.Data))), int64(int32(binary.NativeEndian.Uint32(m.Data[4:]))))
		}
	}
	return time.Time{}
}

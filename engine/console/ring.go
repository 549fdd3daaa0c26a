package console

// ring keeps the last len(buf) bytes written: the scrollback a new viewer
// sees. Not safe for concurrent use (the session's lock guards it).
type ring struct {
	buf  []byte
	pos  int // next write position
	full bool
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

func (r *ring) write(p []byte) {
	size := len(r.buf)
	if size == 0 || len(p) == 0 {
		return
	}
	if len(p) >= size {
		copy(r.buf, p[len(p)-size:])
		r.pos, r.full = 0, true
		return
	}
	n := copy(r.buf[r.pos:], p)
	copy(r.buf, p[n:])
	if r.pos+len(p) >= size {
		r.full = true
	}
	r.pos = (r.pos + len(p)) % size
}

// bytes is a copy of the kept bytes, oldest first.
func (r *ring) bytes() []byte {
	if !r.full {
		return append([]byte(nil), r.buf[:r.pos]...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.pos:]...)
	return append(out, r.buf[:r.pos]...)
}

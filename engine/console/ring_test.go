package console

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRingKeepsTail compares the ring with the tail of everything written,
// over random write sizes around the capacity.
func TestRingKeepsTail(t *testing.T) {
	for _, size := range []int{1, 7, 64} {
		r := newRing(size)
		var all []byte
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for i := range 500 {
			p := make([]byte, rng.IntN(size*2+2))
			for j := range p {
				p[j] = byte(i + j)
			}
			r.write(p)
			all = append(all, p...)
			want := all
			if len(want) > size {
				want = want[len(want)-size:]
			}
			if got := r.bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d after %d writes: got %v want %v", size, i, got, want)
			}
		}
	}
}

package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

// batchStore records PutLeases batches; MACs ending in ":ff" conflict, and
// a lease with NodeUUID "boom" fails its whole batch.
type batchStore struct {
	mu      sync.Mutex
	batches []int
}

func (b *batchStore) ListLeases(context.Context) ([]Lease, error) { return nil, nil }
func (b *batchStore) DeleteLease(context.Context, string) error   { return nil }
func (b *batchStore) PutLeases(_ context.Context, ls []Lease) ([]error, error) {
	b.mu.Lock()
	b.batches = append(b.batches, len(ls))
	b.mu.Unlock()
	errs := make([]error, len(ls))
	for i, l := range ls {
		if l.NodeUUID == "boom" {
			return nil, errors.New("disk on fire")
		}
		if l.MAC[len(l.MAC)-2:] == "ff" {
			errs[i] = errors.New("conflict")
		}
	}
	return errs, nil
}

// TestLeaseWriterBatches: concurrent writes share batches and each caller
// gets its own outcome.
func TestLeaseWriterBatches(t *testing.T) {
	st := &batchStore{}
	w := &leaseWriter{store: st}
	ctx := context.Background()
	const n = 300
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := fmt.Sprintf("52:54:00:c9:%02x:%02x", i>>8, i&0xff)
			errs[i] = w.put(ctx, Lease{MAC: mac, IP: netip.MustParseAddr("10.201.0.1")})
		}()
	}
	wg.Wait()
	w.wait()
	for i, err := range errs {
		if conflict := i&0xff == 0xff; (err != nil) != conflict {
			t.Errorf("lease %d: %v", i, err)
		}
	}
	total := 0
	for _, b := range st.batches {
		total += b
	}
	if total != n || len(st.batches) >= n {
		t.Fatalf("%d leases in %d batches", total, len(st.batches))
	}
	t.Logf("%d leases in %d batches", n, len(st.batches))

	// A failing transaction fails every lease in it.
	done := make(chan error, 2)
	w.enqueue(ctx, Lease{MAC: "52:54:00:c9:01:01", NodeUUID: "boom"}, func(err error) { done <- err })
	if err := <-done; err == nil {
		t.Fatal("a failed transaction reported success")
	}
	// A cancelled caller returns at once; the drain goes on for the others.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.put(cctx, Lease{MAC: "52:54:00:c9:01:02"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put: %v", err)
	}
	w.wait()
}

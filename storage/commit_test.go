package storage

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"castiron/fault"
)

// TestGroupCommitIsolatesFailures: concurrent writers share commits, yet a
// failing write (a duplicate name) rolls back alone and every successful
// one is durable after reopen.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const writers, each = 16, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]bool{}
	dups := 0
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// Every name is tried by two writers: exactly one must win.
				name := fmt.Sprintf("n-%d-%d", w/2, i)
				n := &Node{Driver: "fake-hardware", Name: &name, ProvisionState: "enroll"}
				err := s.CreateNode(ctx, n)
				mu.Lock()
				switch {
				case err == nil:
					created[n.UUID] = true
				case fault.KindOf(err) == fault.Conflict:
					dups++
				default:
					t.Errorf("create %s: %v", name, err)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if len(created) != writers*each/2 || dups != writers*each/2 {
		t.Fatalf("created %d, duplicates %d; want %d each", len(created), dups, writers*each/2)
	}
	nodes, err := s.ListNodes(ctx, NodeQuery{IncludeChildren: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(created) {
		t.Fatalf("%d nodes stored, %d acknowledged", len(nodes), len(created))
	}
	for _, n := range nodes {
		if !created[n.UUID] {
			t.Fatalf("node %s stored but its create failed", n.UUID)
		}
	}
	// A cancelled caller does not take the batch down with it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.CreateNode(cctx, &Node{Driver: "fake-hardware", ProvisionState: "enroll"}); err == nil {
		t.Fatal("create with a cancelled context succeeded")
	}
	mustCreate(t, s.CreateNode, &Node{Driver: "fake-hardware", ProvisionState: "enroll"})
}

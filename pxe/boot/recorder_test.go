package boot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// sinkLog is a sink that keeps every batch it is given.
type sinkLog struct {
	mu      sync.Mutex
	batches [][]Event
}

func (s *sinkLog) write(_ context.Context, evs []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, append([]Event(nil), evs...))
	return nil
}

func (s *sinkLog) events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []Event
	for _, b := range s.batches {
		all = append(all, b...)
	}
	return all
}

// TestBatchRecorderKeepsEveryEvent: events recorded from many goroutines
// at once are all written, each once, in each writer's order, in batches
// of at most batchEvents; a full batch is written before the periodic
// flush; what is left when Run stops is written too.
func TestBatchRecorderKeepsEveryEvent(t *testing.T) {
	sink := &sinkLog{}
	rec := NewBatchRecorder(sink.write, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()

	// One full batch wakes the writer at once, well before flushEvery.
	for i := range batchEvents {
		rec.Record(ctx, Event{MAC: "full", Kind: DHCPDiscover, Detail: fmt.Sprint(i)})
	}
	deadline := time.Now().Add(flushEvery / 2)
	for len(sink.events()) < batchEvents && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(sink.events()); n < batchEvents {
		t.Errorf("a full batch was not written before the periodic flush: %d of %d events", n, batchEvents)
	}

	const writers, each = 8, 3000 // more than maxQueued/writers: the writer must keep up
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec.Record(ctx, Event{MAC: fmt.Sprint("w", w), Kind: DHCPAck, Detail: fmt.Sprint(i)})
				if i%500 == 0 {
					time.Sleep(5 * time.Millisecond) // a storm in bursts
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done

	all := sink.events()
	if want := batchEvents + writers*each + int(rec.Dropped()); len(all) != want {
		t.Fatalf("%d events written, want %d", len(all), want)
	}
	if rec.Dropped() != 0 {
		t.Errorf("%d events dropped with room in the queue", rec.Dropped())
	}
	next := map[string]int{}
	for _, e := range all {
		if e.At.IsZero() {
			t.Fatalf("event without a time: %+v", e)
		}
		if want := fmt.Sprint(next[e.MAC]); e.Detail != want {
			t.Fatalf("%s: event %s written after %d others, want order %s", e.MAC, e.Detail, next[e.MAC], want)
		}
		next[e.MAC]++
	}
	for _, b := range sink.batches {
		if len(b) == 0 || len(b) > batchEvents {
			t.Fatalf("a batch of %d events", len(b))
		}
	}
}

// TestBatchRecorderDropsWhenFull: with no writer running, the queue holds
// maxQueued events and counts the rest as dropped; Run then writes those
// it held.
func TestBatchRecorderDropsWhenFull(t *testing.T) {
	sink := &sinkLog{}
	rec := NewBatchRecorder(sink.write, slog.Default())
	for range maxQueued + 10 {
		rec.Record(context.Background(), Event{Kind: DHCPDiscover})
	}
	if rec.Dropped() != 10 {
		t.Fatalf("dropped %d, want 10", rec.Dropped())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec.Run(ctx)
	if n := len(sink.events()); n != maxQueued {
		t.Fatalf("%d events written after stop, want %d", n, maxQueued)
	}
}

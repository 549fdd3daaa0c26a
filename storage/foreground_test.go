package storage

import (
	"context"
	"testing"
	"time"
)

// An operator's read (Foreground) is answered while every shared reader
// is held by others (a power-on storm's tasks and agents), and answers
// what a read on the shared readers answers.
func TestForegroundReadsHaveTheirOwnReaders(t *testing.T) {
	if onPostgres() {
		t.Skip("PostgreSQL reads run on a pool of the server's sessions; no readers are kept apart")
	}
	s, nodes := openWithNodes(t, "fg-a", "fg-b")
	ctx := context.Background()
	want, err := s.GetNode(ctx, nodes[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	// Hold every shared reader: a query whose rows are not read to the end
	// keeps its connection.
	for range readerConns {
		rows, err := s.reader().query(ctx, "SELECT uuid FROM nodes")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.GetNode(short, nodes[0].UUID); err == nil {
		t.Fatal("a background read got a shared reader while all were held: the test holds nothing")
	}
	fg, cancel := context.WithTimeout(Foreground(ctx), 10*time.Second)
	defer cancel()
	got, err := s.GetNode(fg, nodes[0].UUID)
	if err != nil {
		t.Fatalf("foreground read while the shared readers are held: %v", err)
	}
	if got.UUID != want.UUID || got.RowVersion != want.RowVersion || *got.Name != *want.Name {
		t.Fatalf("foreground read: %s v%d %q, want %s v%d %q", got.UUID, got.RowVersion, *got.Name, want.UUID, want.RowVersion, *want.Name)
	}
	vs, err := s.ListNodeVersions(fg, NodeQuery{})
	if err != nil || len(vs) != 2 {
		t.Fatalf("foreground list of versions: %d, %v; want 2", len(vs), err)
	}
}

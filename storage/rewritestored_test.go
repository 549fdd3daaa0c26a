package storage

import (
	"context"
	"testing"
)

// UpdateNode writes a JSON column when its content changed, and leaves
// an unchanged one's stored text as it was; a document stored in another
// form than the encoder's (written by hand here) is rewritten in the
// encoder's form with the same content.
func TestUpdateNodeWritesOnlyChangedDocuments(t *testing.T) {
	s, nodes := openWithNodes(t, "docs")
	ctx := context.Background()
	u := nodes[0].UUID
	stored := func() string {
		t.Helper()
		var text string
		if err := s.reader().queryRow(ctx, "SELECT extra FROM nodes WHERE uuid = ?", u).Scan(&text); err != nil {
			t.Fatal(err)
		}
		return text
	}
	update := func(fn func(n *Node)) *Node {
		t.Helper()
		n, err := s.UpdateNode(ctx, u, func(n *Node) (*Event, error) { fn(n); return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	update(func(n *Node) { n.Extra = JSONObject{"b": 2.0, "a": "x"} })
	if err := s.write(ctx, func(r runner) error {
		_, err := r.exec(ctx, `UPDATE nodes SET extra = '{ "a" : "x",  "b" : 2 }' WHERE uuid = ?`, u)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	handWritten := stored()

	n := update(func(n *Node) { d := "changed"; n.Description = &d })
	if got, want := stored(), `{"a":"x","b":2}`; got != want && !onPostgres() {
		t.Errorf("hand-written extra after a description change: stored %q, want the encoder's %q", got, want)
	}
	if n.Extra["a"] != "x" || n.Extra["b"] != 2.0 || len(n.Extra) != 2 {
		t.Errorf("extra read back: %v", n.Extra)
	}
	if got, err := s.GetNode(ctx, u); err != nil || got.Extra["a"] != "x" || got.Extra["b"] != 2.0 || len(got.Extra) != 2 || *got.Description != "changed" {
		t.Errorf("node read back: %v %v", got, err)
	}

	update(func(n *Node) { n.Extra["c"] = true })
	got, err := s.GetNode(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if got.Extra["a"] != "x" || got.Extra["b"] != 2.0 || got.Extra["c"] != true || len(got.Extra) != 3 {
		t.Errorf("extra after adding c: %v", got.Extra)
	}
	if stored() == handWritten {
		t.Error("extra changed but its stored text did not")
	}

	// Unchanged documents stay unchanged across many updates of others.
	before := stored()
	for i := range 3 {
		update(func(n *Node) { n.DriverInternalInfo["step"] = float64(i) })
	}
	if got := stored(); got != before {
		t.Errorf("extra after driver_internal_info updates: %q, want %q", got, before)
	}
}

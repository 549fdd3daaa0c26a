package storage

import (
	"context"
	"testing"
)

// UpdateNode writes a JSON column exactly when its content changed: an
// update of another column leaves its stored text as it was, even text
// that is not the encoder's (written by hand here), and a change of the
// document writes its new encoding.
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
	if got := stored(); got != handWritten {
		t.Errorf("extra after a description change: stored %q, want it left as %q", got, handWritten)
	}
	if n.Extra["a"] != "x" || n.Extra["b"] != 2.0 || len(n.Extra) != 2 {
		t.Errorf("extra read back: %v", n.Extra)
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

package ring

import (
	"slices"
	"testing"

	"github.com/google/uuid"
)

// TestOwnerMatchesTooz pins owners computed with tooz.hashring.HashRing
// (partitions=32, md5), as Ironic builds it, for these hosts and keys.
func TestOwnerMatchesTooz(t *testing.T) {
	r := New([]string{"c1", "c2", "c3"}, IronicPartitions)
	for key, want := range toozOwners {
		if got := r.Owner(key); got != want {
			t.Errorf("Owner(%s) = %s, want %s", key, got, want)
		}
	}
}

func TestSpreadAndStability(t *testing.T) {
	hosts := []string{"conductor-a", "conductor-b", "conductor-c"}
	three, two := New(hosts, 256), New(hosts[:2], 256)
	count := map[string]int{}
	moved := 0
	const n = 10000
	for i := 0; i < n; i++ {
		k := uuid.NewString()
		o3 := three.Owner(k)
		count[o3]++
		if o2 := two.Owner(k); o3 != "conductor-c" && o2 != o3 {
			moved++ // a key whose host stays must not move
		}
	}
	for _, h := range hosts {
		if share := float64(count[h]) / n; share < 0.2 || share > 0.47 {
			t.Errorf("%s owns %.2f of the keys", h, share)
		}
	}
	if moved != 0 {
		t.Errorf("%d keys moved between hosts that stayed", moved)
	}
	if got := New([]string{"b", "a", "b"}, 8).Hosts(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Hosts() = %v, want [a b]", got)
	}
	if New(nil, 8).Owner("x") != "" || New([]string{"a", "a"}, 8).Len() != 1 {
		t.Error("empty or duplicate hosts")
	}
}

// toozOwners was computed by tooz's algorithm (hashlib.md5 partitions,
// bisect.bisect) for hosts c1, c2, c3.
var toozOwners = map[string]string{
	"1be26c0b-03f2-4d2e-ae87-c02d7f33c123": "c1",
	"a308bca6-e6a3-4349-b8ea-695e17672898": "c2",
	"0a9e0d5c-1b7c-4d4e-8f32-111111111111": "c3",
	"ffffffff-0000-4000-8000-000000000000": "c1",
	"00000000-0000-4000-8000-000000000001": "c1",
	"5f2c1d9e-6b7a-4c3e-9d8f-0123456789ab": "c3",
	"9c0a7e44-2d7b-4f0e-8a5b-0d1e2f3a4b5c": "c3",
	"node-0":                               "c1",
}

// Package ring is the consistent hash ring Ironic places nodes with (its
// HashRingManager over tooz's HashRing): each host gets 2^5 partitions on a
// ring of md5 hashes, partition i of host h at md5(h repeated i+1 times); a
// key belongs to the host of the first partition after md5(key). castiron
// computes the same owner as Ironic would for the same hosts and uuid.
package ring

import (
	"bytes"
	"crypto/md5"
	"slices"
	"sort"
)

// IronicPartitions is Ironic's default number of partitions per host,
// 2^hash_partition_exponent with the default exponent 5.
const IronicPartitions = 32

// Ring maps keys (node uuids) to hosts (conductor hostnames).
type Ring struct {
	points [][md5.Size]byte // sorted
	hosts  []string         // hosts[i] owns points[i]
	names  []string         // distinct hosts, sorted
}

// New builds the ring of hosts (duplicates count once) with partitions
// points per host (Ironic: 2^hash_partition_exponent).
func New(hosts []string, partitions int) *Ring {
	uniq := map[string]bool{}
	for _, h := range hosts {
		uniq[h] = true
	}
	names := make([]string, 0, len(uniq))
	for h := range uniq {
		names = append(names, h)
	}
	// tooz lets a later host overwrite a colliding point; iterate in a
	// fixed order so every conductor builds the same ring.
	sort.Strings(names)
	byPoint := map[[md5.Size]byte]string{}
	for _, h := range names {
		d := md5.New()
		for i := 0; i < partitions; i++ {
			d.Write([]byte(h))
			var p [md5.Size]byte
			copy(p[:], d.Sum(nil))
			byPoint[p] = h
		}
	}
	r := &Ring{names: names}
	for p := range byPoint {
		r.points = append(r.points, p)
	}
	sort.Slice(r.points, func(i, j int) bool { return bytes.Compare(r.points[i][:], r.points[j][:]) < 0 })
	for _, p := range r.points {
		r.hosts = append(r.hosts, byPoint[p])
	}
	return r
}

// Hosts returns the hosts on the ring, sorted.
func (r *Ring) Hosts() []string { return slices.Clone(r.names) }

// Len is the number of hosts on the ring.
func (r *Ring) Len() int { return len(r.names) }

// Owner returns the host key maps to, "" on an empty ring.
func (r *Ring) Owner(key string) string {
	if len(r.points) == 0 {
		return ""
	}
	h := md5.Sum([]byte(key))
	// bisect_right: the first point greater than h, wrapping to 0.
	i := sort.Search(len(r.points), func(i int) bool { return bytes.Compare(r.points[i][:], h[:]) > 0 })
	if i == len(r.points) {
		i = 0
	}
	return r.hosts[i]
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// TestIDTable checks idTable against a Go map through random inserts and
// removals (with growth, wrap-around and backward shifts), with a hash of
// few distinct values so that probe runs are long and tags collide.
func TestIDTable(t *testing.T) {
	for _, bitsOfHash := range []uint{3, 12, 32} {
		var tab idTable
		ref := map[int32]uint64{} // id → hash
		rng := rand.New(rand.NewPCG(1, uint64(bitsOfHash)))
		hashOf := func(id int32) uint64 {
			return maphash.Comparable(maphash.Seed{}, id)&(1<<bitsOfHash-1) | uint64(id)<<40
		}
		var ids []int32
		for step := range 20000 {
			if len(ids) > 0 && rng.IntN(3) == 0 {
				j := rng.IntN(len(ids))
				id := ids[j]
				ids[j] = ids[len(ids)-1]
				ids = ids[:len(ids)-1]
				tab.remove(ref[id], id)
				delete(ref, id)
			} else {
				id := int32(step)
				h := hashOf(id)
				tab.insert(h, id)
				ref[id] = h
				ids = append(ids, id)
			}
			if tab.len() != len(ref) {
				t.Fatalf("%d bits, step %d: len %d, want %d", bitsOfHash, step, tab.len(), len(ref))
			}
			if step%97 != 0 {
				continue
			}
			for id, h := range ref {
				if got := tab.find(h, func(x int32) bool { return x == id }); got != id {
					t.Fatalf("%d bits, step %d: find(%d) = %d", bitsOfHash, step, id, got)
				}
			}
			// An id not in the table is not found.
			if got := tab.find(hashOf(-5), func(x int32) bool { return x == -5 }); got != -1 {
				t.Fatalf("%d bits, step %d: found %d for an absent id", bitsOfHash, step, got)
			}
		}
		n := 0
		for _, s := range tab.slots {
			if s != 0 {
				n++
			}
		}
		if n != len(ref) {
			t.Fatalf("%d bits: %d slots used, want %d", bitsOfHash, n, len(ref))
		}
	}
}

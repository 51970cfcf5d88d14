// SPDX-License-Identifier: Apache-2.0

package collector

// keyIndex maps the label bytes of a map key to its index in
// readState.entries. Keys of at most 8 bytes (two u32 labels, a pid and a
// cpu, most keys) are held as a uint64, which saves the string each key
// would otherwise allocate and hashes faster; longer keys are strings.
type keyIndex struct {
	small bool // keys of at most 8 bytes: u is used, else s
	u     map[uint64]int32
	s     map[string]int32
}

func newKeyIndex(keyLen, hint int) keyIndex {
	if keyLen <= 8 {
		return keyIndex{small: true, u: make(map[uint64]int32, hint)}
	}
	return keyIndex{s: make(map[string]int32, hint)}
}

// small64 packs a key of at most 8 bytes into a uint64 (keys of one metric
// all have the same length, so no two differ only by their length).
func small64(k []byte) uint64 {
	var v uint64
	for i, b := range k {
		v |= uint64(b) << (8 * i)
	}
	return v
}

func (x *keyIndex) len() int {
	if x.small {
		return len(x.u)
	}
	return len(x.s)
}

func (x *keyIndex) get(k []byte) (int32, bool) {
	if x.small {
		i, ok := x.u[small64(k)]
		return i, ok
	}
	i, ok := x.s[string(k)]
	return i, ok
}

func (x *keyIndex) put(k []byte, i int32) {
	if x.small {
		x.u[small64(k)] = i
		return
	}
	x.s[string(k)] = i
}

func (x *keyIndex) del(k []byte) {
	if x.small {
		delete(x.u, small64(k))
		return
	}
	delete(x.s, string(k))
}

// sweep deletes the keys whose entry drop reports true.
func (x *keyIndex) sweep(drop func(int32) bool) {
	if x.small {
		for k, i := range x.u {
			if drop(i) {
				delete(x.u, k)
			}
		}
		return
	}
	for k, i := range x.s {
		if drop(i) {
			delete(x.s, k)
		}
	}
}

// rebuilt returns a new index of the same keys, each at renumber(old
// index): Go maps do not give memory back as keys are deleted.
func (x *keyIndex) rebuilt(renumber func(int32) int32) keyIndex {
	n := keyIndex{small: x.small}
	if x.small {
		n.u = make(map[uint64]int32, len(x.u))
		for k, i := range x.u {
			n.u[k] = renumber(i)
		}
		return n
	}
	n.s = make(map[string]int32, len(x.s))
	for k, i := range x.s {
		n.s[k] = renumber(i)
	}
	return n
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// sampleListing has one of everything.
func sampleListing() *Listing {
	return &Listing{
		Programs: []Program{
			{ID: 7, Type: 5, Tag: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: "spin", RunTimeNs: 1e9, RunCount: 1000,
				VerifiedInsns: 40, JitedBytes: 200, LoadTime: 5e9, UID: 0, MapIDs: []uint32{3, 9}},
			{ID: 12, Type: 26, Name: "fentry_x.y", AttachBTFObjID: 1, AttachBTFID: 4242},
		},
		Maps:    []Map{{ID: 3, Type: 1, KeySize: 4, ValueSize: 8, MaxEntries: 1024, Name: "counts", Memlock: 86016}},
		Links:   []Link{{ID: 2, Type: 7, ProgID: 7, AttachType: 41, HasAttach: true, Target: "syscalls:sys_enter_getpgid"}},
		Holders: []Holder{{PID: 1234, Kind: HoldsProgram, ID: 7, Comm: "cilium-agent"}},
		More:    [4]uint32{0, 1, 0, 2},
	}
}

func TestWireRoundTrip(t *testing.T) {
	l := sampleListing()
	b, err := Encode(l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Programs[0].Name != "spin" || got.Programs[0].RunCount != 1000 || len(got.Programs[0].MapIDs) != 2 ||
		got.Maps[0].Memlock != 86016 || got.Links[0].Target != "syscalls:sys_enter_getpgid" || !got.Links[0].HasAttach ||
		got.Holders[0].Comm != "cilium-agent" || got.More[3] != 2 || got.Programs[1].AttachBTFID != 4242 {
		t.Errorf("round trip: %+v", got)
	}
	for i := range b {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("a listing cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := Decode(append(b, 0)); err == nil {
		t.Error("a trailing byte was accepted")
	}
}

func TestWireRefuses(t *testing.T) {
	for name, mutate := range map[string]func(*Listing){
		"program ids not increasing": func(l *Listing) { l.Programs[1].ID = 7 },
		"zero map id":                func(l *Listing) { l.Maps[0].ID = 0 },
		"name with a space":          func(l *Listing) { l.Programs[0].Name = "a b" },
		"name too long":              func(l *Listing) { l.Maps[0].Name = strings.Repeat("a", MaxName+1) },
		"comm too long":              func(l *Listing) { l.Holders[0].Comm = strings.Repeat("c", MaxName+1) },
		"NUL in a target":            func(l *Listing) { l.Links[0].Target = "a\x00b" },
		"holder kind":                func(l *Listing) { l.Holders[0].Kind = 4 },
		"zero pid":                   func(l *Listing) { l.Holders[0].PID = 0 },
		"too many map ids":           func(l *Listing) { l.Programs[0].MapIDs = make([]uint32, MaxMapIDs+1) },
	} {
		l := sampleListing()
		mutate(l)
		if _, err := Encode(l); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	// A count past the bound, and counts the bytes cannot hold, before
	// anything is allocated.
	b, _ := Encode(sampleListing())
	big := bytes.Clone(b)
	binary.LittleEndian.PutUint32(big[len(wireMagic):], MaxPrograms+1)
	if _, err := Decode(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("programs past the bound: %v", err)
	}
	binary.LittleEndian.PutUint32(big[len(wireMagic):], MaxPrograms)
	if _, err := Decode(big); err == nil || !strings.Contains(err.Error(), "records in") {
		t.Errorf("more records than bytes: %v", err)
	}
	if _, err := Decode(bytes.Repeat([]byte{0}, MaxEncoded+1)); err == nil {
		t.Error("an oversized listing decoded")
	}
}

// FuzzDecode feeds the serving process' parser of the privileged helper's
// listing arbitrary bytes: it never panics, and what it accepts passes the
// bounds (Encode accepts it) and encodes back to the same bytes, so that
// nothing in the input is ignored or read two ways.
func FuzzDecode(f *testing.F) {
	b, _ := Encode(sampleListing())
	f.Add(b)
	empty, _ := Encode(&Listing{})
	f.Add(empty)
	f.Add([]byte(wireMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := Decode(in)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		out, err := Encode(l)
		if err != nil {
			t.Fatalf("decoded listing does not encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("decode then encode changed %d bytes into %d", len(in), len(out))
		}
	})
}

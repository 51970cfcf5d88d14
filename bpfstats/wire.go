// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The wire form of a Listing, which the privileged helper sends to the
// serving process (package privsep): little-endian, every count and
// length bounded, read by Decode, which checks all of it.
//
//	header   "KEBPFLS1", programs u32, maps u32, links u32, holders u32,
//	         more [4]u32, holders_err str16
//	program  id u32, type u32, tag [8]u8, name str8, run_time_ns u64,
//	         run_cnt u64, verified_insns u32, jited_bytes u32,
//	         load_time u64, uid u32, attach_btf_obj_id u32,
//	         attach_btf_id u32, map_ids u16 + that many u32
//	map      id u32, type u32, key_size u32, value_size u32,
//	         max_entries u32, flags u32, name str8, memlock u64,
//	         entries i64 (-1: not counted)
//	link     id u32, type u32, prog_id u32, attach_type u32,
//	         has_attach u8, target str8
//	holder   pid u32, kind u32, id u32, comm str8
//
// str8 and str16 are a u8 or u16 length and that many bytes.

// wireMagic opens an encoded listing (version 1).
const wireMagic = "KEBPFLS1"

// Encode returns the wire form of l. It fails when l breaks a bound that
// Decode checks, so that what one encodes the other reads.
func Encode(l *Listing) ([]byte, error) {
	if err := check(l); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+len(l.Programs)*96+len(l.Maps)*48+len(l.Links)*64+len(l.Holders)*24)
	b = append(b, wireMagic...)
	for _, n := range []int{len(l.Programs), len(l.Maps), len(l.Links), len(l.Holders)} {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	for _, n := range l.More {
		b = binary.LittleEndian.AppendUint32(b, n)
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(l.HoldersErr)))
	b = append(b, l.HoldersErr...)
	for _, p := range l.Programs {
		b = appendU32(b, p.ID, p.Type)
		b = append(b, p.Tag[:]...)
		b = appendStr8(b, p.Name)
		b = binary.LittleEndian.AppendUint64(b, p.RunTimeNs)
		b = binary.LittleEndian.AppendUint64(b, p.RunCount)
		b = appendU32(b, p.VerifiedInsns, p.JitedBytes)
		b = binary.LittleEndian.AppendUint64(b, p.LoadTime)
		b = appendU32(b, p.UID, p.AttachBTFObjID, p.AttachBTFID)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p.MapIDs)))
		b = appendU32(b, p.MapIDs...)
	}
	for _, m := range l.Maps {
		b = appendU32(b, m.ID, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, m.Flags)
		b = appendStr8(b, m.Name)
		b = binary.LittleEndian.AppendUint64(b, m.Memlock)
		b = binary.LittleEndian.AppendUint64(b, uint64(m.Entries))
	}
	for _, k := range l.Links {
		b = appendU32(b, k.ID, k.Type, k.ProgID, k.AttachType)
		has := byte(0)
		if k.HasAttach {
			has = 1
		}
		b = append(b, has)
		b = appendStr8(b, k.Target)
	}
	for _, h := range l.Holders {
		b = appendU32(b, h.PID, h.Kind, h.ID)
		b = appendStr8(b, h.Comm)
	}
	if len(b) > MaxEncoded {
		return nil, fmt.Errorf("encoded listing of %d bytes: more than %d", len(b), MaxEncoded)
	}
	return b, nil
}

func appendU32(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

func appendStr8(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

// Decode parses the wire form of a listing. It refuses, with an error that
// quotes none of the input: more than MaxEncoded bytes, a wrong magic,
// counts past the bounds, strings longer than theirs, names holding
// anything but [A-Za-z0-9_.], NUL bytes in command names and targets, a
// zero id or pid, ids not strictly increasing within programs, maps and
// links, an unknown holder kind, and bytes left over or missing.
func Decode(b []byte) (*Listing, error) {
	if len(b) > MaxEncoded {
		return nil, fmt.Errorf("listing of %d bytes: more than %d", len(b), MaxEncoded)
	}
	r := reader{b: b}
	if string(r.bytes(len(wireMagic))) != wireMagic {
		return nil, errors.New("listing: bad magic")
	}
	var n [4]uint32
	for i := range n {
		n[i] = r.u32()
	}
	l := &Listing{}
	for i := range l.More {
		l.More[i] = r.u32()
	}
	l.HoldersErr = string(r.bytes(int(r.u16())))
	if r.err != nil {
		return nil, r.err
	}
	limits := [4]uint32{MaxPrograms, MaxMaps, MaxLinks, MaxHolders}
	for i := range n {
		if n[i] > limits[i] {
			return nil, fmt.Errorf("listing: %d %s: more than %d", n[i], kinds[i], limits[i])
		}
	}
	// The smallest records are 13 bytes: a count larger than what is
	// left cannot be right, and is refused before anything is allocated.
	if total := uint64(n[0]) + uint64(n[1]) + uint64(n[2]) + uint64(n[3]); total*13 > uint64(len(r.b)) {
		return nil, fmt.Errorf("listing: %d records in %d bytes", total, len(r.b))
	}
	l.Programs = make([]Program, n[0])
	for i := range l.Programs {
		p := &l.Programs[i]
		p.ID, p.Type = r.u32(), r.u32()
		copy(p.Tag[:], r.bytes(8))
		p.Name = r.str8()
		p.RunTimeNs, p.RunCount = r.u64(), r.u64()
		p.VerifiedInsns, p.JitedBytes = r.u32(), r.u32()
		p.LoadTime = r.u64()
		p.UID, p.AttachBTFObjID, p.AttachBTFID = r.u32(), r.u32(), r.u32()
		nm := int(r.u16())
		if nm > MaxMapIDs {
			return nil, fmt.Errorf("listing: program %d has %d map ids: more than %d", p.ID, nm, MaxMapIDs)
		}
		if nm > 0 && r.err == nil {
			p.MapIDs = make([]uint32, nm)
			for j := range p.MapIDs {
				p.MapIDs[j] = r.u32()
			}
		}
	}
	l.Maps = make([]Map, n[1])
	for i := range l.Maps {
		m := &l.Maps[i]
		m.ID, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, m.Flags = r.u32(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32()
		m.Name = r.str8()
		m.Memlock = r.u64()
		m.Entries = int64(r.u64())
	}
	l.Links = make([]Link, n[2])
	for i := range l.Links {
		k := &l.Links[i]
		k.ID, k.Type, k.ProgID, k.AttachType = r.u32(), r.u32(), r.u32(), r.u32()
		switch r.u8() {
		case 0:
		case 1:
			k.HasAttach = true
		default:
			return nil, fmt.Errorf("listing: link %d: bad attach flag", k.ID)
		}
		k.Target = r.str8()
	}
	l.Holders = make([]Holder, n[3])
	for i := range l.Holders {
		h := &l.Holders[i]
		h.PID, h.Kind, h.ID = r.u32(), r.u32(), r.u32()
		h.Comm = r.str8()
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != r.off {
		return nil, fmt.Errorf("listing: %d bytes left over", len(r.b)-r.off)
	}
	if err := check(l); err != nil {
		return nil, err
	}
	return l, nil
}

var kinds = [4]string{"programs", "maps", "links", "holders"}

// check verifies the bounds and rules Decode enforces on a listing.
func check(l *Listing) error {
	if len(l.Programs) > MaxPrograms || len(l.Maps) > MaxMaps || len(l.Links) > MaxLinks || len(l.Holders) > MaxHolders {
		return fmt.Errorf("listing: %d programs, %d maps, %d links, %d holders: over the bounds", len(l.Programs), len(l.Maps), len(l.Links), len(l.Holders))
	}
	if len(l.HoldersErr) > MaxNote || strings.IndexByte(l.HoldersErr, 0) >= 0 {
		return errors.New("listing: bad holders note")
	}
	if err := increasing("program", l.Programs, func(p Program) uint32 { return p.ID }); err != nil {
		return err
	}
	if err := increasing("map", l.Maps, func(m Map) uint32 { return m.ID }); err != nil {
		return err
	}
	if err := increasing("link", l.Links, func(k Link) uint32 { return k.ID }); err != nil {
		return err
	}
	for _, p := range l.Programs {
		if !objName(p.Name) {
			return fmt.Errorf("listing: program %d: bad name", p.ID)
		}
		if len(p.MapIDs) > MaxMapIDs {
			return fmt.Errorf("listing: program %d: %d map ids", p.ID, len(p.MapIDs))
		}
	}
	for _, m := range l.Maps {
		if !objName(m.Name) {
			return fmt.Errorf("listing: map %d: bad name", m.ID)
		}
		if m.Entries < -1 {
			return fmt.Errorf("listing: map %d: %d entries", m.ID, m.Entries)
		}
	}
	for _, k := range l.Links {
		if len(k.Target) > MaxTarget || strings.IndexByte(k.Target, 0) >= 0 {
			return fmt.Errorf("listing: link %d: bad target", k.ID)
		}
	}
	for _, h := range l.Holders {
		if h.PID == 0 || h.ID == 0 || h.Kind < HoldsProgram || h.Kind > HoldsLink {
			return errors.New("listing: bad holder")
		}
		if len(h.Comm) > MaxName || strings.IndexByte(h.Comm, 0) >= 0 {
			return fmt.Errorf("listing: holder %d: bad command name", h.PID)
		}
	}
	return nil
}

// increasing checks that the ids of objs (of kind) are not 0 and strictly
// increasing.
func increasing[T any](kind string, objs []T, id func(T) uint32) error {
	var prev uint32
	for i, o := range objs {
		v := id(o)
		if v == 0 || (i > 0 && v <= prev) {
			return fmt.Errorf("listing: %s ids not increasing at %d", kind, i)
		}
		prev = v
	}
	return nil
}

// objName reports whether s is a name the kernel accepts for a program or
// map (kernel/bpf/syscall.c, bpf_obj_name_cpy): at most MaxName bytes of
// [A-Za-z0-9_.].
func objName(s string) bool {
	if len(s) > MaxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// reader reads the wire form; the first short read sets err and every
// later read returns zeros.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if n > len(r.b)-r.off {
		r.err = errors.New("listing: truncated")
		return make([]byte, n)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8() uint8   { return r.bytes(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.bytes(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.bytes(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.bytes(8)) }

func (r *reader) str8() string { return string(r.bytes(int(r.u8()))) }

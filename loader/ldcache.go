// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
)

// The dynamic loader's cache, /etc/ld.so.cache, written by ldconfig(8). Since
// glibc 2.32 ldconfig writes only the "new" format (glibc's
// sysdeps/generic/dl-cache.h, struct cache_file_new), which this file reads:
//
//	header, 48 bytes:
//	  [0:20]  magic "glibc-ld.so.cache" and version "1.1"
//	  [20:24] nlibs: number of entries
//	  [24:28] len_strings: size of the string table
//	  [28]    flags: byte order (0 unset, 2 little endian, 3 big endian)
//	  [32:36] extension_offset (not read here)
//	entries, nlibs × 24 bytes, each:
//	  [0:4]   flags: library type (low byte, 3 = ELF libc6) and the
//	          architecture it needs (high byte, 0x03 x86-64, 0x0a AArch64 ...)
//	  [4:8]   key: offset of the soname ("libc.so.6")
//	  [8:12]  value: offset of the path ("/lib/x86_64-linux-gnu/libc.so.6")
//	  [12:16] osversion
//	  [16:24] hwcap (non-zero for glibc-hwcaps subdirectory variants)
//	strings: NUL-terminated, at offsets from the start of the header.
//
// The older "ld.so-1.7.0" format (which ldconfig before glibc 2.32 wrote
// in front of the new one by default) is refused with ErrLdCacheFormat; library
// resolution then falls back to the standard directories.

const (
	ldCacheMagic     = "glibc-ld.so.cache1.1"
	ldCacheHeader    = 48
	ldCacheEntrySize = 24
	// maxLdCache bounds /etc/ld.so.cache: a system with 10,000 libraries
	// has a cache of about 1 MiB.
	maxLdCache = 16 << 20 // 16 MiB
	// maxLdCachePath bounds a path or soname in the cache (PATH_MAX).
	maxLdCachePath = 4096

	ldFlagTypeMask  = 0x00ff
	ldFlagELFLibc6  = 0x0003
	ldFlagArchMask  = 0xff00
	ldCacheLittle   = 2
	ldCacheBig      = 3
	ldCacheEndUnset = 0
)

// ErrLdCacheFormat marks an ld.so.cache that is not in the new format or is
// malformed.
var ErrLdCacheFormat = errors.New("not a glibc-ld.so.cache1.1 file")

// ldArchFlags is the architecture byte (in the entry flags' high byte) that
// ldconfig records for the 64-bit libraries of each GOARCH (glibc's
// FLAG_X8664_LIB64, FLAG_AARCH64_LIB64, ...). 386 and 32-bit ARM libraries
// carry 0 (plain FLAG_ELF_LIBC6); an architecture not listed accepts any.
var ldArchFlags = map[string]uint32{
	"amd64":   0x0300,
	"arm64":   0x0a00,
	"386":     0x0000,
	"ppc64le": 0x0500,
	"s390x":   0x0400,
}

// LdCacheEntry is one library of the cache.
type LdCacheEntry struct {
	// Name is the soname ("libc.so.6"), Path its file.
	Name, Path string
	// Flags is the entry's flags word: type in the low byte, required
	// architecture in the high byte.
	Flags uint32
	// HWCap is non-zero for a glibc-hwcaps variant.
	HWCap uint64
}

// ParseLdCache parses a new-format ld.so.cache held in data. Every offset
// and count is checked against len(data): a malformed file gives an error
// wrapping ErrLdCacheFormat, never a panic. Entries whose strings are empty,
// not NUL-terminated within maxLdCachePath (4096) bytes, or outside the data
// are an error too. Errors never quote the file's bytes.
func ParseLdCache(data []byte) ([]LdCacheEntry, error) {
	if len(data) < ldCacheHeader {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrLdCacheFormat, len(data), ldCacheHeader)
	}
	if string(data[:len(ldCacheMagic)]) != ldCacheMagic {
		if bytes.HasPrefix(data, []byte("ld.so-1.7.0")) {
			return nil, fmt.Errorf("%w: old ld.so-1.7.0 format (glibc before 2.32)", ErrLdCacheFormat)
		}
		return nil, fmt.Errorf("%w: bad magic", ErrLdCacheFormat)
	}
	var bo binary.ByteOrder = binary.NativeEndian
	switch data[28] {
	case ldCacheEndUnset:
	case ldCacheLittle:
		bo = binary.LittleEndian
	case ldCacheBig:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: byte order flag %d (want 0, 2 or 3)", ErrLdCacheFormat, data[28])
	}
	nlibs := uint64(bo.Uint32(data[20:24]))
	lenStrings := uint64(bo.Uint32(data[24:28]))
	size := uint64(len(data))
	entriesEnd := ldCacheHeader + nlibs*ldCacheEntrySize
	if entriesEnd > size {
		return nil, fmt.Errorf("%w: %d entries need %d bytes, file has %d", ErrLdCacheFormat, nlibs, entriesEnd, size)
	}
	if entriesEnd+lenStrings > size {
		return nil, fmt.Errorf("%w: string table of %d bytes at %d overruns the file (%d bytes)", ErrLdCacheFormat, lenStrings, entriesEnd, size)
	}
	out := make([]LdCacheEntry, 0, nlibs)
	for i := uint64(0); i < nlibs; i++ {
		e := data[ldCacheHeader+i*ldCacheEntrySize:][:ldCacheEntrySize]
		key, err := ldCacheString(data, bo.Uint32(e[4:8]))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d name: %v", ErrLdCacheFormat, i, err)
		}
		val, err := ldCacheString(data, bo.Uint32(e[8:12]))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d path: %v", ErrLdCacheFormat, i, err)
		}
		out = append(out, LdCacheEntry{Name: key, Path: val, Flags: bo.Uint32(e[0:4]), HWCap: bo.Uint64(e[16:24])})
	}
	return out, nil
}

// ldCacheString returns the NUL-terminated string at off in data.
func ldCacheString(data []byte, off uint32) (string, error) {
	if uint64(off) >= uint64(len(data)) {
		return "", fmt.Errorf("offset %d outside the file (%d bytes)", off, len(data))
	}
	rest := data[off:]
	if len(rest) > maxLdCachePath+1 {
		rest = rest[:maxLdCachePath+1]
	}
	n := bytes.IndexByte(rest, 0)
	switch {
	case n < 0:
		return "", fmt.Errorf("string at offset %d not terminated within %d bytes", off, maxLdCachePath)
	case n == 0:
		return "", fmt.Errorf("empty string at offset %d", off)
	}
	return string(rest[:n]), nil
}

// lookupLdCache returns the path of the first entry named name that is an
// ELF libc6 library for the running architecture and not a glibc-hwcaps
// variant (the dynamic loader's baseline choice), or "".
func lookupLdCache(entries []LdCacheEntry, name string) string {
	want, archKnown := ldArchFlags[runtime.GOARCH]
	for _, e := range entries {
		if e.Name != name || e.HWCap != 0 || e.Flags&ldFlagTypeMask != ldFlagELFLibc6 {
			continue
		}
		if archKnown && e.Flags&ldFlagArchMask != want {
			continue
		}
		return e.Path
	}
	return ""
}

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode"
)

type testLdEntry struct {
	flags       uint32
	name, path  string
	hwcap       uint64
	badKeyOff   bool
	unterminate bool
}

// buildLdCache writes a new-format cache (little endian) holding entries.
func buildLdCache(entries []testLdEntry) []byte {
	strStart := ldCacheHeader + len(entries)*ldCacheEntrySize
	var strs []byte
	offs := make([][2]uint32, len(entries))
	for i, e := range entries {
		offs[i][0] = uint32(strStart + len(strs))
		strs = append(append(strs, e.name...), 0)
		offs[i][1] = uint32(strStart + len(strs))
		strs = append(append(strs, e.path...), 0)
	}
	b := make([]byte, strStart, strStart+len(strs))
	copy(b, ldCacheMagic)
	le := binary.LittleEndian
	le.PutUint32(b[20:], uint32(len(entries)))
	le.PutUint32(b[24:], uint32(len(strs)))
	b[28] = ldCacheLittle
	for i, e := range entries {
		p := b[ldCacheHeader+i*ldCacheEntrySize:]
		le.PutUint32(p[0:], e.flags)
		le.PutUint32(p[4:], offs[i][0])
		if e.badKeyOff {
			le.PutUint32(p[4:], 0xfffffff0)
		}
		le.PutUint32(p[8:], offs[i][1])
		le.PutUint64(p[16:], e.hwcap)
	}
	b = append(b, strs...)
	if len(entries) > 0 && entries[len(entries)-1].unterminate {
		b = b[:len(b)-1]
	}
	return b
}

func hostLibFlags() uint32 { return ldArchFlags[runtime.GOARCH] | ldFlagELFLibc6 }

func TestParseLdCacheSynthetic(t *testing.T) {
	host := hostLibFlags()
	other := uint32(0x0800 | ldFlagELFLibc6) // x32 libraries
	if runtime.GOARCH == "386" {
		other = 0x0300 | ldFlagELFLibc6
	}
	data := buildLdCache([]testLdEntry{
		{flags: other, name: "libfoo.so.1", path: "/libx32/libfoo.so.1"},
		{flags: host, name: "libfoo.so.1", path: "/usr/lib/glibc-hwcaps/x86-64-v3/libfoo.so.1", hwcap: 1 << 62},
		{flags: host, name: "libfoo.so.1", path: "/usr/lib/libfoo.so.1"},
		{flags: host, name: "libfoo.so.1", path: "/second/libfoo.so.1"},
		{flags: 0x0001, name: "libbar.so", path: "/lib/libbar.so"},
	})
	entries, err := ParseLdCache(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 || entries[4].Name != "libbar.so" || entries[4].Path != "/lib/libbar.so" || entries[1].HWCap != 1<<62 || entries[0].Flags != other {
		t.Fatalf("entries %+v", entries)
	}
	if got := lookupLdCache(entries, "libfoo.so.1"); got != "/usr/lib/libfoo.so.1" {
		t.Errorf("libfoo.so.1 -> %q, want /usr/lib/libfoo.so.1 (the first baseline entry of this architecture)", got)
	}
	if got := lookupLdCache(entries, "libbar.so"); got != "" {
		t.Errorf("libbar.so (not libc6) -> %q, want none", got)
	}

	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"short":     {data[:40], "40 bytes, shorter than the 48-byte header"},
		"magic":     {append([]byte("XXXX"), data[4:]...), "bad magic"},
		"old":       {append([]byte("ld.so-1.7.0\x00"), data[12:]...), "old ld.so-1.7.0 format"},
		"truncated": {data[:ldCacheHeader+3*ldCacheEntrySize], "5 entries need 168 bytes"},
		"strings":   {data[:len(data)-1], "string table of"},
		"keyoff":    {buildLdCache([]testLdEntry{{flags: host, name: "a", path: "b", badKeyOff: true}}), "entry 0 name: offset 4294967280 outside the file"},
		"unterm":    {buildLdCache([]testLdEntry{{flags: host, name: "a", path: "b", unterminate: true}})[:0], "shorter than"},
		"empty":     {buildLdCache([]testLdEntry{{flags: host, name: "", path: "b"}}), "entry 0 name: empty string"},
		"longpath":  {buildLdCache([]testLdEntry{{flags: host, name: "a", path: strings.Repeat("x", maxLdCachePath+1)}}), "entry 0 path: string at offset 74 not terminated within 4096 bytes"},
	} {
		_, err := ParseLdCache(tc.data)
		if err == nil || !errors.Is(err, ErrLdCacheFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrLdCacheFormat with %q", name, err, tc.want)
		}
	}
	// Byte order 3 (big endian) reads the counts big endian: here they
	// become huge and are refused.
	be := append([]byte(nil), data...)
	be[28] = ldCacheBig
	if _, err := ParseLdCache(be); err == nil || !strings.Contains(err.Error(), "entries need") {
		t.Errorf("big-endian flag on a little-endian file: %v", err)
	}
	be[28] = 7
	if _, err := ParseLdCache(be); err == nil || !strings.Contains(err.Error(), "byte order flag 7") {
		t.Errorf("byte order 7: %v", err)
	}
}

// TestResolveLibrary resolves libc.so.6 on this machine through the real
// cache, through the standard directories when the cache is missing or
// malformed, and reports a missing library with every place searched.
func TestResolveLibrary(t *testing.T) {
	want := ""
	for _, d := range libraryDirs() {
		if p := filepath.Join(d, "libc.so.6"); regularFile(p) {
			want = p
			break
		}
	}
	if want == "" {
		t.Skip("no libc.so.6 in the standard directories (not a glibc system)")
	}
	if data, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		entries, err := ParseLdCache(data)
		if err != nil {
			t.Fatalf("/etc/ld.so.cache: %v", err)
		}
		if p := lookupLdCache(entries, "libc.so.6"); p == "" || !sameFile(p, want) {
			t.Errorf("/etc/ld.so.cache (%d entries): libc.so.6 -> %q, want %s", len(entries), p, want)
		}
		got, err := ResolveLibrary("libc.so.6")
		if err != nil {
			t.Fatal(err)
		}
		// The cache may name another directory holding the same file.
		if got != want && !sameFile(got, want) {
			t.Errorf("libc.so.6 -> %s, want %s", got, want)
		}
	}

	dir := t.TempDir()
	defer func(p string) { ldCachePath = p }(ldCachePath)
	ldCachePath = filepath.Join(dir, "missing")
	if got, err := ResolveLibrary("libc.so.6"); err != nil || got != want {
		t.Errorf("without a cache: libc.so.6 -> %q, %v; want %s", got, err, want)
	}
	ldCachePath = filepath.Join(dir, "bad")
	os.WriteFile(ldCachePath, []byte("garbage, not a cache, at least 48 bytes long......"), 0o644)
	if got, err := ResolveLibrary("libc.so.6"); err != nil || got != want {
		t.Errorf("with a bad cache: libc.so.6 -> %q, %v; want %s", got, err, want)
	}
	_, err := ResolveLibrary("libno-such-library.so.9")
	for _, s := range []string{"library libno-such-library.so.9 not found in " + ldCachePath, "cache not used", "bad magic", libraryDirs()[0], "/usr/lib"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("missing library: error %v, want %q", err, s)
		}
	}
	// A cache entry naming a file that is not there falls through to the
	// directories.
	ldCachePath = filepath.Join(dir, "stale")
	os.WriteFile(ldCachePath, buildLdCache([]testLdEntry{{flags: hostLibFlags(), name: "libc.so.6", path: dir + "/gone/libc.so.6"}}), 0o644)
	if got, err := ResolveLibrary("libc.so.6"); err != nil || got != want {
		t.Errorf("stale cache: libc.so.6 -> %q, %v; want %s", got, err, want)
	}
	// A cache entry for the library wins over the directories.
	lib := filepath.Join(dir, "libc.so.6")
	os.WriteFile(lib, []byte("x"), 0o644)
	ldCachePath = filepath.Join(dir, "good")
	os.WriteFile(ldCachePath, buildLdCache([]testLdEntry{{flags: hostLibFlags(), name: "libc.so.6", path: lib}}), 0o644)
	if got, err := ResolveLibrary("libc.so.6"); err != nil || got != lib {
		t.Errorf("cache entry: libc.so.6 -> %q, %v; want %s", got, err, lib)
	}
	if got, err := ResolveLibrary("/abs/libc.so.6"); err != nil || got != "/abs/libc.so.6" {
		t.Errorf("a path is returned as is: %q, %v", got, err)
	}
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// FuzzLdSoCache feeds arbitrary bytes to ParseLdCache: it must never panic;
// entries it returns have names and paths of 1 to 4096 bytes, and its
// errors are short printable text wrapping ErrLdCacheFormat.
func FuzzLdSoCache(f *testing.F) {
	if data, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		f.Add(data)
	}
	host := hostLibFlags()
	f.Add(buildLdCache([]testLdEntry{{flags: host, name: "libc.so.6", path: "/lib/libc.so.6"}, {flags: 3, name: "libm.so.6", path: "/lib/libm.so.6"}}))
	f.Add(buildLdCache(nil))
	f.Add(buildLdCache([]testLdEntry{{flags: host, name: "a", path: "b", badKeyOff: true}}))
	f.Add([]byte("ld.so-1.7.0\x00\x00\x00\x00\x00"))
	f.Add([]byte(ldCacheMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseLdCache(data)
		if err != nil {
			msg := err.Error()
			if !errors.Is(err, ErrLdCacheFormat) || len(msg) > 256 {
				t.Fatalf("error %q", msg)
			}
			for _, r := range msg {
				if !unicode.IsPrint(r) {
					t.Fatalf("unprintable error %q", msg)
				}
			}
			return
		}
		for _, e := range entries {
			if len(e.Name) == 0 || len(e.Name) > maxLdCachePath || len(e.Path) == 0 || len(e.Path) > maxLdCachePath {
				t.Fatalf("entry %q -> %q", e.Name, e.Path)
			}
		}
		if len(entries) > 0 {
			lookupLdCache(entries, entries[0].Name)
		}
	})
}

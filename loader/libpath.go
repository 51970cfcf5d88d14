// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// ldCachePath is the dynamic loader's cache (a variable for tests).
var ldCachePath = "/etc/ld.so.cache"

// multiarchDirs is the Debian multiarch triplet of each GOARCH.
var multiarchDirs = map[string]string{
	"amd64":   "x86_64-linux-gnu",
	"arm64":   "aarch64-linux-gnu",
	"386":     "i386-linux-gnu",
	"arm":     "arm-linux-gnueabihf",
	"ppc64le": "powerpc64le-linux-gnu",
	"s390x":   "s390x-linux-gnu",
	"riscv64": "riscv64-linux-gnu",
}

// libraryDirs returns the standard library directories searched after the
// cache, in order: the multiarch directories of the running architecture
// (/lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu on amd64), then /lib64
// and /usr/lib64 on 64-bit architectures, then /lib and /usr/lib.
func libraryDirs() []string {
	var dirs []string
	if t, ok := multiarchDirs[runtime.GOARCH]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	if strings.HasSuffix(runtime.GOARCH, "64") || runtime.GOARCH == "s390x" {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// IsBareLibrary reports whether a uprobe binary is a bare library name
// ("libc.so.6") to be resolved as the dynamic loader does, rather than a
// path: it has no slash.
func IsBareLibrary(bin string) bool {
	return bin != "" && !strings.ContainsRune(bin, '/')
}

// ResolveLibrary returns the file of a bare library name as the dynamic
// loader would find it: first /etc/ld.so.cache (read through package
// bounded, at most 16 MiB, new glibc format only; an entry for the running
// architecture, not a glibc-hwcaps variant), then the first regular file of
// that name in the standard directories (see libraryDirs). A path (any
// name with a slash) is returned as is. The error names the library and
// every place searched; a cache that cannot be read or parsed is not an
// error by itself (its reason is added when the name is not found).
// LD_LIBRARY_PATH is not consulted: it is the exporter's environment, not
// the traced process's.
func ResolveLibrary(name string) (string, error) {
	if !IsBareLibrary(name) {
		return name, nil
	}
	if name == "." || name == ".." || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("library %q: not a file name", name)
	}
	cacheNote := ""
	data, err := bounded.ReadFile(ldCachePath, "dynamic loader cache", maxLdCache)
	if err == nil {
		var entries []LdCacheEntry
		entries, err = ParseLdCache(data)
		if err == nil {
			if p := lookupLdCache(entries, name); p != "" {
				if regularFile(p) {
					return p, nil
				}
				cacheNote = fmt.Sprintf(" (%s names %s, which is not a regular file)", ldCachePath, p)
			}
		}
	}
	if err != nil {
		if errors.Is(err, ErrLdCacheFormat) {
			err = fmt.Errorf("%s: %w", ldCachePath, err)
		}
		cacheNote = fmt.Sprintf(" (cache not used: %v)", err)
	}
	dirs := libraryDirs()
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if regularFile(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("library %s not found in %s%s or %s", name, ldCachePath, cacheNote, strings.Join(dirs, ", "))
}

// regularFile reports whether p is (or links to) a regular file.
func regularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// executableDirs are the directories a bare executable name of a usdt
// section is looked up in, in order: the PATH of a root login on Debian
// (libbpf searches the loading process's PATH, then /usr/bin and /usr/sbin;
// the exporter's own environment says nothing about the traced programs).
var executableDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// isLibraryName reports whether a bare name is a shared library's, as
// libbpf tells them: it ends in ".so" or holds ".so.".
func isLibraryName(name string) bool {
	return strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.")
}

// ResolveBinary returns the file of a USDT target as libbpf finds the
// binary of a usdt/<binary>:<provider>:<name> section: a path (any name
// with a slash) as is; a bare library name ("libc.so.6") with
// ResolveLibrary; any other bare name ("python3") as the first regular
// file with an execute bit of that name in executableDirs. The error names
// the binary and the directories searched.
func ResolveBinary(name string) (string, error) {
	if !IsBareLibrary(name) || isLibraryName(name) {
		return ResolveLibrary(name)
	}
	if name == "." || name == ".." || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("binary %q: not a file name", name)
	}
	for _, d := range executableDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %s not found in %s", name, strings.Join(executableDirs, ", "))
}

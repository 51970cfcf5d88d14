// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

// DefaultCacheSize is the size of each LRU cache when Env.CacheSize is not
// positive.
const DefaultCacheSize = 4096

// NewEnv returns an Env that reads the real /proc and /sys and whose LRU
// caches hold at most cacheSize entries each (DefaultCacheSize if
// cacheSize <= 0). Kernel state (kallsyms, the cgroup2 mount) is read lazily,
// so tests may change ProcRoot and SysRoot before building decoders.
func NewEnv(cacheSize int) *Env {
	return &Env{CacheSize: cacheSize, ProcRoot: "/proc", SysRoot: "/sys"}
}

// shared is the state an Env's decoders share. Each part is built on first
// use; after that it is immutable or guarded by its own lock.
type shared struct {
	ksymsOnce     sync.Once
	ksymsPrefetch sync.Once
	ksymsWanted   atomic.Bool
	ksyms         *kallsyms
	ksymsErr      error

	devCacheOnce sync.Once
	devCache     *lru.Cache[uint64, []byte] // majorminor: field value → name

	ifCacheOnce sync.Once
	ifCache     *lru.Cache[uint32, []byte] // ifname: ifindex → name

	cgroupsOnce sync.Once
	cgroups     *cgroupResolver
	cgroupsErr  error

	pciOnce sync.Once
	pci     *pciDB
	pciErr  error

	kubeOnce sync.Once
	kube     *kube.Resolver
	kubeErr  error
}

// kubeResolver returns the Env's pod resolver, built (and its watch
// started) on first use from e.Kube.
func (e *Env) kubeResolver() (*kube.Resolver, error) {
	e.kubeOnce.Do(func() {
		var opts kube.Options
		if e.Kube != nil {
			opts = *e.Kube
		}
		e.kube, e.kubeErr = kube.NewResolver(opts)
	})
	return e.kube, e.kubeErr
}

// KubeResolver returns the pod resolver of the kube_* decoders, built (and
// its watch started) on first use, for other users of the same watch (the
// host BPF collector's pod labels).
func (e *Env) KubeResolver() (*kube.Resolver, error) { return e.kubeResolver() }

// Close stops what the Env runs in the background (the pod watch of the
// kube_* decoders). Decoders keep working from what is cached.
func (e *Env) Close() {
	e.kubeOnce.Do(func() { e.kubeErr = errClosed })
	if e.kube != nil {
		e.kube.Close()
	}
}

// errClosed is the error of kube decoders built after Env.Close.
var errClosed = errors.New("decoder environment closed")

// prefetchKallsyms is called by the decoders that read kallsyms (ksym,
// kstack) when they are built: it starts reading the table in the
// background, so that it is ready by the first scrape, while the objects
// load.
func (e *Env) prefetchKallsyms() {
	e.ksymsWanted.Store(true)
	e.ksymsPrefetch.Do(func() { go e.kallsyms() })
}

// Warm waits until the kernel state that the decoders built so far need is
// read (today: kallsyms, for ksym and kstack). The exporter calls it before
// serving, so that the memory used to read that state can be given back
// to the system at once. It does nothing when no decoder needs such state.
func (e *Env) Warm() {
	if e.ksymsWanted.Load() {
		_, _ = e.kallsyms() // a failure is reported by Decode
	}
}

func (e *Env) procPath(elem ...string) string {
	root := e.ProcRoot
	if root == "" {
		root = "/proc"
	}
	return joinPath(root, elem)
}

func (e *Env) sysPath(elem ...string) string {
	root := e.SysRoot
	if root == "" {
		root = "/sys"
	}
	return joinPath(root, elem)
}

func joinPath(root string, elem []string) string {
	return strings.TrimSuffix(root, "/") + "/" + strings.Join(elem, "/")
}

func (e *Env) cacheSize() int {
	if e.CacheSize <= 0 {
		return DefaultCacheSize
	}
	return e.CacheSize
}

// newCache returns an LRU of the Env's size. lru.New fails only for a
// non-positive size, which cacheSize rules out.
func newCache[K comparable](e *Env) *lru.Cache[K, []byte] {
	c, err := lru.New[K, []byte](e.cacheSize())
	if err != nil {
		panic(err)
	}
	return c
}

func (e *Env) deviceCache() *lru.Cache[uint64, []byte] {
	e.devCacheOnce.Do(func() { e.devCache = newCache[uint64](e) })
	return e.devCache
}

func (e *Env) ifnameCache() *lru.Cache[uint32, []byte] {
	e.ifCacheOnce.Do(func() { e.ifCache = newCache[uint32](e) })
	return e.ifCache
}

// knownNames lists the registered decoder names, sorted, comma-separated.
func knownNames() string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// textInput is the size passed to decoders that read the text output of an
// earlier decoder of the chain instead of the raw field.
const textInput = 0

// checkSize rejects field widths a decoder cannot read. want lists the
// accepted widths in bytes, ascending.
func checkSize(name string, size int, want ...int) error {
	if size == textInput {
		return fmt.Errorf("%s: must be the first decoder of a chain: it reads the raw %s-byte field", name, orList(want))
	}
	for _, w := range want {
		if size == w {
			return nil
		}
	}
	return fmt.Errorf("%s: size %d not supported (want %s)", name, size, orList(want))
}

// orList formats 1, 2, 4, 8 as "1, 2, 4 or 8".
func orList(ns []int) string {
	var b strings.Builder
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprint(&b, n)
	}
	return b.String()
}

// checkLen is the decode-time twin of checkSize: a decoder's input must be as
// wide as the field it was built for.
func checkLen(name string, in []byte, size int) error {
	if len(in) != size {
		return fmt.Errorf("%s: got %s, want %d", name, plural.Count(len(in), "byte"), size)
	}
	return nil
}

// nativeUint reads an unsigned integer of 1, 2, 4 or 8 bytes in host byte
// order. Other lengths return false.
func nativeUint(in []byte) (uint64, bool) {
	switch len(in) {
	case 1:
		return uint64(in[0]), true
	case 2:
		return uint64(binary.NativeEndian.Uint16(in)), true
	case 4:
		return uint64(binary.NativeEndian.Uint32(in)), true
	case 8:
		return binary.NativeEndian.Uint64(in), true
	}
	return 0, false
}

// nativeInt is nativeUint with sign extension.
func nativeInt(in []byte) (int64, bool) {
	v, ok := nativeUint(in)
	switch len(in) {
	case 1:
		return int64(int8(v)), ok
	case 2:
		return int64(int16(v)), ok
	case 4:
		return int64(int32(v)), ok
	}
	return int64(v), ok
}

// parseDecimal parses the unsigned decimal text written by the uint decoder,
// without allocating. It fails on empty input, non-digits and overflow.
func parseDecimal(in []byte) (uint64, bool) {
	if len(in) == 0 || len(in) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range in {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// readInput returns the integer a decoder gets: the raw field when the decoder
// is first in its chain (size > 0), or the decimal text of an earlier uint
// decoder (size == textInput), as in ebpf_exporter's [uint, syscall] chains.
func readInput(name string, in []byte, size int) (uint64, error) {
	if size == textInput {
		v, ok := parseDecimal(in)
		if !ok {
			return 0, fmt.Errorf("%s: bad number %s", name, Token(in))
		}
		return v, nil
	}
	if err := checkLen(name, in, size); err != nil {
		return 0, err
	}
	v, _ := nativeUint(in)
	return v, nil
}

// hexAddr appends 0x and the lowercase hex digits of v.
func hexAddr(dst []byte, v uint64) []byte {
	return strconv.AppendUint(append(dst, "0x"...), v, 16)
}

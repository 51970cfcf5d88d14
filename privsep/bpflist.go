// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
)

// The "bpf_objects" request: the host's BPF programs, maps and links and
// their holders, for the host BPF collector (package bpfstats). Listing
// other processes' objects takes them by id (BPF_*_GET_FD_BY_ID), which
// needs CAP_SYS_ADMIN; the worker has it, the exporter does not.
//
// The reply is "ok" with one descriptor: a sealed memfd holding the
// listing's wire form (bpfstats.Encode), at most bpfstats.MaxEncoded
// bytes. The worker writes the whole listing, then seals the memfd
// against writing, growing and shrinking; the client refuses a descriptor
// that is not a memfd sealed so or is larger than the bound, reads it
// once and parses it with bpfstats.Decode, which checks every count,
// length, name and id order (FuzzDecode). Only data crosses: no
// descriptor of any listed object leaves the worker, and the request
// takes no argument, so the exporter cannot make the worker open
// anything of its choosing.
const reqBPFObjects = "bpf_objects"

// bpfListTimeout bounds one listing in the worker.
const bpfListTimeout = 30 * time.Second

// wantSeals are the seals the client requires on a listing's memfd.
const wantSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// bpfLister is the worker operation behind "bpf_objects" (realOps has it;
// a worker whose ops lack it answers an error).
type bpfLister interface {
	listBPF() (int, error)
}

// listBPF runs o's listing, or fails when o has none.
func listBPF(o ops) (int, error) {
	l, ok := o.(bpfLister)
	if !ok {
		return -1, errors.New("listing BPF objects is not supported by this helper")
	}
	return l.listBPF()
}

// workerEnumerator is the worker's enumerator, made at the first request
// and kept (with its holders iterator loaded) for the worker's life.
var workerEnumerator struct {
	once sync.Once
	e    *bpfstats.Enumerator
}

func (*realOps) listBPF() (int, error) {
	first := false
	workerEnumerator.once.Do(func() {
		workerEnumerator.e = bpfstats.NewEnumerator(bpfstats.Limits{})
		first = true
	})
	ctx, cancel := context.WithTimeout(context.Background(), bpfListTimeout)
	defer cancel()
	l, err := workerEnumerator.e.List(ctx)
	if first {
		// The first listing loaded the holders iterator against the
		// kernel's BTF: give back what decoding it took, the worker
		// mostly waits.
		debug.FreeOSMemory()
	}
	if err != nil {
		return -1, err
	}
	b, err := bpfstats.Encode(l)
	if err != nil {
		return -1, err
	}
	return sealedMemfd("kernel_exporter-bpf-objects", b)
}

// sealedMemfd returns a memfd holding b, sealed against any change.
func sealedMemfd(name string, b []byte) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("write memfd: %w", err)
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, wantSeals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal memfd: %w", err)
	}
	return fd, nil
}

// ListBPF asks the worker for the host's BPF objects: bpfstats.Lister.
// Errors: the helper's (its listing's error), that it is not running, a
// reply that is not a sealed memfd of at most bpfstats.MaxEncoded bytes,
// and bpfstats.Decode's.
func (c *Client) ListBPF(ctx context.Context) (*bpfstats.Listing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := c.call(reqBPFObjects, "bpf_objects")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readSealed(f)
	if err != nil {
		return nil, fmt.Errorf("privileged helper: BPF listing: %w", err)
	}
	l, err := bpfstats.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("privileged helper: %w", err)
	}
	return l, nil
}

// readSealed reads the whole of f, a memfd that must be sealed with
// wantSeals and hold at most bpfstats.MaxEncoded bytes.
func readSealed(f *os.File) ([]byte, error) {
	fd := int(f.Fd())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("not a memfd: %w", err)
	}
	if seals&wantSeals != wantSeals {
		return nil, fmt.Errorf("memfd seals %#x: want %#x", seals, wantSeals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < 0 || st.Size > bpfstats.MaxEncoded {
		return nil, fmt.Errorf("listing of %d bytes: want at most %d", st.Size, bpfstats.MaxEncoded)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("listing shorter than its size")
		}
		off += n
	}
	return b, nil
}

// Lister returns c as a bpfstats.Lister, or a nil interface for a nil
// client.
func (c *Client) Lister() bpfstats.Lister {
	if c == nil {
		return nil
	}
	return bpfstats.ListerFunc(c.ListBPF)
}

// nameAsExporter gives the worker the command name of the exporter's
// binary: started through /proc/self/exe, it would be "exe". The holders
// iterator it loads for "bpf_objects" is then owned, in the host BPF
// collector's owner label, by the exporter's name, as the exporter's own
// programs are.
func nameAsExporter() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	name := filepath.Base(exe)
	if len(name) > 15 {
		name = name[:15] // TASK_COMM_LEN
	}
	// /proc/self/comm is the thread group leader's, which is what
	// /proc/<pid>/comm and the iterator show (PR_SET_NAME names only the
	// calling thread).
	_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
}

// SPDX-License-Identifier: Apache-2.0

package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadFileRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.yaml")
	if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(p, "config", 5)
	if err != nil || string(got) != "hello" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	_, err = ReadFile(p, "config", 4)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: err = %v, want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "4 bytes") || !strings.Contains(err.Error(), p) {
		t.Errorf("error %q does not name the path and the limit", err)
	}
}

func TestReadFileFIFODoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(p, "config", MaxConfig); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("err = %v, want ErrNotRegular naming a FIFO", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

func TestReadFileDeviceSymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "zero.bpf.o")
	if err := os.Symlink("/dev/zero", p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, "BPF object", MaxObject); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("err = %v, want ErrNotRegular", err)
	}
}

func TestReadFileProcfsZeroSize(t *testing.T) {
	// procfs files report size 0: the limit applies to what is read.
	data, err := ReadFile("/proc/self/status", "procfs", MaxSmall)
	if err != nil || len(data) == 0 {
		t.Fatalf("ReadFile(/proc/self/status) = %d bytes, %v", len(data), err)
	}
	if _, err := ReadFile("/proc/self/status", "procfs", 16); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open("/nonexistent/x", "uprobe target")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
	if strings.Count(err.Error(), "/nonexistent/x") != 1 {
		t.Errorf("error %q should name the path once", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 64 << 10: "64 KiB", 4 << 30: "4 GiB", 100: "100 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestOpenSocket: opening a UNIX socket fails with ENXIO; Open says the
// path is a socket (ErrNotRegular), not "no such device or address".
func TestOpenSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "target.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p, "uprobe target")
	if err == nil {
		f.Close()
		t.Fatal("Open of a socket succeeded")
	}
	want := "uprobe target " + p + ": not a regular file (a socket)"
	if !errors.Is(err, ErrNotRegular) || err.Error() != want {
		t.Fatalf("err = %q, want %q (ErrNotRegular)", err, want)
	}
}

func TestCheckEnvFiles(t *testing.T) {
	ok := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ok, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KX_TEST_A", ok)
	t.Setenv("KX_TEST_B", "")
	t.Setenv("KX_TEST_C", "/dev/zero")
	if err := CheckEnvFiles(5, "KX_TEST_A", "KX_TEST_B", "KX_TEST_UNSET"); err != nil {
		t.Fatalf("regular file within the limit, empty and unset variables: %v", err)
	}
	if err := CheckEnvFiles(4, "KX_TEST_A"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "KX_TEST_A "+ok) {
		t.Fatalf("over the limit: %v, want ErrTooLarge naming KX_TEST_A and the path", err)
	}
	if err := CheckEnvFiles(5, "KX_TEST_A", "KX_TEST_C"); err == nil || err.Error() != "KX_TEST_C /dev/zero: not a regular file (a character device)" {
		t.Fatalf("a device: %v", err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package web

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// TestHardening05WebConfigFile checks that a --web.config.file that is a
// FIFO or a symlink to /dev/zero is refused at once at start-up (the first
// never answered a request, the second grew the process by 0.5 GB a
// second), and that a valid one passes.
func TestHardening05WebConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.yml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yml")
	if err := os.WriteFile(big, []byte("#"+strings.Repeat("x", bounded.MaxConfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{fifo: bounded.ErrNotRegular, zero: bounded.ErrNotRegular, big: bounded.ErrTooLarge} {
		done := make(chan error, 1)
		go func() { done <- CheckConfigFile(path) }()
		select {
		case err := <-done:
			if !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
				t.Errorf("CheckConfigFile(%s) = %v, want %v naming the file", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("CheckConfigFile(%s) did not return within 5s", path)
		}
	}
	good := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(good, []byte("http_server_config: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigFile(good); err != nil {
		t.Errorf("CheckConfigFile(valid) = %v", err)
	}
	if err := CheckConfigFile(""); err != nil {
		t.Errorf("CheckConfigFile(\"\") = %v", err)
	}
}

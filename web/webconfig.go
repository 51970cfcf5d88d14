// SPDX-License-Identifier: Apache-2.0

package web

import (
	"fmt"

	toolkit "github.com/prometheus/exporter-toolkit/web"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// CheckConfigFile checks the --web.config.file at start-up, before
// exporter-toolkit reads it: a regular file of at most bounded.MaxConfig
// bytes (a FIFO, a device such as /dev/zero, or a huge file is refused
// with a *bounded.Error naming it), and valid for exporter-toolkit (TLS
// and basic auth settings, certificate files readable). An empty path
// means no web config.
//
// exporter-toolkit reads the file again at every request (to pick up
// rotated certificates and changed passwords), with no bound of its own:
// the file must be as protected as the binary (docs/security.md).
func CheckConfigFile(path string) error {
	if path == "" {
		return nil
	}
	if _, err := bounded.ReadFile(path, "web config", bounded.MaxConfig); err != nil {
		return fmt.Errorf("--web.config.file: %w", err)
	}
	if err := toolkit.Validate(path); err != nil {
		return fmt.Errorf("--web.config.file %s: %w", path, err)
	}
	return nil
}

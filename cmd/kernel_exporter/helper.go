// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/privsep"
)

// helperCommand declares the hidden privileged-helper command, which the
// exporter starts for itself (package privsep).
func helperCommand(app *kingpin.Application) *command {
	c := app.Command(privsep.Command, "Internal: the privileged helper the exporter starts for itself (see package privsep).").Hidden()
	settings := c.Arg("settings", "Internal: what the helper may load (privsep.Settings).").Strings()
	return &command{clause: c, run: func(e *env) int { return privsep.Main(e.log, *settings) }}
}

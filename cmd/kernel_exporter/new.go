// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/scaffold"
)

// newCommand declares the new command, which writes a program to start
// from (package scaffold).
func newCommand(app *kingpin.Application) *command {
	c := scaffold.AddCommand(app)
	return &command{clause: c.Clause(), run: func(e *env) int { return c.Run(e.stdout, e.stderr) }}
}

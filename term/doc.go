// SPDX-License-Identifier: Apache-2.0

// Package term is the terminal mode of kernel_exporter: the hist and top
// commands, which show one program's maps (or, for top's built-in views,
// the host's BPF programs) to a person at a terminal, with no server, no
// port and no Prometheus.
//
// The model is the dump command's (package dump), run in a loop. The
// exporter loads the one config named on the command line (a bundled
// program, or <--config.dir>/<name>.yaml) with serve's flags and failure
// rules; once its load has ended, Run reads a baseline snapshot
// (collector.Status.Read), then every --interval reads again and prints
// what changed since the previous read:
//
//   - hist prints each histogram as bcc's tools do (Hist, WriteHist): per
//     label set a header line ("device = vda, operation = read"), then one
//     row per bucket with its range, the observations of the interval (the
//     delta of the cumulative buckets, since bcc clears its maps every
//     interval) and a bar of '*' scaled to the largest count. Output
//     scrolls, one block per interval, like biolatency 1. After the
//     tables, a line per program that ran 0 times in the interval
//     (package runcount: BPF run-time statistics are on while hist runs).
//   - top shows every counter of the program, one row per label set, with
//     its rate per second over the interval and its total, sorted by rate
//     (Rates, WriteTop), redrawn in place on the alternate screen and cut
//     to the terminal's height.
//
// top redraws a View (Redraw): a program's counters, or one of the
// built-in views named instead of a program (Builtin; cmd/kernel_exporter
// lists them, and their names are reserved): top bpf (BPFView) shows every
// BPF program of the host as bpftop does.
//
// On Ctrl-C (the context is done), after --count intervals, or on a read
// failure, Run restores the terminal and closes the exporter, which detaches
// and unloads every program and map it loaded.
//
// Everything printed that comes from outside (label values decoded from
// the kernel, names from a user's config) goes through printable.String
// first: control characters (C0, DEL, C1) and Unicode format characters
// (bidi overrides, zero-width) are written as \xNN or \uNNNN, invalid
// UTF-8 becomes U+FFFD, and label values are cut to MaxLabelWidth runes, so
// that no value can move the cursor, change colours or hide text.
package term

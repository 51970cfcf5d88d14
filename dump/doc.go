// SPDX-License-Identifier: Apache-2.0

// Package dump is the one-shot mode of kernel_exporter (the dump command):
// load the configs, let their programs count for a while, print every
// metric once to standard output, detach everything and exit. It is meant
// for incident tickets, scripts, and checking a new program without
// running a server.
//
// The model is the HTTP handler's, run once: the exporter loads every
// config as the server does (the same flags, the same failure rules: one
// failing config never stops the others), Run waits Options.Duration after
// the loads have ended, then Write reads every config that is up
// (collector.Status.Read) and gathers the exporter's registry, which holds
// the status self-metrics (kernel_exporter_config_up,
// kernel_exporter_config_error_info, kernel_exporter_program_attached, the
// scrape self-metrics...) but not the Go runtime and process collectors.
//
// Two output formats:
//
//   - text: the Prometheus text exposition 0.0.4, written by
//     exposition.Write exactly as GET /metrics serves it;
//   - json: prom2json's format (a JSON array of families, each with its
//     name, help, type and metrics; values as strings, histogram buckets
//     as a map from upper bound to cumulative count), built with the
//     prom2json library from the text exposition parsed back by expfmt, in
//     the same family order as the text.
//
// Exit codes (Run's result): ExitOK when every config was up and the whole
// output was written; ExitFailed when a config failed (or was still
// loading when the dump was interrupted), a map read or the gathering of
// a self-metric failed (what could be read is still printed), or standard
// output could not be written. Bad flags are the caller's (kernel_exporter
// exits 2).
package dump

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	toolkit "github.com/prometheus/exporter-toolkit/web"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// The flags of cloudflare/ebpf_exporter that kernel_exporter has under
// another name or with another model, accepted so that a migrating user's
// unit file keeps working (docs/migrating.md lists each one). The flags both
// have under the same name (--config.dir, --config.names, --config.check,
// --config.strict, --web.listen-address, --web.telemetry-path, --btf.path,
// --capabilities.keep) are main's own.

// maxSkipCacheSize bounds --config.skip-cache-size, which is accepted and
// range-checked but sizes nothing (see refLoadFlags.SkipCacheSize).
const maxSkipCacheSize = 1 << 30

// refLogFlags holds the reference's logging flags, which every command
// takes.
type refLogFlags struct {
	// Debug is --debug: log at debug level (the reference's libbpf debug
	// output; the verifier's log of a failing program is in the error).
	Debug bool
	// NoTimestamps is --log.no-timestamps: log lines carry no time.
	NoTimestamps bool
}

// addRefLogFlags declares the reference's logging flags on app.
func addRefLogFlags(app *kingpin.Application) *refLogFlags {
	f := &refLogFlags{}
	app.Flag("debug", "cloudflare/ebpf_exporter's flag: log at debug level (as --log.level=debug). Its /maps dump of raw maps is not served: `kernel_exporter dump` prints every metric once.").BoolVar(&f.Debug)
	app.Flag("log.no-timestamps", "Log lines without their time (for journald, which adds its own).").BoolVar(&f.NoTimestamps)
	return f
}

// apply applies --debug to the log config.
func (f *refLogFlags) apply(logCfg *promslog.Config) error {
	if !f.Debug {
		return nil
	}
	if logCfg.Level == nil {
		logCfg.Level = promslog.NewLevel()
	}
	if err := logCfg.Level.Set("debug"); err != nil {
		return fmt.Errorf("--debug: %w", err)
	}
	return nil
}

// refLoadFlags holds the reference's flags about loading configs, and the
// compatibility switch, which the commands that load configs take.
type refLoadFlags struct {
	// SkipCacheSize is --config.skip-cache-size, the size of the
	// reference's cache of keys a decoder skipped. Every metric's key
	// cache here (--decoder.cache-size) remembers skipped keys too, so it
	// has no effect beyond its range check.
	SkipCacheSize int
	// Compat is --compat.ebpf-exporter (see exporter.Options.Compat).
	Compat bool
	// DefaultNamespace is --config.default-namespace: the namespace of
	// configs that set none. Empty: "ebpf_exporter" with Compat, else
	// config.DefaultNamespace.
	DefaultNamespace string
}

// addRefLoadFlags declares the reference's load flags on c.
func addRefLoadFlags(c *kingpin.CmdClause) *refLoadFlags {
	f := &refLoadFlags{}
	c.Flag("config.skip-cache-size", fmt.Sprintf("cloudflare/ebpf_exporter's flag, 0 to %d, accepted with no effect: the key cache of every metric (--decoder.cache-size) already remembers keys a decoder skipped.", maxSkipCacheSize)).Default("0").IntVar(&f.SkipCacheSize)
	c.Flag("compat.ebpf-exporter", "Output as cloudflare/ebpf_exporter does, for migrating users: metric names prefixed ebpf_exporter_ for configs that set no namespace, and decoders print what it prints where the two differ (docs/migrating.md).").BoolVar(&f.Compat)
	c.Flag("config.default-namespace", "Prefix of the metric names of configs that set no namespace. Default: kernel, or ebpf_exporter with --compat.ebpf-exporter.").StringVar(&f.DefaultNamespace)
	return f
}

// namespace returns the namespace of configs that set none: the flag's,
// else "ebpf_exporter" with Compat, else "" (config.DefaultNamespace).
func (f *refLoadFlags) namespace() string {
	switch {
	case f.DefaultNamespace != "":
		return f.DefaultNamespace
	case f.Compat:
		return "ebpf_exporter"
	}
	return ""
}

// check checks the flags; errors name the flag.
func (f *refLoadFlags) check() error {
	if f.SkipCacheSize < 0 || f.SkipCacheSize > maxSkipCacheSize {
		return fmt.Errorf("--config.skip-cache-size %d: must be 0 to %d", f.SkipCacheSize, maxSkipCacheSize)
	}
	if ns := f.DefaultNamespace; ns != "" {
		if err := config.CheckNamespace(ns); err != nil {
			return fmt.Errorf("--config.default-namespace: %w", err)
		}
	}
	return nil
}

// applySystemdFD turns a --web.listen-address of fd://0 (the reference's
// way of taking systemd's socket) into --web.systemd-socket. Errors name
// the flag.
func applySystemdFD(web *toolkit.FlagConfig) error {
	if web == nil || web.WebListenAddresses == nil {
		return nil
	}
	addrs := *web.WebListenAddresses
	var fds []string
	for _, a := range addrs {
		if strings.HasPrefix(a, "fd://") {
			fds = append(fds, a)
		}
	}
	if len(fds) == 0 {
		return nil
	}
	if len(addrs) != 1 || fds[0] != "fd://0" {
		return fmt.Errorf("--web.listen-address %s: of cloudflare/ebpf_exporter's fd://<n> addresses only fd://0, given alone, is accepted (as --web.systemd-socket, which serves every socket systemd passes)", printable.Cut(strings.Join(fds, ","), 64))
	}
	on := true
	if web.WebSystemdSocket == nil {
		web.WebSystemdSocket = &on
	} else {
		*web.WebSystemdSocket = true
	}
	*web.WebListenAddresses = nil
	return nil
}

// logger returns log without record times when NoTimestamps is set (the
// slog handlers leave out a zero time).
func (f *refLogFlags) logger(log *slog.Logger) *slog.Logger {
	if !f.NoTimestamps {
		return log
	}
	return slog.New(noTimeHandler{log.Handler()})
}

// noTimeHandler passes records on with their time zeroed.
type noTimeHandler struct{ h slog.Handler }

func (n noTimeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return n.h.Enabled(ctx, l)
}

func (n noTimeHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return n.h.Handle(ctx, r)
}

func (n noTimeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return noTimeHandler{n.h.WithAttrs(as)}
}

func (n noTimeHandler) WithGroup(name string) slog.Handler {
	return noTimeHandler{n.h.WithGroup(name)}
}

// skipCacheNote is logged when --config.skip-cache-size is given.
func (f *refLoadFlags) skipCacheNote(log *slog.Logger) {
	if f.SkipCacheSize > 0 {
		log.Info("--config.skip-cache-size has no effect: each metric's key cache (--decoder.cache-size) remembers skipped keys", "value", strconv.Itoa(f.SkipCacheSize))
	}
}

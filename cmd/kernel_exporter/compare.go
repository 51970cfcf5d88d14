// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"

	"github.com/kernel-exporter/kernel_exporter/compare"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// compareFlags are the arguments and flags of compare.
type compareFlags struct {
	base, new                            string
	start, end                           string
	baseStart, baseEnd, newStart, newEnd string
	client                               compare.ClientOptions
	hostLabel, maxBytes, format          string
	ignore                               []string
	maxSeries, concurrency, top          int
	timeout                              time.Duration

	// Set by check.
	opts compare.Options
}

// compareCommand declares compare: rank the kernel_* signals that changed
// between two sets of hosts or two windows, from Prometheus (package
// compare, docs/compare.md).
func compareCommand(app *kingpin.Application) *command {
	c := app.Command("compare", "Rank the kernel_* signals that changed between two sets of hosts (BASE and NEW selectors over one window) or two windows (--base.* and --new.*), from what Prometheus holds: counters as per-host rates, histograms by quantile and distribution, ranked by how much and how consistently the hosts changed. See docs/compare.md.")
	f := &compareFlags{}
	c.Arg("base", `PromQL label selector of the base hosts, as '{os="jessie"}' ('{}': every host).`).Required().StringVar(&f.base)
	c.Arg("new", "PromQL label selector of the new hosts; with --base.* and --new.* windows it defaults to BASE.").StringVar(&f.new)
	c.Flag("prometheus.url", "URL of Prometheus (or anything serving its HTTP query API), as http://localhost:9090.").Required().StringVar(&f.client.URL)
	c.Flag("prometheus.bearer-token-file", "File holding a bearer token sent to Prometheus.").StringVar(&f.client.BearerTokenFile)
	c.Flag("prometheus.username", "Basic auth user name.").StringVar(&f.client.Username)
	c.Flag("prometheus.password-file", "File holding the basic auth password.").StringVar(&f.client.PasswordFile)
	c.Flag("prometheus.tls.ca-file", "CA certificates (PEM) that verify Prometheus' certificate.").StringVar(&f.client.CAFile)
	c.Flag("prometheus.tls.cert-file", "Client certificate (PEM).").StringVar(&f.client.CertFile)
	c.Flag("prometheus.tls.key-file", "Client certificate's key (PEM).").StringVar(&f.client.KeyFile)
	c.Flag("prometheus.tls.insecure-skip-verify", "Do not verify Prometheus' certificate.").BoolVar(&f.client.InsecureSkipVerify)
	c.Flag("start", "Start of the window of both selectors: RFC 3339 or unix seconds (default: an hour before --end).").StringVar(&f.start)
	c.Flag("end", "End of the window of both selectors: RFC 3339 or unix seconds (default: now).").StringVar(&f.end)
	c.Flag("base.start", "Start of the base window (with --base.end, --new.start, --new.end instead of --start and --end).").StringVar(&f.baseStart)
	c.Flag("base.end", "End of the base window.").StringVar(&f.baseEnd)
	c.Flag("new.start", "Start of the new window.").StringVar(&f.newStart)
	c.Flag("new.end", "End of the new window.").StringVar(&f.newEnd)
	c.Flag("host.label", "Label that tells hosts apart.").Default("instance").StringVar(&f.hostLabel)
	c.Flag("ignore-label", "Label left out of the signals' label sets besides --host.label and the selectors' labels, such as a per-host hostname (repeatable).").StringsVar(&f.ignore)
	c.Flag("query.max-series", fmt.Sprintf("Most series fetched over both sides, 1 to %d: more is refused before they are fetched.", compare.MaxMaxSeries)).Default(strconv.Itoa(compare.DefaultMaxSeries)).IntVar(&f.maxSeries)
	c.Flag("query.max-bytes", "Largest response body, as 32MiB (1KiB to 1GiB).").Default("32MiB").StringVar(&f.maxBytes)
	c.Flag("query.timeout", "Time each query may take, 1ms to 10m.").Default(compare.DefaultTimeout.String()).DurationVar(&f.timeout)
	c.Flag("query.concurrency", "Queries in flight, 1 to 64.").Default(strconv.Itoa(compare.DefaultConcurrency)).IntVar(&f.concurrency)
	c.Flag("format", "Output format: table or json.").Default(compare.FormatTable).EnumVar(&f.format, compare.FormatTable, compare.FormatJSON)
	c.Flag("top", "Rows written, best first (0: every row).").Default("20").IntVar(&f.top)
	return &command{clause: c, check: f.check, quiet: true, run: f.run}
}

// parseTime reads RFC 3339 or unix seconds (a fraction allowed).
func parseTime(flag, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) && v >= 0 && v < 1e11 {
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(frac*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("%s %s: want RFC 3339 (2026-11-29T03:00:00Z) or unix seconds", flag, printable.Quote(s, 64))
}

// check checks compare's flags and builds the options.
func (f *compareFlags) check() error {
	o := &f.opts
	var err error
	if o.Base.Selector, err = compare.ParseSelector(f.base); err != nil {
		return fmt.Errorf("BASE: %w", err)
	}
	twoWindows := f.baseStart != "" || f.baseEnd != "" || f.newStart != "" || f.newEnd != ""
	if twoWindows {
		if f.start != "" || f.end != "" {
			return errors.New("--start and --end exclude --base.* and --new.*")
		}
		for _, v := range []struct {
			flag, s string
			t       *time.Time
		}{{"--base.start", f.baseStart, &o.Base.Start}, {"--base.end", f.baseEnd, &o.Base.End}, {"--new.start", f.newStart, &o.New.Start}, {"--new.end", f.newEnd, &o.New.End}} {
			if v.s == "" {
				return fmt.Errorf("%s: missing: two windows need --base.start, --base.end, --new.start and --new.end", v.flag)
			}
			if *v.t, err = parseTime(v.flag, v.s); err != nil {
				return err
			}
		}
		o.New.Selector = o.Base.Selector
		if f.new != "" {
			if o.New.Selector, err = compare.ParseSelector(f.new); err != nil {
				return fmt.Errorf("NEW: %w", err)
			}
		}
	} else {
		if f.new == "" {
			return errors.New("NEW: missing: give two selectors, or one with --base.* and --new.* windows")
		}
		if o.New.Selector, err = compare.ParseSelector(f.new); err != nil {
			return fmt.Errorf("NEW: %w", err)
		}
		end := time.Now()
		if f.end != "" {
			if end, err = parseTime("--end", f.end); err != nil {
				return err
			}
		}
		start := end.Add(-time.Hour)
		if f.start != "" {
			if start, err = parseTime("--start", f.start); err != nil {
				return err
			}
		}
		o.Base.Start, o.Base.End, o.New.Start, o.New.End = start, end, start, end
	}
	for _, s := range []struct {
		name       string
		start, end time.Time
	}{{"base", o.Base.Start, o.Base.End}, {"new", o.New.Start, o.New.End}} {
		if s.end.Sub(s.start) < time.Second {
			return fmt.Errorf("%s window %s to %s: the end must be at least 1s after the start", s.name, s.start.UTC().Format(time.RFC3339), s.end.UTC().Format(time.RFC3339))
		}
	}
	if f.maxSeries < 1 || f.maxSeries > compare.MaxMaxSeries {
		return fmt.Errorf("--query.max-series %d: must be 1 to %d", f.maxSeries, compare.MaxMaxSeries)
	}
	b, err := units.ParseBase2Bytes(f.maxBytes)
	if err != nil || b < units.KiB || b > units.GiB {
		return fmt.Errorf("--query.max-bytes %s: must be 1KiB to 1GiB", printable.Quote(f.maxBytes, 32))
	}
	if f.timeout < time.Millisecond || f.timeout > 10*time.Minute {
		return fmt.Errorf("--query.timeout %v: must be 1ms to 10m", f.timeout)
	}
	if f.concurrency < 1 || f.concurrency > 64 {
		return fmt.Errorf("--query.concurrency %d: must be 1 to 64", f.concurrency)
	}
	if f.top < 0 {
		return fmt.Errorf("--top %d: must not be negative", f.top)
	}
	f.client.MaxBytes = int64(b)
	o.Client, o.HostLabel, o.Ignore = f.client, f.hostLabel, f.ignore
	o.MaxSeries, o.Timeout, o.Concurrency = f.maxSeries, f.timeout, f.concurrency
	return nil
}

// run queries, ranks and writes the table (compare.Run). Exit code 1 when
// Prometheus cannot answer.
func (f *compareFlags) run(e *env) int {
	ctx, stop := signalContext(e.log)
	defer stop()
	res, err := compare.Run(ctx, f.opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "kernel_exporter: compare: %v\n", err)
		return 1
	}
	if err := compare.Write(e.stdout, res, f.format, f.top); err != nil {
		fmt.Fprintf(e.stderr, "kernel_exporter: compare: %v\n", err)
		return 1
	}
	return 0
}

// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// Limits of a config. Every number and list read from YAML is checked
// against one of them, so that no config can make the exporter allocate
// without bound, overflow an offset or panic. docs/security.md lists them.
const (
	// MaxFileSize bounds a <name>.yaml file (bounded.MaxConfig, 1 MiB).
	MaxFileSize = bounded.MaxConfig

	// MaxConfigName bounds a config name (the file name without .yaml), in
	// bytes; see CheckName.
	MaxConfigName = 64
	// MaxNamespace bounds the namespace, in bytes.
	MaxNamespace = 64
	// MaxNameLen bounds metric and label names, in bytes (without the
	// namespace).
	MaxNameLen = 128
	// MaxHelp bounds a metric's help text, in bytes.
	MaxHelp = 1024
	// MaxMetrics bounds the metrics of one config: counters, gauges and
	// histograms, each value of a struct value counting as one.
	MaxMetrics = 256
	// MaxLabels bounds the labels of one metric (the bucket label included).
	MaxLabels = 32
	// MaxDecoders bounds the decoder chain of one label.
	MaxDecoders = 16

	// MaxLabelSize bounds a label's size, in bytes (the size is at least 1).
	MaxLabelSize = 4096
	// MaxPadding bounds a label's padding, in bytes.
	MaxPadding = 4096
	// MaxKeySize bounds the sum of every label's size and padding, i.e. the
	// map key the labels describe, in bytes. A BPF program builds keys on
	// its 512-byte stack (MAX_BPF_STACK), so real keys are smaller; the
	// bound leaves room for keys copied from map values.
	MaxKeySize = 4096

	// MaxBuckets bounds the buckets of one histogram: bucket_max -
	// bucket_min + 1 for exp2, exp2zero and linear, the number of
	// bucket_keys for fixed.
	MaxBuckets = 4096
	// MaxValueSlots bounds the slots of a histogram with slots_in_value
	// (its map's value is that many u64 counts): the 32 KiB a per-CPU
	// map's value may take (PCPU_MIN_UNIT_SIZE).
	MaxValueSlots = 4096
	// MaxSlot bounds every slot number: bucket_min, bucket_max, sum_bucket
	// and bucket_keys. It is 2^53, the largest integer that a float64 (the
	// type of bucket_keys and of bucket bounds) holds exactly.
	MaxSlot = 1 << 53
	// MaxMaxSeries bounds max_series. A series costs its label strings and,
	// for a histogram, 8 bytes per bucket while a scrape is built; a
	// million series is already more than Prometheus ingests from one
	// target by default, and the BPF map's own size bounds the series a
	// read can see.
	MaxMaxSeries = 1_000_000

	// MaxRegexps bounds the patterns of one regexp decoder.
	MaxRegexps = 256
	// MaxRegexpsTotal bounds the patterns of all regexp decoders of one
	// config.
	MaxRegexpsTotal = 1024
	// MaxRegexpLen bounds one pattern, in bytes.
	MaxRegexpLen = 1024
	// MaxRegexpCost bounds the estimated instructions of one compiled
	// pattern (a counted repetition x{n} costs n times x).
	MaxRegexpCost = 10_000
	// MaxRegexpCostTotal bounds the estimated instructions of all patterns
	// of one config (a compiled instruction takes about 200 bytes).
	MaxRegexpCostTotal = 100_000
	// MaxStaticMap bounds the entries of one static_map decoder: enough
	// for every TCP or UDP port. Unlike other mappings (MaxMapping), a
	// static_map is decoded in linear time (Decoder.UnmarshalYAML).
	MaxStaticMap = 65536
	// MaxStaticMapTotal bounds the static_map entries of one config (the
	// 1 MiB file holds about 100,000 short entries).
	MaxStaticMapTotal = 131072
	// MaxStaticKey bounds a static_map key (the decoded text it matches),
	// in bytes.
	MaxStaticKey = 256
	// MaxStaticValue bounds a static_map value (a label value), in bytes.
	MaxStaticValue = 1024

	// MaxProbes bounds each of the uprobes, usdt and perf_events lists.
	MaxProbes = 256
	// MaxProgramName bounds a BPF program name (a C function name), in
	// bytes.
	MaxProgramName = 128
	// MaxPath bounds a uprobe or USDT binary path, in bytes (PATH_MAX).
	MaxPath = 4096
	// MaxSymbol bounds a symbol name (uprobe symbol, USDT provider and
	// name, kaddrs, attach_to functions), in bytes. The kernel's
	// KSYM_NAME_LEN is 512.
	MaxSymbol = 512
	// MaxOffset bounds a uprobe offset, in bytes: it lies inside the
	// target binary, which is at most bounded.MaxTarget (4 GiB) long.
	MaxOffset = bounded.MaxTarget
	// MaxPID bounds a pid: the kernel's PID_MAX_LIMIT (2^22).
	MaxPID = 1 << 22
	// MaxPerfFrequency bounds a perf event's frequency, in samples per
	// second per CPU: the kernel's default perf_event_max_sample_rate.
	MaxPerfFrequency = 100_000
	// MaxPerfPeriod bounds a perf event's period: the kernel refuses
	// periods with bit 63 set.
	MaxPerfPeriod = 1<<63 - 1
	// MaxKaddrs bounds the kaddrs list.
	MaxKaddrs = 256
	// MaxAlternatives bounds the alternatives groups, the choices of a
	// group and the programs of a choice (each).
	MaxAlternatives = 64
	// MaxAttachTo bounds the attach_to entries.
	MaxAttachTo = 256
	// MaxFeatures bounds requires.features.
	MaxFeatures = 32
	// MaxKernelVersion bounds requires.kernel, in bytes.
	MaxKernelVersion = 32

	// MaxNodes bounds the YAML nodes of a config, counting each alias as
	// the nodes it stands for.
	MaxNodes = 1 << 20
	// MaxDepth bounds the nesting of YAML nodes (aliases expanded).
	MaxDepth = 64
	// MaxMapping bounds the entries of any YAML mapping of a config:
	// yaml.v3 checks a mapping for duplicate keys by comparing every pair,
	// so a 1 MiB mapping of 100,000 entries took minutes to decode.
	MaxMapping = 4096
	// MaxMappingWork bounds the sum over the YAML mappings of a config of
	// their entries squared (aliases expanded): what decoding costs. 2^26
	// is 4 mappings of MaxMapping entries, well under a second.
	MaxMappingWork = 1 << 26

	// MaxToken is the longest value from a config file that errors quote
	// (see Quote).
	MaxToken = 24
)

// tokenRe is what a value must look like to be quoted in an error.
var tokenRe = regexp.MustCompile(`^[A-Za-z0-9_.+/-]*$`)

// Quote returns s, a value read from a config file, as errors show it:
// double-quoted when it is a short token (at most MaxToken bytes of
// letters, digits and _ . + / -) or one printable ASCII character (the
// punctuation YAML syntax errors name), otherwise only described, as
// "(a string of N bytes)". A config name may point at a secret file, and
// config errors are served on the landing page and in metric labels, so
// they never show more of a file than such a token.
func Quote(s string) string {
	if len(s) <= MaxToken && tokenRe.MatchString(s) || len(s) == 1 && s[0] > ' ' && s[0] < 0x7f {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("(a string of %s)", plural.Count(len(s), "byte"))
}

// MaxListed is how many items an error lists (JoinListed).
const MaxListed = 16

// JoinListed returns n items, each written by item, joined by ", ": at
// most MaxListed of them, then ", and N more" for the rest.
func JoinListed(n int, item func(b *strings.Builder, i int)) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i == MaxListed {
			fmt.Fprintf(&b, ", and %d more", n-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		item(&b, i)
	}
	return b.String()
}

// Sanitize rewrites an error message that may quote values from a config
// file (as decoder errors do: `bad pattern "a("`): every quoted part, in
// "double quotes", `back quotes` or 'single quotes', becomes Quote of its
// content, and the result is safe to show (printable.String). Text outside quotes is kept, so
// Sanitize is meant for messages whose own words are fixed.
func Sanitize(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		c := msg[i]
		switch c {
		case '"':
			if q, err := strconv.QuotedPrefix(msg[i:]); err == nil {
				s, _ := strconv.Unquote(q)
				b.WriteString(Quote(s))
				i += len(q)
				continue
			}
			fallthrough
		case '`', '\'':
			if j := strings.IndexByte(msg[i+1:], c); j >= 0 {
				b.WriteString(Quote(msg[i+1 : i+1+j]))
				i += j + 2
				continue
			}
			// An unterminated quote: hide the rest.
			b.WriteString(Quote(msg[i+1:]))
			i = len(msg)
			continue
		}
		b.WriteByte(c)
		i++
	}
	return printable.String(b.String())
}

// configNameRe is what a config name may hold.
var configNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// CheckName returns an error unless name is a plain config name: 1 to
// MaxConfigName bytes of letters, digits and _ . -, not "." or "..". It
// never holds a "/", so <dir>/<name>.yaml stays inside dir. Load calls it;
// callers that take names from flags should too. The error quotes name
// with %q, truncated to MaxToken bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("config name: empty")
	case len(name) > MaxConfigName:
		return fmt.Errorf("config name %s: longer than %d bytes", shortQ(name), MaxConfigName)
	case name == "." || name == "..":
		return fmt.Errorf("config name %q: not a file name", name)
	case !configNameRe.MatchString(name):
		return fmt.Errorf("config name %s: want letters, digits, _ . - only (no /)", shortQ(name))
	}
	return nil
}

// shortQ quotes s with %q, truncated to MaxToken bytes (on a rune
// boundary), with "..." after a truncated value.
func shortQ(s string) string {
	if len(s) <= MaxToken {
		return fmt.Sprintf("%q", s)
	}
	n := MaxToken
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%q...", s[:n])
}

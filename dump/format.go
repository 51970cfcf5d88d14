// SPDX-License-Identifier: Apache-2.0

package dump

import (
	"fmt"
	"time"
)

// Format is an output format of the dump: FormatText or FormatJSON.
type Format string

const (
	// FormatText is the Prometheus text exposition format 0.0.4.
	FormatText Format = "text"
	// FormatJSON is prom2json's JSON format.
	FormatJSON Format = "json"
)

// DefaultDuration is the default of --duration: long enough for most
// programs to see events, short enough for an interactive check.
const DefaultDuration = 10 * time.Second

// MaxDuration bounds --duration: a dump is a one-shot look, not a
// collection run (serve the metrics for that).
const MaxDuration = 24 * time.Hour

// ParseFormat returns the Format named s ("text" or "json"). The error
// names the flag and the value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatText, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("--format %q: must be %s or %s", s, FormatText, FormatJSON)
}

// CheckDuration returns an error naming the flag and the value unless
// 0 < d <= MaxDuration.
func CheckDuration(d time.Duration) error {
	if d <= 0 || d > MaxDuration {
		return fmt.Errorf("--duration %v: must be more than 0 and at most %v", d, MaxDuration)
	}
	return nil
}

// ParseFlags checks the dump command's flags, --duration (CheckDuration)
// and --format (ParseFormat), and returns the format. The error names the
// flag and the value.
func ParseFlags(d time.Duration, format string) (Format, error) {
	if err := CheckDuration(d); err != nil {
		return "", err
	}
	return ParseFormat(format)
}

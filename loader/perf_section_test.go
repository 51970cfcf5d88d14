// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParsePerfSection(t *testing.T) {
	for sec, want := range map[string]perfSpec{
		"perf_event/type=0,config=3,frequency=1":                                       {typ: 0, config: 3, frequency: 1},
		"perf_event/type=1,config=0,period=1000000":                                    {typ: 1, config: 0, period: 1000000},
		"perf_event/config=0x10,type=4,frequency=99":                                   {typ: 4, config: 16, frequency: 99},
		"perf_event/type=65535,config=18446744073709551615,period=9223372036854775807": {typ: 65535, config: 1<<64 - 1, period: 1<<63 - 1},
	} {
		got, err := parsePerfSection(sec)
		if err != nil {
			t.Errorf("%s: %v", sec, err)
			continue
		}
		if got.typ != want.typ || got.config != want.config || got.frequency != want.frequency || got.period != want.period {
			t.Errorf("%s: got %+v, want %+v", sec, got, want)
		}
		if !strings.Contains(got.what, "(section "+sec+")") {
			t.Errorf("%s: description %q does not name the section", sec, got.what)
		}
	}
	for sec, want := range map[string]string{
		"perf_event/":                                               "no perf event parameters",
		"perf_event/type=1":                                         "missing config",
		"perf_event/config=1,frequency=9":                           "missing type",
		"perf_event/type=1,config=0":                                "missing frequency or period",
		"perf_event/type=1,config=0,frequency=9,period=9":           "frequency and period are exclusive",
		"perf_event/type=1,type=1,config=0,frequency=9":             "parameter type given twice",
		"perf_event/type=65536,config=0,frequency=9":                "type=65536 out of range (0 to 65535)",
		"perf_event/type=1,config=0,frequency=0":                    "frequency=0 out of range (1 to 100000 samples",
		"perf_event/type=1,config=0,frequency=1000001":              "frequency=1000001 out of range",
		"perf_event/type=1,config=0,period=0":                       "period=0 out of range",
		"perf_event/type=1,config=0,period=9223372036854775808":     "period=9223372036854775808 out of range",
		"perf_event/type=1,config=-1,frequency=9":                   "config=-1 is not a non-negative integer",
		"perf_event/type=1,config=18446744073709551616,frequency=9": "config=18446744073709551616 is not a non-negative integer",
		"perf_event/type=1,config=0,frequency=9,cpu=1":              `unknown parameter "cpu"`,
		"perf_event/type=1,config=0,,frequency=9":                   `parameter "" is not key=value`,
		"perf_event/type=1 ,config=0,frequency=9":                   "is not a non-negative integer",
	} {
		_, err := parsePerfSection(sec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "section "+strconvQuote(sec)) {
			t.Errorf("%s: error %v, want one naming the section with %q", sec, err, want)
		}
	}
}

func strconvQuote(s string) string { return `"` + s + `"` }

// FuzzPerfSection feeds arbitrary section names to parsePerfSection: never
// a panic; an accepted one has its values in range and exactly one of
// frequency and period; errors name the section.
func FuzzPerfSection(f *testing.F) {
	for _, s := range []string{
		"perf_event/type=0,config=3,frequency=1",
		"perf_event/type=1,config=0,period=1000000",
		"perf_event/type=0x1,config=0,frequency=99",
		"perf_event/type=1,config=0,frequency=9,period=9",
		"perf_event/",
		"perf_event/a=b=c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sec string) {
		s, err := parsePerfSection(sec)
		if err != nil {
			if utf8.ValidString(sec) && !strings.Contains(err.Error(), "section ") {
				t.Fatalf("error %q does not name the section", err)
			}
			return
		}
		if s.typ > maxPerfType || (s.frequency == 0) == (s.period == 0) || s.frequency > maxPerfFrequency || s.period > maxPerfPeriod {
			t.Fatalf("%q accepted as %+v", sec, s)
		}
	})
}

// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// TestUnknownKeyDidYouMean: a misspelt key below the top level gets the
// closest keys of its mapping, as a misspelt flag does; a key near no
// known one gets none, and a key that is not a plain token is described,
// never quoted.
func TestUnknownKeyDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"metrics:\n  counters:\n    - name: x_total\n      help: x\n      lables: []\n",
			`bad.yaml:5: unknown key "lables" in counter (did you mean "labels"?)`},
		{"metrics:\n  histograms:\n    - name: x_seconds\n      help: x\n      bucket_typ: exp2\n",
			`bad.yaml:5: unknown key "bucket_typ" in histogram (did you mean "bucket_type", "bucket_min" or "bucket_max"?)`},
		{"metrics:\n  counters:\n    - name: x_total\n      help: x\n      labels:\n        - name: a\n          sise: 4\n",
			`bad.yaml:7: unknown key "sise" in label (did you mean "size"?)`},
		{"metrics:\n  counters:\n    - name: x_total\n      help: x\n      labels:\n        - name: a\n          size: 4\n          decoders:\n            - nme: uint\n",
			`bad.yaml:9: unknown key "nme" in decoder (did you mean "name"?)`},
		{"metrics:\n  countres: []\n", `bad.yaml:2: unknown key "countres" in metrics (did you mean "counters"?)`},
		{"metrics:\n  counters:\n    - name: x_total\n      help: x\n      zzzzzzzz: 1\n", `bad.yaml:5: unknown key "zzzzzzzz" in counter`},
	} {
		_, err := Parse("bad.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// A key of the file's content that is no token: no quote, no hint.
	_, err := Parse("bad.yaml", []byte("metrics:\n  counters:\n    - name: x_total\n      help: x\n      \"s3cr3t p4ss\": 1\n"))
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("non-token key: error %v, want it described, not quoted", err)
	}
}

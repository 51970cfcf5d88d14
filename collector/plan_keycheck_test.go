// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// sigSpec is the object of issue 32's signal counter: signals_total keyed
// by struct sig_key { __u32 sig; char comm[16]; } (20 bytes), pids_total
// by struct pid_key { __u32 pid; __u32 tgid; char tag[4]; } and
// nobtf_total by 20-byte keys without BTF.
func sigSpec() *ebpf.CollectionSpec {
	u32 := &btf.Typedef{Name: "__u32", Type: &btf.Int{Name: "unsigned int", Size: 4}}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	key := &btf.Struct{Name: "sig_key", Size: 20, Members: []btf.Member{
		{Name: "sig", Type: u32},
		{Name: "comm", Type: &btf.Array{Index: u32, Type: char, Nelems: 16}, Offset: 32},
	}}
	pkey := &btf.Struct{Name: "pid_key", Size: 12, Members: []btf.Member{
		{Name: "pid", Type: u32},
		{Name: "tgid", Type: u32, Offset: 32},
		{Name: "tag", Type: &btf.Array{Index: u32, Type: char, Nelems: 4}, Offset: 64},
	}}
	return &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"signals_total": {Name: "signals_total", Type: ebpf.Hash, KeySize: 20, ValueSize: 8, MaxEntries: 64, Key: key, Value: &btf.Int{Size: 8}},
		"pids_total":    {Name: "pids_total", Type: ebpf.Hash, KeySize: 12, ValueSize: 8, MaxEntries: 64, Key: pkey, Value: &btf.Int{Size: 8}},
		"nobtf_total":   {Name: "nobtf_total", Type: ebpf.Hash, KeySize: 20, ValueSize: 8, MaxEntries: 64},
	}}
}

// sigYAML is a counter of map with labels, each "name size decoder".
func sigYAML(mapName string, labels ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "metrics:\n  counters:\n    - name: %s\n      help: h\n      labels:\n", mapName)
	for _, l := range labels {
		var name, dec string
		var size int
		fmt.Sscanf(l, "%s %d %s", &name, &size, &dec)
		fmt.Fprintf(&b, "        - name: %s\n          size: %d\n          decoders:\n            - name: %s\n", name, size, dec)
	}
	return b.String()
}

// TestCheckKeyLabels: labels listed with their sizes that contradict the
// key's BTF type are refused at Compile (so at --config.check and at
// load), each error naming the file, the label and the field it lands
// on, with both layouts and their sums.
func TestCheckKeyLabels(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"swapped", sigYAML("signals_total", "comm 16 string", "signal 4 signal"),
			`x.yaml:6: metrics.counters[0].labels[0]: label "comm" is bytes 0 to 16 of the key, but key field "comm" is bytes 4 to 20 ("char"[16]); it lands on key field "sig" (bytes 0 to 4, "__u32") and part of key field "comm" (bytes 4 to 20, "char"[16]) (labels: "comm" 0-16, "signal" 16-20, 20 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)`},
		{"wrong size", sigYAML("signals_total", "signal 8 signal", "comm 16 string"),
			`x.yaml:6: metrics.counters[0].labels[0]: label "signal" is bytes 0 to 8 of the key, which do not line up with a field of the key: it lands on key field "sig" (bytes 0 to 4, "__u32") and part of key field "comm" (bytes 4 to 20, "char"[16]) (labels: "signal" 0-8, "comm" 8-24, 24 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)`},
		{"wrong size of the last label", sigYAML("signals_total", "signal 4 signal", "comm 8 string"),
			`x.yaml:10: metrics.counters[0].labels[1]: label "comm" is bytes 4 to 12 of the key, but key field "comm" is bytes 4 to 20 ("char"[16]); it lands on part of key field "comm" (bytes 4 to 20, "char"[16]) (labels: "signal" 0-4, "comm" 4-12, 12 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)`},
		{"wrong size without BTF", sigYAML("nobtf_total", "signal 8 signal", "comm 16 string"),
			`x.yaml:5: metrics.counters[0].labels: label sizes add up to 24 bytes, but map "nobtf_total" has 20-byte keys (labels: "signal" 0-8, "comm" 8-24)`},
		{"string over an integer", sigYAML("signals_total", "signal 4 string", "comm 16 string"),
			`x.yaml:6: metrics.counters[0].labels[0]: label "signal" is bytes 0 to 4 of the key, key field "sig" (bytes 0 to 4, "__u32"), an integer, but its decoder "string" reads a C string: use uint or another integer decoder (labels: "signal" 0-4, "comm" 4-20, 20 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)`},
		{"integer over a char array", sigYAML("pids_total", "pid 4 uint", "tgid 4 uint", "tag 4 uint"),
			`x.yaml:14: metrics.counters[0].labels[2]: label "tag" is bytes 8 to 12 of the key, key field "tag" (bytes 8 to 12, "char"[4]), a char array, but its decoder "uint" reads an integer: use string (labels: "pid" 0-4, "tgid" 4-8, "tag" 8-12, 12 bytes; map "pids_total" key struct "pid_key": "pid" 0-4, "tgid" 4-8, "tag" 8-12, 12 bytes)`},
		{"swapped, same sizes", sigYAML("pids_total", "tgid 4 uint", "pid 4 uint", "tag 4 string"),
			`x.yaml:6: metrics.counters[0].labels[0]: label "tgid" is bytes 0 to 4 of the key, but key field "tgid" is bytes 4 to 8 ("__u32"); it lands on key field "pid" (bytes 0 to 4, "__u32") (labels: "tgid" 0-4, "pid" 4-8, "tag" 8-12, 12 bytes; map "pids_total" key struct "pid_key": "pid" 0-4, "tgid" 4-8, "tag" 8-12, 12 bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("x.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(cfg, sigSpec(), decoder.NewEnv(10))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}

// TestCheckKeyLabelsCompat: with --compat.ebpf-exporter (Env.Compat) the
// same mismatch compiles, as the reference accepts it, and the plan
// carries the error as a warning for the caller to log.
func TestCheckKeyLabelsCompat(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte(sigYAML("signals_total", "comm 16 string", "signal 4 signal")))
	if err != nil {
		t.Fatal(err)
	}
	env := decoder.NewEnv(10)
	env.Compat = true
	p, err := Compile(cfg, sigSpec(), env)
	if err != nil {
		t.Fatal(err)
	}
	want := `x.yaml:6: metrics.counters[0].labels[0]: label "comm" is bytes 0 to 16 of the key, but key field "comm" is bytes 4 to 20 ("char"[16]); it lands on key field "sig" (bytes 0 to 4, "__u32") and part of key field "comm" (bytes 4 to 20, "char"[16]) (labels: "comm" 0-16, "signal" 16-20, 20 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)`
	if len(p.Warnings) != 1 || p.Warnings[0].Error() != want {
		t.Fatalf("warnings %q, want [%s]", p.Warnings, want)
	}
	if l := p.Metrics[0].Layout().Labels; len(l) != 2 || l[0].Name != "comm" || l[0].Size != 16 {
		t.Fatalf("layout %+v, want the labels as listed", l)
	}
}

// TestCheckKeyLabelsAccepted: layouts that agree with the key compile
// without warnings: the fields in order, a field skipped with padding, a
// field then its padding bytes, an array element, a plain integer key.
func TestCheckKeyLabelsAccepted(t *testing.T) {
	for _, y := range []string{
		sigYAML("signals_total", "signal 4 signal", "comm 16 string"),
		sigYAML("pids_total", "pid 4 uint", "tgid 4 uint", "tag 4 string"),
		sigYAML("pids_total", "pid 4 uint", "other 4 hex", "tag 4 string"),
		strings.Replace(sigYAML("pids_total", "pid 4 uint", "tag 4 string"), "          size: 4\n", "          size: 4\n          padding: 4\n", 1),
	} {
		cfg, err := config.Parse("x.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(cfg, sigSpec(), decoder.NewEnv(10))
		if err != nil || len(p.Warnings) != 0 {
			t.Fatalf("%s: err %v, warnings %v", y, err, p.Warnings)
		}
	}
}

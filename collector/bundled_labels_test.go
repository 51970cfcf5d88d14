// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// TestBundledLabelsMatchBTF compiles every config of the repository that
// sits next to its object (the bundled programs, the examples, the
// integration test programs) and checks that none has listed labels the
// key's BTF contradicts (config.CheckKeyLabels): the check must refuse
// mistakes, not the layouts the project ships.
func TestBundledLabelsMatchBTF(t *testing.T) {
	var files []string
	for _, glob := range []string{"../programs/*.yaml", "../examples/*.yaml", "../integration/testdata/*/*.yaml", "../integration/testdata/*.yaml"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	n := 0
	for _, f := range files {
		obj := strings.TrimSuffix(f, ".yaml") + ".bpf.o"
		data, err := os.ReadFile(obj)
		if err != nil {
			continue
		}
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(f, y)
		if err != nil {
			continue // the failure tests' bad configs
		}
		spec, err := loader.ParseObject(obj, data)
		if err != nil {
			continue
		}
		p, err := Compile(cfg, spec, &decoder.Env{Compat: true})
		if err != nil {
			t.Logf("SKIP %s: %v", f, err)
			continue
		}
		n++
		for _, w := range p.Warnings {
			t.Errorf("%v", w)
		}
	}
	if n < 20 {
		t.Fatalf("compiled %d configs, want the bundled programs and examples (20 or more)", n)
	}
	t.Logf("%d configs compiled", n)
}

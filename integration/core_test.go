// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"testing"
)

// TestDefaultProgramsUp starts the default set and checks every config is up
// and every program attached.
func TestDefaultProgramsUp(t *testing.T) {
	e := Start(t)
	ms := e.Scrape()
	for _, c := range []string{"timers", "biolatency", "runqlat"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Errorf("config_up{config=%q} = %v, want 1\n%s", c, v, e.Logs())
		}
	}
	if n := ms.Series("kernel_exporter_program_attached", nil); n != 6 {
		t.Errorf("program_attached series = %d, want 6", n)
	}
	if v := ms.Value("kernel_exporter_program_attached", nil); v != 6 {
		t.Errorf("attached programs = %v, want 6", v)
	}
}

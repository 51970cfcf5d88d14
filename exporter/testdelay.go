// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// TestLoadDelayEnv names an environment variable for tests only:
// "<config>=<duration>[,...]" makes each named config's load first sleep
// that long (at most a minute past the load timeout's default), standing in
// for a load that is slow in the kernel (the verifier, a slow disk), which
// cannot be interrupted. Integration tests use it to check start-up order
// and load timeouts.
const TestLoadDelayEnv = "KERNEL_EXPORTER_TEST_LOAD_DELAY"

// testDelay sleeps as TestLoadDelayEnv asks for config name.
func testDelay(name string) error {
	v := os.Getenv(TestLoadDelayEnv)
	if v == "" {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		n, d, ok := strings.Cut(item, "=")
		if !ok || n != name {
			continue
		}
		dur, err := time.ParseDuration(d)
		if err != nil || dur < 0 || dur > DefaultLoadTimeout+time.Minute {
			return fmt.Errorf("%s: bad delay %q for config %s", TestLoadDelayEnv, d, name)
		}
		time.Sleep(dur)
	}
	return nil
}

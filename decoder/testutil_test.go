// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runtimeArch() string { return runtime.GOARCH }

func itoa(v int) string { return strconv.Itoa(v) }

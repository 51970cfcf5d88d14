// SPDX-License-Identifier: Apache-2.0

package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Find returns the binary named by the environment variable env, or else
// the one of the highest version under <module root>/.cache/<dir>/v*/<bin>
// (what tools/<dir>/build.sh writes). The error names both places.
func Find(env, dir, bin string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	pattern := filepath.Join(root, ".cache", dir, "v*", bin)
	found, _ := filepath.Glob(pattern)
	if len(found) == 0 {
		return "", fmt.Errorf("no %s at %s and %s is not set", bin, pattern, env)
	}
	sort.Slice(found, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(found[i])), filepath.Base(filepath.Dir(found[j])))
	})
	return found[len(found)-1], nil
}

// versionLess compares vA.B.C strings numerically.
func versionLess(a, b string) bool {
	pa := strings.Split(strings.TrimPrefix(a, "v"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea != nil || eb != nil {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(pa) < len(pb)
}

// ModuleRoot is the nearest directory at or above the working directory
// (a test's package directory) that has a go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

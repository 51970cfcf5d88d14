// SPDX-License-Identifier: Apache-2.0

package term

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// The commands of the terminal mode.
const (
	CommandHist = "hist"
	CommandTop  = "top"
)

// Bounds of --interval and --count.
const (
	DefaultInterval = time.Second
	MinInterval     = 100 * time.Millisecond
	MaxInterval     = time.Hour
	// MaxCount bounds --count (0 means until Ctrl-C).
	MaxCount = 1_000_000
)

// maxListed bounds the names an error lists (a --config.dir may hold many
// files).
const maxListed = 50

// CheckFlags returns an error naming the flag and the value unless
// MinInterval <= interval <= MaxInterval and 0 <= count <= MaxCount.
func CheckFlags(interval time.Duration, count int) error {
	if interval < MinInterval || interval > MaxInterval {
		return fmt.Errorf("--interval %v: must be %v to %v", interval, MinInterval, MaxInterval)
	}
	if count < 0 || count > MaxCount {
		return fmt.Errorf("--count %d: must be 0 (until Ctrl-C) to %d", count, MaxCount)
	}
	return nil
}

// ParseTarget splits the command's argument into the program and, for
// hist, the metric: "biolatency" or "biolatency.bio_latency_seconds". A
// config name may itself hold dots, so an argument naming an existing
// program as a whole is that program; otherwise it is split at its last
// dot (metric names have none). The program is a bundled program when dir
// is "", else <dir>/<program>.yaml, whose absence is an error listing the
// programs there. top takes no metric. Errors name the command and list
// what exists.
func ParseTarget(command, arg, dir string) (src exporter.Source, metric string, err error) {
	program := arg
	if !exists(arg, dir) {
		if i := strings.LastIndexByte(arg, '.'); i > 0 && i < len(arg)-1 {
			program, metric = arg[:i], arg[i+1:]
		}
	}
	if metric != "" && command != CommandHist {
		return src, "", fmt.Errorf("%s %s: %s takes a program name, not a metric", command, quote(arg), command)
	}
	if err := config.CheckName(program); err != nil {
		return src, "", fmt.Errorf("%s: %w", command, err)
	}
	if !exists(program, dir) {
		return src, "", fmt.Errorf("%s: %w", command, missing(program, dir))
	}
	return exporter.Source{Name: program, Dir: dir}, metric, nil
}

// exists reports whether program is a bundled program (dir "") or has a
// <dir>/<program>.yaml.
func exists(program, dir string) bool {
	if config.CheckName(program) != nil {
		return false
	}
	if dir == "" {
		return slices.Contains(programs.Names(), program)
	}
	st, err := os.Stat(filepath.Join(dir, program+".yaml"))
	return err == nil && st.Mode().IsRegular()
}

// missing is the error for a program that does not exist, listing those
// that do.
func missing(program, dir string) error {
	if dir == "" {
		return fmt.Errorf("no bundled program %s (bundled: %s; give --config.dir for a program of your own)", quote(program), strings.Join(programs.Names(), ", "))
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	for _, m := range matches {
		if n := strings.TrimSuffix(filepath.Base(m), ".yaml"); config.CheckName(n) == nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no program %s in --config.dir %s: it holds no <name>.yaml", quote(program), quote(dir))
	}
	return fmt.Errorf("no program %s in --config.dir %s (it holds: %s)", quote(program), quote(dir), list(names))
}

// list joins names, at most maxListed of them.
func list(names []string) string {
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// quote quotes a value from outside for an error message, cut to 100
// bytes.
func quote(s string) string {
	return printable.Quote(s, 100)
}

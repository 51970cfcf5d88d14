// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// attachUprobes attaches a uprobe or uretprobe program: to the
// <path>:<symbol>[+<offset>] of its section, or, for a bare section, to
// every target listed for it under "uprobes" in the config.
func attachUprobes(k, target string, ps *ebpf.ProgramSpec, prog *ebpf.Program, env *attachEnv) (link.Link, error) {
	if target != "" {
		return attachUprobe(k, target, prog)
	}
	targets := env.uprobes(ps.Name)
	if len(targets) == 0 {
		return nil, fmt.Errorf("program %s has no target: list it under uprobes in the config", ps.Name)
	}
	ml := &multiLink{}
	exes := map[string]*uprobeTarget{}
	for _, u := range targets {
		l, err := attachUprobeTarget(k, u, prog, exes)
		if err != nil {
			ml.Close()
			return nil, err
		}
		ml.add(l)
	}
	return ml.result(), nil
}

// attachUprobeTarget attaches prog to one config target.
func attachUprobeTarget(k string, u config.Uprobe, prog *ebpf.Program, exes map[string]*uprobeTarget) (link.Link, error) {
	where := u.Binary + ":" + u.Symbol
	switch {
	case u.Symbol == "":
		where = fmt.Sprintf("%s@%#x", u.Binary, u.Offset)
	case u.Offset != 0:
		where = fmt.Sprintf("%s+%#x", where, u.Offset)
	}
	if u.PID != 0 {
		where = fmt.Sprintf("%s (pid %d)", where, u.PID)
	}
	tgt, ok := exes[u.Binary]
	if !ok {
		// A bare library name ("libc.so.6") is found as the dynamic
		// loader finds it.
		bin, err := ResolveLibrary(u.Binary)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", k, where, err)
		}
		tgt, err = openUprobeTarget(bin, "uprobe target")
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", k, where, err)
		}
		exes[u.Binary] = tgt
	}
	// Address is a file offset and bypasses cilium/ebpf's symbol lookup
	// (see uprobeTarget): it is never 0.
	opts := &link.UprobeOptions{PID: u.PID, Address: u.Offset}
	if u.Symbol != "" {
		addr, err := tgt.address(u.Symbol, u.Offset)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", k, where, err)
		}
		opts.Address = addr
	}
	if opts.Address == 0 {
		return nil, fmt.Errorf("%s %s: file offset 0 is not a valid probe address", k, where)
	}
	var l link.Link
	var err error
	if k == "uretprobe" {
		l, err = tgt.ex.Uretprobe(u.Symbol, prog, opts)
	} else {
		l, err = tgt.ex.Uprobe(u.Symbol, prog, opts)
	}
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("%s %s: process %d does not exist: %w", k, where, u.PID, err)
		}
		return nil, fmt.Errorf("%s %s: %w", k, where, err)
	}
	return l, nil
}

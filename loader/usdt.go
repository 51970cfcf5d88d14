// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"debug/elf"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// usdtSpecMap is the map of include/kernel_exporter/usdt.bpf.h that holds
// the argument specs of the attached probe sites, keyed by spec id (the
// attachment's BPF cookie).
const usdtSpecMap = "ke_usdt_specs"

// attachUSDT attaches a usdt program at every site of its probe: the one of
// its section (usdt/<path>:<provider>:<name>), or, for a bare "usdt"
// section, each probe listed for it under "usdt" in the config.
func attachUSDT(target string, ps *ebpf.ProgramSpec, prog *ebpf.Program, env *attachEnv) (link.Link, error) {
	var targets []config.USDT
	if target != "" {
		u, err := parseUSDTSection(target)
		if err != nil {
			return nil, err
		}
		u.Program = ps.Name
		targets = []config.USDT{u}
	} else {
		targets = env.usdt(ps.Name)
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("program %s has no target: list it under usdt in the config", ps.Name)
	}
	specs, err := usdtSpecs(env)
	if err != nil {
		return nil, err
	}
	ml := &multiLink{}
	for _, u := range targets {
		if err := attachUSDTTarget(u, prog, specs, env, ml); err != nil {
			ml.Close()
			return nil, err
		}
	}
	return ml.result(), nil
}

// parseUSDTSection parses the target of a usdt/<path>:<provider>:<name>
// section. The path may hold colons; provider and name may not.
func parseUSDTSection(target string) (config.USDT, error) {
	parts := strings.Split(target, ":")
	n := len(parts)
	if n < 3 || parts[n-1] == "" || parts[n-2] == "" || parts[0] == "" {
		return config.USDT{}, fmt.Errorf("section usdt/%s: want usdt/<path>:<provider>:<name>", target)
	}
	return config.USDT{Binary: strings.Join(parts[:n-2], ":"), Provider: parts[n-2], Name: parts[n-1]}, nil
}

// usdtSpecs returns the object's spec map, or nil when the object does not
// include usdt.bpf.h (its programs then read no arguments).
func usdtSpecs(env *attachEnv) (*ebpf.Map, error) {
	if env == nil || env.coll == nil {
		return nil, nil
	}
	m := env.coll.Maps[usdtSpecMap]
	if m == nil {
		return nil, nil
	}
	if m.Type() != ebpf.Array || m.KeySize() != 4 || m.ValueSize() != usdt.SpecSize {
		return nil, fmt.Errorf("map %s: want an array of u32 to %d-byte struct ke_usdt_spec (include kernel_exporter/usdt.bpf.h), got %s of %d-byte keys to %d-byte values",
			usdtSpecMap, usdt.SpecSize, m.Type(), m.KeySize(), m.ValueSize())
	}
	return m, nil
}

// hostMachine is the ELF machine of the running kernel's architecture.
func hostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// attachUSDTTarget attaches prog at each site of one probe. Each site gets
// a fresh spec id, the attachment's cookie, under which its argument spec
// is written into the object's ke_usdt_specs (specs, when not nil) and, for
// an object built with libbpf's usdt.bpf.h, into __bpf_usdt_specs in
// libbpf's layout. A bare binary name is resolved with ResolveBinary.
func attachUSDTTarget(u config.USDT, prog *ebpf.Program, specs *ebpf.Map, env *attachEnv, ml *multiLink) error {
	probe := u.Provider + ":" + u.Name
	bin, err := ResolveBinary(u.Binary)
	if err != nil {
		return fmt.Errorf("usdt %s: %w", u.Binary, err)
	}
	f, err := usdt.Open(bin)
	if err != nil {
		return err
	}
	if f.Machine != hostMachine() {
		return fmt.Errorf("usdt %s: binary is for %v, this machine is %s", bin, f.Machine, runtime.GOARCH)
	}
	sites := f.Find(u.Provider, u.Name)
	if len(sites) == 0 {
		names := f.Names()
		if len(names) == 0 {
			return fmt.Errorf("usdt %s: no probe %s: the binary has no USDT probes (.note.stapsdt)", bin, usdt.Token(u.Provider)+":"+usdt.Token(u.Name))
		}
		if len(names) > 20 {
			names = append(names[:20], "...")
		}
		return fmt.Errorf("usdt %s: no probe %s (probes: %s)", bin, usdt.Token(u.Provider)+":"+usdt.Token(u.Name), strings.Join(names, ", "))
	}
	// The file was opened and checked by usdt.Open; cilium/ebpf only
	// stats it, and never opens it since every site has an Address.
	ex, err := link.OpenExecutable(bin)
	if err != nil {
		return fmt.Errorf("usdt %s: %w", bin, err)
	}
	for _, site := range sites {
		if site.Offset == 0 {
			return fmt.Errorf("usdt %s %s: file offset 0 is not a valid probe address", bin, site.String())
		}
		opts := &link.UprobeOptions{Address: site.Offset, RefCtrOffset: site.SemaphoreOffset, PID: u.PID}
		// The site's spec id: its index in the spec maps and, where the
		// BPF side reads it so, the attachment's cookie.
		var id uint32
		var lu *libbpfUSDT
		if env != nil {
			id, lu = env.nextSpec, env.libbpf
		}
		useCookie := specs != nil
		if specs != nil {
			if id >= specs.MaxEntries() {
				return fmt.Errorf("usdt %s %s: more than %d probe sites in this object (raise KE_USDT_MAX_SPECS)", bin, probe, specs.MaxEntries())
			}
			spec, err := usdt.NewSpec(f.Machine, site.Args)
			if err != nil {
				return fmt.Errorf("usdt %s %s: %w", bin, site.String(), err)
			}
			b, _ := spec.MarshalBinary()
			if err := specs.Put(id, b); err != nil {
				return fmt.Errorf("usdt %s %s: write argument spec: %w", bin, site.String(), err)
			}
		}
		if lu != nil {
			if err := lu.libbpfSite(env, f, site, id); err != nil {
				return fmt.Errorf("usdt %s %s: %w", bin, site.String(), err)
			}
			useCookie = useCookie || lu.cookie
		}
		if specs != nil || lu != nil {
			env.nextSpec++
		}
		if useCookie {
			opts.Cookie = uint64(id)
		}
		l, err := ex.Uprobe("", prog, opts)
		if err != nil {
			if errors.Is(err, link.ErrNotSupported) && opts.Cookie != 0 {
				return fmt.Errorf("usdt %s %s: reading arguments needs BPF cookies (Linux 5.15+): %w", bin, site.String(), err)
			}
			return fmt.Errorf("usdt %s %s: %w", bin, site.String(), err)
		}
		ml.add(l)
	}
	return nil
}

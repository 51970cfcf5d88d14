// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// memlockReport is what TestPrepareMemlockChild prints.
type memlockReport struct {
	Charges            bool
	Cur, Max           uint64
	Dropped            bool
	RaiseErr, DropErr  string
	Before, After      CapState
	MapErr, SetupError string
}

// lowMemlock is the hard RLIMIT_MEMLOCK of the child: the smallest default
// of the kernels concerned (64 KiB before 5.16), far below the 1 MiB map
// it then creates.
const lowMemlock = 64 << 10

// TestPrepareMemlockChild is the child of TestPrepareMemlock: it does
// something only when KE_MEMLOCK_CHILD is set ("with" or "without"
// CAP_SYS_RESOURCE): it lowers RLIMIT_MEMLOCK to 64 KiB, soft and hard,
// drops CAP_SYS_RESOURCE first for "without", runs PrepareMemlock(true),
// creates a 1 MiB array map, and prints a memlockReport as JSON.
func TestPrepareMemlockChild(t *testing.T) {
	mode, ok := os.LookupEnv("KE_MEMLOCK_CHILD")
	if !ok {
		return // run by TestPrepareMemlock only
	}
	var rep memlockReport
	defer func() {
		b, _ := json.Marshal(rep)
		fmt.Println("REPORT " + string(b))
	}()
	if mode == "nice" {
		// dropCapability alone, of a capability root holds here.
		rep.Before, _ = CurrentCapabilities()
		var err error
		if rep.Dropped, err = dropCapability(capSysNice); err != nil {
			rep.DropErr = err.Error()
		}
		rep.After, _ = CurrentCapabilities()
		return
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: lowMemlock, Max: lowMemlock}); err != nil {
		rep.SetupError = err.Error()
		return
	}
	if mode == "without" {
		if _, err := dropCapability(CapSysResource); err != nil {
			rep.SetupError = err.Error()
			return
		}
	}
	rep.Before, _ = CurrentCapabilities()
	r := PrepareMemlock(true, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rep.Charges, rep.Cur, rep.Max, rep.Dropped = r.Charges, r.Limit.Cur, r.Limit.Max, r.Dropped
	if r.RaiseErr != nil {
		rep.RaiseErr = r.RaiseErr.Error()
	}
	if r.DropErr != nil {
		rep.DropErr = r.DropErr.Error()
	}
	rep.After, _ = CurrentCapabilities()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4096, MaxEntries: 256})
	if err != nil {
		rep.MapErr = err.Error()
		return
	}
	m.Close()
}

// capSysNice is CAP_SYS_NICE, which root holds where it lacks
// CAP_SYS_RESOURCE (this project's CI sandbox).
const capSysNice = 23

// TestDropCapability drops CAP_SYS_NICE in a child with dropCapability:
// it must be gone from the effective, permitted, inheritable, bounding and
// ambient sets, and every other capability kept.
func TestDropCapability(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true forbids skipping)")
		}
		t.Skip("needs root's capabilities")
	}
	rep := runMemlockChild(t, "nice")
	b, a := rep.Before, rep.After
	if !b.Effective.Has(capSysNice) {
		t.Fatalf("CapEff before %s lacks CAP_SYS_NICE: nothing to drop", b.Effective.Hex())
	}
	mask := ^(CapSet(1) << capSysNice)
	if !rep.Dropped || rep.DropErr != "" || a.Effective != b.Effective&mask || a.Permitted != b.Permitted&mask || a.Bounding != b.Bounding&mask ||
		a.Inheritable != b.Inheritable&mask || a.Ambient != b.Ambient&mask {
		t.Errorf("dropped %v (%s): before eff %s prm %s bnd %s, after eff %s prm %s bnd %s inh %s amb %s; want only CAP_SYS_NICE gone",
			rep.Dropped, rep.DropErr, b.Effective.Hex(), b.Permitted.Hex(), b.Bounding.Hex(), a.Effective.Hex(), a.Permitted.Hex(), a.Bounding.Hex(), a.Inheritable.Hex(), a.Ambient.Hex())
	}
}

// runMemlockChild runs TestPrepareMemlockChild in mode and returns its
// report.
func runMemlockChild(t *testing.T, mode string) memlockReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrepareMemlockChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "KE_MEMLOCK_CHILD="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rep memlockReport
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(line, "REPORT "); ok {
			found = json.Unmarshal([]byte(j), &rep) == nil
		}
	}
	if !found || rep.SetupError != "" {
		t.Fatalf("child report %+v\n%s", rep, out)
	}
	return rep
}

// TestPrepareMemlock runs PrepareMemlock in a child process under a hard
// RLIMIT_MEMLOCK of 64 KiB, as a Kubernetes pod gets the node's default,
// with root's capabilities ("with": the chart adds CAP_SYS_RESOURCE) and
// without CAP_SYS_RESOURCE. On a kernel that charges BPF memory to
// RLIMIT_MEMLOCK (before 5.11) the detection must say so, the limit be
// raised to unlimited with the capability and a 1 MiB map then be
// created, and without it the raise fail; on later kernels nothing is
// raised (the limit stays 64 KiB) and the map is created either way.
// CAP_SYS_RESOURCE must be gone from every set afterwards, the other
// capabilities kept.
func TestPrepareMemlock(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true forbids skipping)")
		}
		t.Skip("needs root to create maps and to hold CAP_SYS_RESOURCE")
	}
	_, v, err := KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	charges := v.Less(memcgSince)
	for _, mode := range []string{"with", "without"} {
		t.Run(mode, func(t *testing.T) {
			rep := runMemlockChild(t, mode)
			t.Logf("kernel %v: charges memlock %v, RLIMIT_MEMLOCK %s/%s after, raise error %q, 1 MiB map error %q, CapEff after %s",
				v, rep.Charges, rlimitText(rep.Cur), rlimitText(rep.Max), rep.RaiseErr, rep.MapErr, rep.After.Effective.Hex())
			if rep.Charges != charges {
				t.Errorf("ChargesMemlock %v on %v, want %v", rep.Charges, v, charges)
			}
			switch {
			case !charges:
				if rep.Cur != lowMemlock || rep.Max != lowMemlock || rep.RaiseErr != "" || rep.MapErr != "" {
					t.Errorf("limit %d/%d, raise %q, map %q; want 64 KiB kept, no error", rep.Cur, rep.Max, rep.RaiseErr, rep.MapErr)
				}
			case mode == "with":
				if rep.Cur != unix.RLIM_INFINITY || rep.Max != unix.RLIM_INFINITY || rep.RaiseErr != "" || rep.MapErr != "" {
					t.Errorf("limit %d/%d, raise %q, map %q; want unlimited, no error", rep.Cur, rep.Max, rep.RaiseErr, rep.MapErr)
				}
			default:
				if rep.RaiseErr == "" || rep.MapErr == "" {
					t.Errorf("raise %q, map %q without CAP_SYS_RESOURCE under 64 KiB; want both to fail", rep.RaiseErr, rep.MapErr)
				}
			}
			a := rep.After
			if (a.Effective | a.Permitted | a.Inheritable | a.Bounding | a.Ambient).Has(CapSysResource) || rep.DropErr != "" {
				t.Errorf("CAP_SYS_RESOURCE left: eff %s prm %s inh %s bnd %s amb %s (drop error %q)", a.Effective.Hex(), a.Permitted.Hex(), a.Inheritable.Hex(), a.Bounding.Hex(), a.Ambient.Hex(), rep.DropErr)
			}
			if !a.Effective.Has(CapBPF) || !a.Effective.Has(CapSysAdmin) {
				t.Errorf("CapEff after %s (%s): the other capabilities must stay", a.Effective.Hex(), a.Effective)
			}
			b := rep.Before
			if held := (b.Effective | b.Permitted | b.Inheritable | b.Bounding | b.Ambient).Has(CapSysResource); rep.Dropped != held {
				t.Errorf("Dropped %v, but the child held CAP_SYS_RESOURCE: %v (CapEff before %s)", rep.Dropped, held, b.Effective.Hex())
			}
			if mode == "with" && !b.Effective.Has(CapSysResource) {
				t.Logf("this machine's root lacks CAP_SYS_RESOURCE (CapEff %s): \"with\" runs without it", b.Effective.Hex())
			}
		})
	}
}

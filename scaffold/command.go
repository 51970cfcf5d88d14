// SPDX-License-Identifier: Apache-2.0

package scaffold

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/include"
)

// CommandName is the command's name on the command line.
const CommandName = "new"

// Command is kernel_exporter new, registered on the application.
type Command struct {
	cmd                       *kingpin.CmdClause
	name, attach, until, kind *string
	dir                       *string
	force, kernelCheck        *bool
}

// AddCommand registers `new` and its arguments on app.
func AddCommand(app *kingpin.Application) *Command {
	c := &Command{}
	c.cmd = app.Command(CommandName, "Write a new program into a directory: <name>.bpf.c (BPF C, a counter or a histogram), <name>.yaml and a Makefile that builds it with clang and checks or runs it; then print the commands to run. Headers come from an install, or are written beside the program.")
	c.name = c.cmd.Arg("name", "Program name: lower-case letters, digits and _, starting with a letter (names the maps, metrics and config).").Required().String()
	c.attach = c.cmd.Flag("attach", "Where the program attaches: "+Forms+".").Default(DefaultAttach).String()
	c.kind = c.cmd.Flag("kind", "counter (events by task name) or histogram (time from --attach to --until, by task name).").Default(KindCounter).String()
	c.until = c.cmd.Flag("until", "With --kind histogram: where the time ends (same forms as --attach). Default: the return of a kprobe, fentry or uprobe function, or the exit of a syscall entry tracepoint.").String()
	c.dir = c.cmd.Flag("dir", "Directory to write into. Default: ./<name>.").String()
	c.force = c.cmd.Flag("force", "Overwrite the files of an existing program in --dir.").Bool()
	c.kernelCheck = c.cmd.Flag("kernel-check", "Refuse an --attach or --until kind the running kernel cannot run (kprobes, fentry, ...), offering tracepoints named like the function; --no-kernel-check writes it anyway, for another kernel.").Default("true").Bool()
	return c
}

// Clause is the command's kingpin clause.
func (c *Command) Clause() *kingpin.CmdClause { return c.cmd }

// Run writes the program and prints the next commands, as the command
// line asked: exit code 0, 2 for bad arguments, 1 when writing failed.
func (c *Command) Run(stdout, stderr io.Writer) int {
	exe, _ := os.Executable()
	return Run(Options{Name: *c.name, Attach: *c.attach, Until: *c.until, Kind: *c.kind, Dir: *c.dir, Force: *c.force,
		CheckKernel: *c.kernelCheck, Exe: exe, Stdout: stdout, Stderr: stderr})
}

// Options are the arguments of Run.
type Options struct {
	Name, Attach, Until, Kind, Dir string
	Force                          bool
	// CheckKernel refuses attach kinds the running kernel cannot run
	// (Kernel.CheckKernel), as --kernel-check (the default) does.
	CheckKernel bool
	// Kernel is what the check asks (SystemKernel when nil).
	Kernel *Kernel
	// Exe is the running kernel_exporter (os.Executable): the Makefile
	// runs it, and its install may provide the headers.
	Exe            string
	Stdout, Stderr io.Writer
	// LookPath finds clang (exec.LookPath when nil).
	LookPath func(string) (string, error)
}

// Clangs are the compilers looked for, in order: the one the bundled
// programs are built with, then any other with the BPF target.
var Clangs = []string{"clang-19", "clang", "clang-20", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14"}

// plainPath is a path a Makefile can hold without quoting.
var plainPath = regexp.MustCompile(`^[A-Za-z0-9_./+-]+$`)

// Run is kernel_exporter new.
func Run(o Options) int {
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(o.Stderr, "kernel_exporter new: %v\n", err)
		return code
	}
	p, err := NewProgram(o.Name, o.Kind, o.Attach, o.Until)
	if err != nil {
		return fail(2, err)
	}
	if o.CheckKernel {
		k := o.Kernel
		if k == nil {
			k = SystemKernel()
		}
		root := os.Geteuid() == 0
		if err := k.CheckKernel("--attach", p.Attach, root); err != nil {
			return fail(2, err)
		}
		if p.Kind == KindHistogram && p.Until.Kind != p.Attach.Kind {
			if err := k.CheckKernel("--until", p.Until, root); err != nil {
				return fail(2, err)
			}
		}
	}
	dir := o.Dir
	if dir == "" {
		dir = p.Name
	}
	if strings.ContainsAny(dir, "\x00\n") {
		return fail(2, fmt.Errorf("--dir %s: has a NUL or newline", quote(dir)))
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fail(2, fmt.Errorf("--dir %s: exists and is not a directory", quote(dir)))
	}

	b := Build{Clang: "clang-19", Exporter: "kernel_exporter", Include: "include"}
	var notes []string
	clangFound := false
	for _, c := range Clangs {
		if _, err := o.LookPath(c); err == nil {
			b.Clang, clangFound = c, true
			break
		}
	}
	if !clangFound {
		notes = append(notes, "clang not found: install it first (Debian 12, Ubuntu: apt-get install clang-19), or give make CLANG=<a clang with the BPF target>")
	}
	if o.Exe != "" {
		if plainPath.MatchString(o.Exe) {
			b.Exporter = o.Exe
		} else {
			notes = append(notes, "the Makefile runs kernel_exporter from PATH: this binary's path needs quoting in a Makefile")
		}
	}
	installed := InstalledInclude(o.Exe, include.Arch)
	if installed != "" && !plainPath.MatchString(installed) {
		installed = ""
	}
	if installed != "" {
		b.Include = installed
	}
	if docs := InstalledDocs(o.Exe); docs != "" {
		b.Docs = docs
	}
	if w := warnAttach(p.Attach); w != "" {
		notes = append(notes, w)
	}
	if p.Kind == KindHistogram {
		if w := warnAttach(p.Until); w != "" {
			notes = append(notes, w)
		}
	}

	files, err := p.Render(b)
	if err != nil {
		return fail(1, err)
	}
	written, err := files.Write(dir, o.Force)
	if err != nil {
		if strings.HasPrefix(err.Error(), "--dir") {
			return fail(2, err)
		}
		return fail(1, err)
	}
	headers := "headers: " + installed
	if installed == "" {
		hs, err := WriteHeaders(dir)
		if err != nil {
			return fail(1, err)
		}
		headers = fmt.Sprintf("headers: %d files in %s (embedded in this binary; %s)", len(hs), filepath.Join(dir, "include"),
			include.Arch+"/vmlinux.h for this architecture only")
	}
	w := o.Stdout
	fmt.Fprintf(w, "wrote %s\n", strings.Join(written, ", "))
	fmt.Fprintf(w, "%s\n", headers)
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	metric := "kernel_" + p.Name + "_total"
	if p.Kind == KindHistogram {
		metric = "kernel_" + p.Name + "_seconds"
	}
	fmt.Fprintf(w, "next, as root:\n")
	fmt.Fprintf(w, "  cd %s\n", dir)
	fmt.Fprintf(w, "  make          # %s -target bpf ... -c %s.bpf.c -o %s.bpf.o\n", b.Clang, p.Name, p.Name)
	fmt.Fprintf(w, "  make check    # load and attach it once: ok, or the reason\n")
	fmt.Fprintf(w, "  make dump     # count for 10 s and print %s\n", metric)
	fmt.Fprintf(w, "  make run      # serve it: curl -s localhost:19435/metrics | grep %s\n", metric)
	return 0
}

// warnAttach says when an attach point is missing on this machine, as far
// as it can tell without privileges: a tracepoint absent from a mounted
// tracefs, or an uprobe binary that does not exist. The program may be
// meant for another kernel or machine, so this is a note, not an error.
func warnAttach(a Attach) string {
	switch a.Kind {
	case "tracepoint":
		for _, root := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
			if _, err := os.Stat(root); err != nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, a.Group, a.Event)); err != nil {
				return fmt.Sprintf("tracepoint %s:%s is not in %s on this kernel: make check will say why it cannot attach", a.Group, a.Event, root)
			}
			return ""
		}
	case "uprobe", "uretprobe":
		if filepath.IsAbs(a.Path) {
			if _, err := os.Stat(a.Path); err != nil {
				return fmt.Sprintf("%s: %v", a.Kind, err)
			}
		}
	}
	return ""
}

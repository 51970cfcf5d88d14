// SPDX-License-Identifier: Apache-2.0

package decoder

// What cloudflare/ebpf_exporter's syscall decoder prints, where it differs
// from the kernel's table (decoder/zsyscalls.go): with Env.Compat, the
// syscall decoder prints these names, and unknown_syscall:<n> for a number
// the reference's table lacks (one added to the kernel after it was made)
// or that no table names. docs/migrating.md lists the differences.

// refSyscallRenames are the reference's names of the numbers it names
// differently, per GOARCH.
var refSyscallRenames = map[string]map[uint64]string{
	"amd64": {
		7:   "poll_time64",
		17:  "pread",
		18:  "pwrite",
		35:  "nanosleep_time64",
		40:  "sendfile64",
		94:  "chown",
		128: "rt_sigtimedwait_time64",
		148: "sched_rr_get_interval_time64",
		155: "pivotroot",
		156: "sysctl",
		159: "adjtimex64",
		189: "setxattr",
		192: "getxattr",
		195: "listxattr",
		198: "removexattr",
		202: "futex_time64",
		208: "io_getevents_time64",
		214: "printargs",
		215: "printargs",
		220: "semtimedop_time64",
		223: "timer_settime64",
		224: "timer_gettime64",
		227: "clock_settime64",
		228: "clock_gettime64",
		229: "clock_getres_time64",
		230: "clock_nanosleep_time64",
		231: "exit",
		242: "mq_timedsend_time64",
		243: "mq_timedreceive_time64",
		270: "pselect6_time64",
		271: "ppoll_time64",
		280: "utimensat_time64",
		286: "timerfd_settime64",
		287: "timerfd_gettime64",
		299: "recvmmsg_time64",
		305: "clock_adjtime64",
		333: "io_pgetevents_time64",
	},
	"arm64": {
		4:   "io_getevents_time64",
		6:   "setxattr",
		9:   "getxattr",
		12:  "listxattr",
		15:  "removexattr",
		41:  "pivotroot",
		67:  "pread",
		68:  "pwrite",
		71:  "sendfile64",
		72:  "pselect6_time64",
		73:  "ppoll_time64",
		86:  "timerfd_settime64",
		87:  "timerfd_gettime64",
		88:  "utimensat_time64",
		94:  "exit",
		98:  "futex_time64",
		101: "nanosleep_time64",
		108: "timer_gettime64",
		110: "timer_settime64",
		112: "clock_settime64",
		113: "clock_gettime64",
		114: "clock_getres_time64",
		115: "clock_nanosleep_time64",
		127: "sched_rr_get_interval_time64",
		137: "rt_sigtimedwait_time64",
		171: "adjtimex64",
		182: "mq_timedsend_time64",
		183: "mq_timedreceive_time64",
		192: "semtimedop_time64",
		243: "recvmmsg_time64",
		266: "clock_adjtime64",
		292: "io_pgetevents_time64",
	},
}

// refSyscallUnnamed are the numbers the kernel names and the reference's
// table does not, per GOARCH.
var refSyscallUnnamed = map[string][]uint64{
	"amd64": {335, 336, 462, 463, 464, 465, 466, 467, 468, 469},
	"arm64": {462, 463, 464, 465, 466, 467, 468, 469},
}

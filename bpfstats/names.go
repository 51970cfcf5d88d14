// SPDX-License-Identifier: Apache-2.0

package bpfstats

import "strconv"

// Names of the kernel's BPF enums (include/uapi/linux/bpf.h), as bpftool
// spells them: the enumerator without its prefix, in lower case. A value
// this table does not know (a newer kernel's) is shown as its number.

// progTypes are enum bpf_prog_type, BPF_PROG_TYPE_ left out.
var progTypes = [...]string{
	1:  "socket_filter",
	2:  "kprobe",
	3:  "sched_cls",
	4:  "sched_act",
	5:  "tracepoint",
	6:  "xdp",
	7:  "perf_event",
	8:  "cgroup_skb",
	9:  "cgroup_sock",
	10: "lwt_in",
	11: "lwt_out",
	12: "lwt_xmit",
	13: "sock_ops",
	14: "sk_skb",
	15: "cgroup_device",
	16: "sk_msg",
	17: "raw_tracepoint",
	18: "cgroup_sock_addr",
	19: "lwt_seg6local",
	20: "lirc_mode2",
	21: "sk_reuseport",
	22: "flow_dissector",
	23: "cgroup_sysctl",
	24: "raw_tracepoint_writable",
	25: "cgroup_sockopt",
	26: "tracing",
	27: "struct_ops",
	28: "ext",
	29: "lsm",
	30: "sk_lookup",
	31: "syscall",
	32: "netfilter",
}

// mapTypes are enum bpf_map_type, BPF_MAP_TYPE_ left out.
var mapTypes = [...]string{
	1:  "hash",
	2:  "array",
	3:  "prog_array",
	4:  "perf_event_array",
	5:  "percpu_hash",
	6:  "percpu_array",
	7:  "stack_trace",
	8:  "cgroup_array",
	9:  "lru_hash",
	10: "lru_percpu_hash",
	11: "lpm_trie",
	12: "array_of_maps",
	13: "hash_of_maps",
	14: "devmap",
	15: "sockmap",
	16: "cpumap",
	17: "xskmap",
	18: "sockhash",
	19: "cgroup_storage",
	20: "reuseport_sockarray",
	21: "percpu_cgroup_storage",
	22: "queue",
	23: "stack",
	24: "sk_storage",
	25: "devmap_hash",
	26: "struct_ops",
	27: "ringbuf",
	28: "inode_storage",
	29: "task_storage",
	30: "bloom_filter",
	31: "user_ringbuf",
	32: "cgrp_storage",
	33: "arena",
}

// linkTypes are enum bpf_link_type, BPF_LINK_TYPE_ left out.
var linkTypes = [...]string{
	1:  "raw_tracepoint",
	2:  "tracing",
	3:  "cgroup",
	4:  "iter",
	5:  "netns",
	6:  "xdp",
	7:  "perf_event",
	8:  "kprobe_multi",
	9:  "struct_ops",
	10: "netfilter",
	11: "tcx",
	12: "uprobe_multi",
	13: "netkit",
	14: "sockmap",
}

// attachTypes are enum bpf_attach_type, BPF_ left out (0 is a real value:
// cgroup_inet_ingress).
var attachTypes = [...]string{
	0:  "cgroup_inet_ingress",
	1:  "cgroup_inet_egress",
	2:  "cgroup_inet_sock_create",
	3:  "cgroup_sock_ops",
	4:  "sk_skb_stream_parser",
	5:  "sk_skb_stream_verdict",
	6:  "cgroup_device",
	7:  "sk_msg_verdict",
	8:  "cgroup_inet4_bind",
	9:  "cgroup_inet6_bind",
	10: "cgroup_inet4_connect",
	11: "cgroup_inet6_connect",
	12: "cgroup_inet4_post_bind",
	13: "cgroup_inet6_post_bind",
	14: "cgroup_udp4_sendmsg",
	15: "cgroup_udp6_sendmsg",
	16: "lirc_mode2",
	17: "flow_dissector",
	18: "cgroup_sysctl",
	19: "cgroup_udp4_recvmsg",
	20: "cgroup_udp6_recvmsg",
	21: "cgroup_getsockopt",
	22: "cgroup_setsockopt",
	23: "trace_raw_tp",
	24: "trace_fentry",
	25: "trace_fexit",
	26: "modify_return",
	27: "lsm_mac",
	28: "trace_iter",
	29: "cgroup_inet4_getpeername",
	30: "cgroup_inet6_getpeername",
	31: "cgroup_inet4_getsockname",
	32: "cgroup_inet6_getsockname",
	33: "xdp_devmap",
	34: "cgroup_inet_sock_release",
	35: "xdp_cpumap",
	36: "sk_lookup",
	37: "xdp",
	38: "sk_skb_verdict",
	39: "sk_reuseport_select",
	40: "sk_reuseport_select_or_migrate",
	41: "perf_event",
	42: "trace_kprobe_multi",
	43: "lsm_cgroup",
	44: "struct_ops",
	45: "netfilter",
	46: "tcx_ingress",
	47: "tcx_egress",
	48: "trace_uprobe_multi",
	49: "cgroup_unix_connect",
	50: "cgroup_unix_sendmsg",
	51: "cgroup_unix_recvmsg",
	52: "cgroup_unix_getpeername",
	53: "cgroup_unix_getsockname",
	54: "netkit_primary",
	55: "netkit_peer",
	56: "trace_kprobe_session",
	57: "trace_uprobe_session",
}

// ProgType is the name of program type t ("tracepoint", "xdp"...).
func ProgType(t uint32) string { return enumName(progTypes[:], t) }

// MapType is the name of map type t ("hash", "ringbuf"...).
func MapType(t uint32) string { return enumName(mapTypes[:], t) }

// LinkType is the name of link type t ("perf_event", "cgroup"...).
func LinkType(t uint32) string { return enumName(linkTypes[:], t) }

// AttachType is the name of attach type t ("cgroup_inet_ingress"...).
func AttachType(t uint32) string { return enumName(attachTypes[:], t) }

func enumName(names []string, t uint32) string {
	if int64(t) < int64(len(names)) && names[t] != "" {
		return names[t]
	}
	return strconv.FormatUint(uint64(t), 10)
}

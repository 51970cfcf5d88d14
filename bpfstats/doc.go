// SPDX-License-Identifier: Apache-2.0

// Package bpfstats serves every BPF program and map of the host, whoever
// loaded it, as metrics (--collector.bpf), and gives top bpf and the
// landing page the same figures.
//
// The model:
//
//   - A Lister lists the host's objects (Listing): every program with its
//     info and run-time statistics, every map with its memlock and, for
//     hash maps on 6.6+, the entries the kernel counts, every BPF link with
//     its attach point, and the processes holding a descriptor of each
//     (Holder). An Enumerator lists in the calling process, which needs
//     CAP_SYS_ADMIN (BPF_*_GET_FD_BY_ID); the serving process has dropped
//     it, so it asks the privileged helper (package privsep, request
//     bpf_objects), which sends the listing's wire form (Encode, Decode:
//     bounded and checked, FuzzDecode).
//
//   - Holders come from a task_file BPF iterator (holders.bpf.c) that
//     matches BPF objects by their anonymous inode's name, and hash map
//     entries from a bpf_map iterator over bpf_map_sum_elem_count. Both
//     are loaded once by the Enumerator and kept.
//
//   - The Collector turns listings into series. Its counters
//     (kernel_bpf_program_run_seconds_total, _runs_total) are exact over
//     every interval between two listings during which statistics were on
//     all the time (kernel.bpf_stats_enabled=1 at both, or --bpf.stats):
//     the kernel's own counts over it (exact.go). Otherwise they advance at
//     the end of the CPU budget's measuring windows (package budget, which
//     calls WindowStart and WindowEnd while statistics are on): what each
//     program ran in the window, times the time the window stands for (the
//     time since the previous window, or the last exact interval, ended)
//     over its length. A scrape lists again (unless another scrape did
//     within a second) for the rest: info, owners, gauges, map memory,
//     and exact counts as of the scrape. Figures gives the exporter's own
//     per-config family the same figures.
//
//   - Owner: the lowest-pid process holding a descriptor of the program
//     (or of one of its links); a map no process holds takes its first
//     program's. The owner's cgroup comes from /proc/<pid>/cgroup (world
//     readable) and its pod, when the cgroup is a pod's, from the kube
//     decoders' resolver (Options.Pod).
//
//   - Bounds: a listing holds at most MaxPrograms, MaxMaps, MaxLinks and
//     MaxHolders (the rest counted in Listing.More); the Collector serves
//     at most Options.MaxPrograms and MaxMaps one by one (slots) and sums
//     the rest into __overflow__ series; a program gone from the host is
//     served for Options.TTL, then forgotten.
//
// Usage is the per-interval view of top bpf (term.BPFView); Summary the
// landing page's.
package bpfstats

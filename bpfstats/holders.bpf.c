// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package bpfstats; clang ignores it.)

/*
 * holders: which process holds a file descriptor of which BPF program, map
 * or link, for the owner labels of the host BPF collector (package
 * bpfstats).
 *
 * A task_file iterator (5.8+) visits every open file of every process once
 * (threads sharing their leader's file table are skipped by the kernel).
 * A BPF object's file is an anonymous inode file whose dentry is named
 * "bpf-prog", "bpf-map" or "bpf_link" (kernel/bpf/syscall.c: bpf_prog_new_fd,
 * bpf_map_new_fd, bpf_link_prime), and its private_data is the object.
 * Matching the name instead of comparing f_op with bpf_prog_fops & co.
 * needs no kernel symbol address (which /proc/kallsyms shows only to
 * CAP_SYSLOG). For each match one struct holder is written to the
 * iterator's output; user space reads it with a bounded buffer.
 */

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

enum holder_kind {
	HOLDER_PROG = 1,
	HOLDER_MAP = 2,
	HOLDER_LINK = 3,
};

/* One record of the output: 28 bytes, read by bpfstats/holders.go. */
struct holder {
	__u32 pid;	/* thread group id of the holding process */
	__u32 id;	/* program, map or link id */
	__u32 kind;	/* enum holder_kind */
	char comm[16];	/* the process' command name (its leader's) */
};
_Static_assert(sizeof(struct holder) == 28, "holders.go reads 28-byte records");

/* kind_of returns the holder kind of an anonymous inode named name (at
 * most 9 bytes are looked at), 0 for any other file. */
static __always_inline __u32 kind_of(const char name[10])
{
	if (name[0] != 'b' || name[1] != 'p' || name[2] != 'f')
		return 0;
	if (name[3] == '-' && name[4] == 'p' && name[5] == 'r' && name[6] == 'o' &&
	    name[7] == 'g' && name[8] == 0)
		return HOLDER_PROG;
	if (name[3] == '-' && name[4] == 'm' && name[5] == 'a' && name[6] == 'p' &&
	    name[7] == 0)
		return HOLDER_MAP;
	if (name[3] == '_' && name[4] == 'l' && name[5] == 'i' && name[6] == 'n' &&
	    name[7] == 'k' && name[8] == 0)
		return HOLDER_LINK;
	return 0;
}

SEC("iter/task_file")
int holders(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	struct holder h = {};
	const unsigned char *dname;
	char name[10] = {};
	void *obj;

	if (!task || !file)
		return 0;
	dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	if (!dname || bpf_probe_read_kernel_str(name, sizeof(name), dname) < 0)
		return 0;
	h.kind = kind_of(name);
	if (!h.kind)
		return 0;
	obj = BPF_CORE_READ(file, private_data);
	if (!obj)
		return 0;
	switch (h.kind) {
	case HOLDER_PROG:
		h.id = BPF_CORE_READ((struct bpf_prog *)obj, aux, id);
		break;
	case HOLDER_MAP:
		h.id = BPF_CORE_READ((struct bpf_map *)obj, id);
		break;
	default:
		h.id = BPF_CORE_READ((struct bpf_link *)obj, id);
	}
	if (!h.id)
		return 0; /* not yet given an id (still being created) */
	h.pid = BPF_CORE_READ(task, tgid);
	BPF_CORE_READ_STR_INTO(&h.comm, task, group_leader, comm);
	bpf_seq_write(ctx->meta->seq, &h, sizeof(h));
	return 0;
}

/*
 * map_entries: the entries of every BPF map of the host that counts them,
 * for kernel_bpf_map_entries. bpf_map_sum_elem_count (kfunc, 6.6+) sums
 * the per-CPU element counts the kernel keeps for hash maps (hashtab.c:
 * inc_elem_count); other map types keep none, and user space counts only
 * the hash kinds. The kfunc is weak: on an older kernel this program does
 * not load and the holders iterator, loaded separately, does not care.
 */

extern __s64 bpf_map_sum_elem_count(const struct bpf_map *map) __ksym __weak;

/* One record of the output: 16 bytes, read by bpfstats/holders.go. */
struct map_count {
	__u32 id;
	__u32 pad;
	__s64 entries;
};
_Static_assert(sizeof(struct map_count) == 16, "holders.go reads 16-byte records");

SEC("iter/bpf_map")
int map_entries(struct bpf_iter__bpf_map *ctx)
{
	struct bpf_map *map = ctx->map;
	struct map_count c = {};

	if (!map)
		return 0;
	c.id = map->id;
	c.entries = bpf_map_sum_elem_count(map);
	bpf_seq_write(ctx->meta->seq, &c, sizeof(c));
	return 0;
}

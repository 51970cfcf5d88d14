// SPDX-License-Identifier: Apache-2.0
/*
 * usdt_target: the traced program of TestMatrixUSDTLibbpf, committed
 * prebuilt (usdt_target) because the kernel matrix guests have no C
 * compiler. No libc: a static executable at fixed addresses (ELF type
 * ET_EXEC), so that on a kernel without BPF cookies (5.10) libbpf's
 * usdt.bpf.h finds the probe's spec id by its link-time address.
 *
 * Build (gcc 12, Debian 12; systemtap-sdt-dev for <sys/sdt.h>):
 *
 *   gcc -O2 -static -nostdlib -no-pie -fno-pie -fno-stack-protector \
 *       -Wl,--build-id=none -s -o usdt_target usdt_target.c
 *
 * Run without arguments, it fires ketest_static:tick 1000 times, for
 * i = 1..1000, with arguments (i, -1000*i, 42), while its semaphore is
 * raised, then exits with status 0 (1 when the semaphore was never
 * raised).
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short ketest_static_tick_semaphore __attribute__((section(".probes")));

/* volatile: every iteration reads memory, and the probe sees a register. */
static volatile long counter;

__attribute__((noreturn)) static void sys_exit(long status)
{
	__asm__ volatile("syscall" : : "a"(60), "D"(status) : "rcx", "r11", "memory");
	__builtin_unreachable();
}

__attribute__((noinline)) static void tick(long i)
{
	long neg = -1000 * i;

	if (ketest_static_tick_semaphore)
		STAP_PROBE3(ketest_static, tick, i, neg, 42);
	counter += i;
}

void _start(void)
{
	int fired = 0;

	for (long i = 1; i <= 1000; i++) {
		fired |= ketest_static_tick_semaphore != 0;
		tick(i);
	}
	sys_exit(!fired);
}

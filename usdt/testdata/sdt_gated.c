// SPDX-License-Identifier: Apache-2.0
// The probe with a semaphore of the usdt test program (see sdt_target.c):
// <sys/sdt.h> gives every probe of a file a semaphore once
// _SDT_HAS_SEMAPHORES is defined, so it lives in a file of its own.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

// The semaphore of probe ketest:gated. The kernel increments it in every
// process while a uprobe with its file offset as ref_ctr_offset is attached.
unsigned short ketest_gated_semaphore __attribute__((section(".probes")));

__attribute__((noinline)) void gated(int i)
{
	if (ketest_gated_semaphore)
		STAP_PROBE1(ketest, gated, i);
}

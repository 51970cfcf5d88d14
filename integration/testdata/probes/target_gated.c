// SPDX-License-Identifier: Apache-2.0
/*
 * The USDT probe with a semaphore of ke_target (see target.c). <sys/sdt.h>
 * gives every probe of a file a semaphore once _SDT_HAS_SEMAPHORES is
 * defined, so this probe lives in a file of its own.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

/* Non-zero while a uprobe with this semaphore's file offset as
 * ref_ctr_offset is attached: the kernel counts attachments here. */
unsigned short ketest_gated_semaphore __attribute__((section(".probes")));

__attribute__((noinline)) void ke_gated(int i)
{
	if (ketest_gated_semaphore)
		STAP_PROBE1(ketest, gated, i);
}

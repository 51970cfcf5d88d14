// SPDX-License-Identifier: Apache-2.0
/*
 * ke_libbpf_target: the traced program of the test of BPF programs built
 * with libbpf's <bpf/usdt.bpf.h> (probes_usdt_libbpf_test.go).
 *
 *   ke_libbpf_target calls N   print "ready sema=<v>" (v: the semaphore of
 *                              ketest_libbpf:mixed), wait for a line on
 *                              stdin, then for i = 1..N fire
 *                              ketest_libbpf:mixed once and
 *                              ketest_libbpf:site at its two sites; print
 *                              "done sema=<v>" and wait for EOF.
 *
 * Every probe of this file has a semaphore (_SDT_HAS_SEMAPHORES), and
 * fires only while it is raised: the attachment must raise it.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>

unsigned short ketest_libbpf_mixed_semaphore __attribute__((section(".probes")));
unsigned short ketest_libbpf_site_semaphore __attribute__((section(".probes")));

/* A global: at -O2 its probe argument is a %rip-relative memory operand. */
long ketest_libbpf_counter = 100;

static const char *const names[] = {"alpha", "beta", "gamma"};

/* name returns names[i % 3]; not inlined, so that the probe's argument is
 * a register, not a scaled-index memory operand (which libbpf before 1.7
 * cannot read). */
__attribute__((noinline)) const char *name_of(int i)
{
	return names[i % 3];
}

__attribute__((noinline)) void site_one(void)
{
	if (ketest_libbpf_site_semaphore)
		STAP_PROBE1(ketest_libbpf, site, 1);
}

__attribute__((noinline)) void site_two(void)
{
	if (ketest_libbpf_site_semaphore)
		STAP_PROBE1(ketest_libbpf, site, 2);
}

__attribute__((noinline)) void mixed(int i)
{
	long neg = -1000L * i;
	unsigned char low = (unsigned char)(i + 200);
	signed char small = (signed char)-i;
	const char *name = name_of(i);

	/* 8 arguments: int, long < 0, constants 42 and -9, a string pointer,
	 * unsigned and signed bytes, a global. */
	if (ketest_libbpf_mixed_semaphore)
		STAP_PROBE8(ketest_libbpf, mixed, i, neg, 42, -9, name, low, small, ketest_libbpf_counter);
}

int main(int argc, char **argv)
{
	char line[64];
	int n;

	if (argc != 3 || strcmp(argv[1], "calls")) {
		fprintf(stderr, "usage: %s calls N\n", argv[0]);
		return 2;
	}
	n = atoi(argv[2]);
	printf("ready sema=%u\n", ketest_libbpf_mixed_semaphore);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 2;
	for (int i = 1; i <= n; i++) {
		mixed(i);
		site_one();
		site_two();
		ketest_libbpf_counter++;
	}
	printf("done sema=%u\n", ketest_libbpf_mixed_semaphore);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

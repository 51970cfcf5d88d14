// SPDX-License-Identifier: Apache-2.0
/*
 * ke_target: the user-space program the uprobe, USDT and perf event
 * integration tests trace. Built by the tests with the system C compiler
 * (USDT probes need <sys/sdt.h>, Debian package systemtap-sdt-dev).
 *
 *   ke_target calls N   print "ready sema=<v>", wait for a line on stdin,
 *                       then N times: call ke_work(i), fire the USDT
 *                       probes and call libc's getppid (the target of the
 *                       bare-library uprobe test); print "done sema=<v>"
 *                       and wait for EOF.
 *   ke_target spin MS   busy-loop for MS milliseconds on CPU 0.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

extern unsigned short ketest_gated_semaphore;
void ke_gated(int i);

long ketest_counter = 41;

/* ke_work is the uprobe target: returns 3*x. */
__attribute__((noinline)) long ke_work(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3;
}

static void calls(int n)
{
	char line[64];

	printf("ready sema=%u\n", ketest_gated_semaphore);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		exit(2);
	for (int i = 1; i <= n; i++) {
		long neg = -1000L * i;
		unsigned char low = (unsigned char)(i + 200);

		ke_work(i);
		STAP_PROBE3(ketest, args, i, neg, low);
		STAP_PROBE2(ketest, consts, 5, -7);
		STAP_PROBE1(ketest, global, ketest_counter);
		ke_gated(i);
		getppid();
		ketest_counter++;
	}
	printf("done sema=%u\n", ketest_gated_semaphore);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin(int ms)
{
	cpu_set_t set;
	volatile unsigned long x = 0;
	double end;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
	end = now() + ms / 1000.0;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x++;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "calls")) {
		calls(atoi(argv[2]));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "spin")) {
		spin(atoi(argv[2]));
		return 0;
	}
	fprintf(stderr, "usage: %s calls N | spin MS\n", argv[0]);
	return 2;
}

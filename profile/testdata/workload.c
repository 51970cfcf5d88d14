/*
 * workload: the processes the profile tests measure, built by the tests
 * with gcc -O1 -fno-omit-frame-pointer (user stacks are unwound through
 * frame pointers).
 *
 *   workload burn SHARE SECONDS   spend SHARE of every 100 ms in burn_a and
 *                                 the rest in burn_b (by the clock), for
 *                                 SECONDS
 *   workload getpid SECONDS       call getpid() in a loop
 *   workload zero SECONDS         read /dev/zero 64 KiB at a time
 *   workload sleep N MS           sleep N times for MS milliseconds
 *
 * Each waits for a line on standard input before it starts (so that a
 * profile can be attached first), prints the seconds it ran, and exits
 * when standard input ends (so that its stacks can still be resolved from
 * its mappings).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The two functions differ, so that no optimisation merges them. */
__attribute__((noinline, noclone)) void burn_a(double until)
{
	while (now() < until)
		for (int i = 0; i < 20000; i++)
			sink += i;
}

__attribute__((noinline, noclone)) void burn_b(double until)
{
	while (now() < until)
		for (int i = 0; i < 20000; i++)
			sink ^= i;
}

__attribute__((noinline, noclone)) void getpid_storm(double until)
{
	while (now() < until)
		for (int i = 0; i < 1000; i++)
			syscall(SYS_getpid);
}

__attribute__((noinline, noclone)) void read_zero_loop(double until)
{
	static char buf[65536];
	int fd = open("/dev/zero", O_RDONLY);

	if (fd < 0) {
		perror("/dev/zero");
		exit(1);
	}
	while (now() < until)
		if (read(fd, buf, sizeof(buf)) != sizeof(buf)) {
			perror("read");
			exit(1);
		}
	close(fd);
}

__attribute__((noinline, noclone)) void sleep_loop(int n, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	for (int i = 0; i < n; i++)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	char line[64];
	double start;

	if (argc < 3) {
		fprintf(stderr, "usage: workload burn SHARE SECONDS | getpid SECONDS | zero SECONDS | sleep N MS\n");
		return 2;
	}
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	start = now();
	if (!strcmp(argv[1], "burn") && argc == 4) {
		double share = atof(argv[2]), end = start + atof(argv[3]);

		while (now() < end) {
			double t = now();

			burn_a(t + 0.1 * share);
			burn_b(t + 0.1);
		}
	} else if (!strcmp(argv[1], "getpid")) {
		getpid_storm(start + atof(argv[2]));
	} else if (!strcmp(argv[1], "zero")) {
		read_zero_loop(start + atof(argv[2]));
	} else if (!strcmp(argv[1], "sleep") && argc == 4) {
		sleep_loop(atoi(argv[2]), atol(argv[3]));
	} else {
		fprintf(stderr, "workload: bad arguments\n");
		return 2;
	}
	printf("%.6f\n", now() - start);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

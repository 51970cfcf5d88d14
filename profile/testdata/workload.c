/* SPDX-License-Identifier: Apache-2.0 */
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
 *   workload send FILE SECONDS    send FILE over a loopback TCP connection
 *                                 again and again with sendfile(), to a
 *                                 child process that reads and drops it
 *   workload write FILE SECONDS   the same with read() and write() through
 *                                 a 64 KiB buffer
 *
 * Each waits for a line on standard input before it starts (so that a
 * profile can be attached first), prints the seconds it ran, and exits
 * when standard input ends (so that its stacks can still be resolved from
 * its mappings).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* connect_sink returns a TCP connection to a child that drops what it reads. */
static int connect_sink(pid_t *child)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), s;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("listen");
		exit(1);
	}
	*child = fork();
	if (*child == 0) {
		static char buf[1 << 16];
		int c = accept(l, NULL, NULL);

		while (read(c, buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(l);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	return s;
}

__attribute__((noinline, noclone)) void send_loop(const char *path, double until, int use_sendfile)
{
	static char buf[1 << 16];
	struct stat st;
	pid_t child;
	int s = connect_sink(&child), f = open(path, O_RDONLY);

	if (f < 0 || fstat(f, &st)) {
		perror(path);
		exit(1);
	}
	while (now() < until) {
		off_t off = 0;

		if (use_sendfile) {
			while (off < st.st_size)
				if (sendfile(s, f, &off, st.st_size - off) <= 0) {
					perror("sendfile");
					exit(1);
				}
		} else {
			ssize_t n;

			lseek(f, 0, SEEK_SET);
			while ((n = read(f, buf, sizeof(buf))) > 0)
				if (write(s, buf, n) != n) {
					perror("write");
					exit(1);
				}
		}
	}
	close(s);
	waitpid(child, NULL, 0);
}

int main(int argc, char **argv)
{
	char line[64];
	double start;

	if (argc < 3) {
		fprintf(stderr, "usage: workload burn SHARE SECONDS | getpid SECONDS | zero SECONDS | sleep N MS | send FILE SECONDS | write FILE SECONDS\n");
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
	} else if ((!strcmp(argv[1], "send") || !strcmp(argv[1], "write")) && argc == 4) {
		send_loop(argv[2], start + atof(argv[3]), !strcmp(argv[1], "send"));
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

// SPDX-License-Identifier: Apache-2.0
// A test program with USDT probes for package usdt: built by the tests with
// the system C compiler and <sys/sdt.h> (Debian: systemtap-sdt-dev),
// together with sdt_gated.c, which holds the probe with a semaphore.
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>

void gated(int i);

long ketest_counter = 41;

__attribute__((noinline)) void site_a(int i)
{
	STAP_PROBE1(ketest, twice, i);
}

__attribute__((noinline)) void site_b(int i)
{
	STAP_PROBE1(ketest, twice, i);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;

	for (int i = 1; i <= n; i++) {
		long neg = -1000L * i;
		unsigned char low = (unsigned char)i;

		STAP_PROBE(ketest, noargs);
		STAP_PROBE3(ketest, args, i, neg, low);
		STAP_PROBE2(ketest, consts, 5, -7);
		STAP_PROBE1(ketest, global, ketest_counter);
		gated(i);
		site_a(i);
		site_b(i);
		ketest_counter++;
	}
	printf("%ld\n", ketest_counter);
	return 0;
}

// Test program for tests/profile.rs: spins in a() and in b() for twice as long (by its own CPU
// time, so the 1:2 ratio holds whatever else the machine runs), for the CPU seconds given as
// argv[1]; then prints the CPU time it used and the wall time that took (ns, on one line) and
// sleeps off CPU until killed.
// Built with frame pointers so the kernel can walk its stacks.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long wall_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

volatile unsigned long sink;

__attribute__((noinline)) void spin_until(long long end)
{
	while (cpu_ns() < end)
		for (int i = 0; i < 20000; i++)
			sink += i;
}

// Long enough (20 and 40 ms) that a sampling period of a few ms cannot alias with the cycle.
__attribute__((noinline)) void a(void) { spin_until(cpu_ns() + 20000000); }
__attribute__((noinline)) void b(void) { spin_until(cpu_ns() + 40000000); }

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	long long wall0 = wall_ns();
	long long end = cpu_ns() + (long long)(secs * 1e9);
	while (cpu_ns() < end) {
		a();
		b();
	}
	printf("%lld %lld\n", cpu_ns(), wall_ns() - wall0);
	fflush(stdout);
	for (;;)
		pause();
}

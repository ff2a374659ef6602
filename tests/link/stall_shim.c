/* stall_shim.c - an LD_PRELOAD library for ckcd-link's tests. In a process
 * named ckcd-link, the main thread sleeps CKCD_TEST_STALL_US microseconds after
 * each CLOCK_MONOTONIC reading: the host withholding the CPU between a reading
 * and its use, every time, where a hypervisor's steal does it now and then. The
 * sender threads and every other program run as usual, so frames leave on time
 * and only what the main thread does with a reading is tested. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long stall_ns;
static pid_t main_tid;

__attribute__((constructor)) static void stall_init(void)
{
	const char *us = getenv("CKCD_TEST_STALL_US");

	if (us && strcmp(program_invocation_short_name, "ckcd-link") == 0) {
		stall_ns = strtol(us, NULL, 10) * 1000L;
		main_tid = getpid();
	}
}

/* libc's clock_gettime, found at the first call (a constructor of another
 * library may call before ours ran); the system call if it cannot be found. */
static int real_clock_gettime(clockid_t clk, struct timespec *ts)
{
	static int (*real)(clockid_t, struct timespec *);

	if (!real)
		real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
	return real ? real(clk, ts) : (int)syscall(SYS_clock_gettime, clk, ts);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	int r = real_clock_gettime(clk, ts);

	if (r == 0 && clk == CLOCK_MONOTONIC && stall_ns > 0 && syscall(SYS_gettid) == main_tid) {
		struct timespec d = { stall_ns / 1000000000L, stall_ns % 1000000000L };
		int saved = errno;

		while (nanosleep(&d, &d) == -1 && errno == EINTR)
			;
		errno = saved;
	}
	return r;
}

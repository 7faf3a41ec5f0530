/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's threads: their names, and how the scheduler treats them (threads.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify/threads.h"

#define LIGHT_SLICE_NS 100000 /* the least slice the kernel grants */

/* struct sched_attr as the kernel defines it (SCHED_ATTR_SIZE_VER1); libc may lack it. */
struct nt_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime; /* SCHED_OTHER: the slice asked for, 0 for the default */
	uint64_t sched_deadline;
	uint64_t sched_period;
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};

/*
 * Short slices for light threads
 * ------------------------------
 * A caller waits for two wake-ups per call, its worker's and then its own, and a native semop
 * has none; beside busy tenants each is a wait for a CPU. The scheduler (EEVDF) orders runnable
 * threads by virtual deadline, which a thread's slice sets: a woken thread with a short slice
 * gets an early one and the CPU from a busy thread at once, where with the default (1.4 ms on
 * 2 CPUs) it often waits out what is left of the other's turn. Workers run for microseconds a
 * call, so a slice of 100 us takes nothing from them. Measured with bench/tenants.sh (README,
 * "semvisord and containers", Fairness). The bulk worker keeps its default slice: its turns
 * are long.
 *
 * The slice is sched_attr.sched_runtime of a SCHED_OTHER thread (Linux 6.12 and later; older
 * kernels ignore it). The thread's nice value and policy are read first and kept: a daemon
 * started under chrt or with Nice= stays as it was started, and a failure changes nothing.
 */
static void light_slice(void)
{
	struct nt_sched_attr a = { .size = sizeof(a) };

	if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) != 0 || a.sched_policy != SCHED_OTHER)
		return;
	a.size = sizeof(a);
	a.sched_runtime = LIGHT_SLICE_NS;
	(void)syscall(SYS_sched_setattr, 0, &a, 0);
}

void nt_thread_lower(int by)
{
	id_t tid = (id_t)syscall(SYS_gettid);
	int nice;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, tid);
	if (errno == 0)
		setpriority(PRIO_PROCESS, tid, nice + by > 19 ? 19 : nice + by);
}

void nt_thread_start(const char *name, bool light)
{
	pthread_setname_np(pthread_self(), name);
	if (light)
		light_slice();
}

/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's threads: each names itself as it starts, so that `ps -L`, `top -H`, perf
 * and /proc tell them apart (sv-worker, sv-receiver, sv-bulk, sv-tracer, ...), and the light
 * ones, the workers and the receiver, ask the scheduler for a short slice (threads.c says why).
 * Neither changes what the thread does; where the kernel refuses, nothing changes.
 */
#ifndef SV_NOTIFY_THREADS_H
#define SV_NOTIFY_THREADS_H

#include <stdbool.h>

/* Called by a thread of the supervisor as it starts: its name and, when @light, a short slice. */
void nt_thread_start(const char *name, bool light);

/* The calling thread's nice value, @by more (up to 19) than it was. */
void nt_thread_lower(int by);

#endif

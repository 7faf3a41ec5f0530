/* SPDX-License-Identifier: MIT */
/*
 * How records end: a thread's exit (its pidfd's event), a whole process's (its thread-group
 * pidfd, in the exits epoll set: SEM_UNDO is applied then, as the kernel's exit_sem() runs),
 * and a record found stale (its thread gone and its number given to another before the exit
 * event was handled). Exited processes' pid numbers are remembered for GETPID.
 */
#ifndef SV_NOTIFY_EXITS_H
#define SV_NOTIFY_EXITS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sem.h"
#include "notify/records.h"

struct nt_super;
struct nt_worker;

/*
 * A record found stale: out of the tables, so that the next lookup makes a fresh one. Its
 * parked call, if any, is dropped.
 */
void nt_thread_stale(struct nt_super *s, struct nt_thread *thr);
/* thr's pidfd says it exited. */
void nt_thread_exited(struct nt_super *s, struct nt_thread *thr);
/* Handle every process exit the kernel has reported (waits for a worker doing so already). */
void nt_drain_exits(struct nt_worker *wk);

/* The pid namespaces of a recently exited process, for GETPID: false if not remembered. */
bool nt_exited_pids(int32_t tgid, struct nt_pids *out);

#endif

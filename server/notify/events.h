/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's event sources: one epoll set that every worker waits on, and a second one
 * for process exits (super.h says why). Every source but the stop event is registered
 * EPOLLONESHOT: the worker that gets an event owns the source until it re-arms it.
 */
#ifndef SV_NOTIFY_EVENTS_H
#define SV_NOTIFY_EVENTS_H

#include <stdint.h>

struct nt_super;

/* What an epoll event points at. */
enum nt_src_kind {
	SRC_LISTENER,
	SRC_EXITS,   /* the epoll set of process pidfds below has something */
	SRC_PROCESS, /* a thread group's pidfd (in s->exits): it exited */
	SRC_THREAD,  /* one thread's pidfd (PIDFD_THREAD): it exited */
	SRC_TIMER,   /* parked semtimedop deadlines */
	SRC_SWEEP,   /* periodic check of parked callers that vanished without a word */
	SRC_STOP,
};

struct nt_src {
	enum nt_src_kind kind;
	int fd;
};

/* CLOCK_MONOTONIC in nanoseconds: what deadlines and service times are measured in. */
int64_t nt_now_ns(void);

/*
 * Watch a source in the epoll set, or a process pidfd in the exits set: 0, or -ENOMEM (no
 * memory, or max_user_watches reached).
 */
int nt_watch(struct nt_super *s, struct nt_src *src);
int nt_watch_exit(struct nt_super *s, struct nt_src *src);
/* Give back a source whose event the caller owns. Caller owns the source. */
void nt_rearm(struct nt_super *s, struct nt_src *src);
void nt_unwatch(struct nt_super *s, struct nt_src *src);

#endif

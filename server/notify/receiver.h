/* SPDX-License-Identifier: MIT */
/*
 * The receiver: beside a lone worker, a second thread that serves one listener, the busiest,
 * with a blocking receive (receiver.c says why and how the two hand listeners over).
 */
#ifndef SV_NOTIFY_RECEIVER_H
#define SV_NOTIFY_RECEIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "notify/super.h"

/*
 * Its own cache line: the receiver writes it on every call, the worker reads it only when it
 * hands over a listener or kicks.
 */
struct nt_receiver {
	_Alignas(64) struct nt_worker wk;
	struct nt_listener *hot;	     /* the receiver's; NULL while it has none */
	_Atomic(struct nt_listener *) offer; /* handed over by the worker, not yet taken */
	atomic_uint kick;		     /* kicks sent (the worker) */
	atomic_uint ack;		     /* kicks seen (the receiver) */
	/* Calls it received, for the hand-over rule; not wk.stats.received, which COUNTERS=off
	   compiles out and a statistics reset zeroes. */
	atomic_uint_fast64_t served;
	uint64_t seen;	  /* @served when the worker last looked */
	atomic_bool done; /* it has left its loop (stopping) */
	bool running;	  /* its thread exists */
};

/*
 * Receive one call from l and serve it: 0, or -errno from the transport (ENOENT: the caller
 * was interrupted before we picked its call up, or nobody uses l any more; EINTR: the receiver
 * was kicked). With rearm, l goes back into the epoll set before serving, so another worker
 * can take its next call meanwhile. Caller owns l's source.
 */
int nt_receive(struct nt_worker *wk, struct nt_listener *l, bool rearm);

/* Start the receiver's thread: 0 or -errno. */
int nt_receiver_start(struct nt_super *s);
/*
 * The worker has served a call of l from epoll (l is disarmed there): offer it to the
 * receiver when the receiver's own listener has been quiet since the worker last looked. True
 * when offered; else the caller re-arms it.
 */
bool nt_receiver_offer(struct nt_super *s, struct nt_listener *l);
/*
 * Make the receiver go round its loop once more (to hand back a listener that hung up, or to
 * see s->stopping), and wait until it has. Called by the worker only.
 */
void nt_receiver_kick(struct nt_super *s);

#endif

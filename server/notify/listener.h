/* SPDX-License-Identifier: MIT */
/*
 * Listeners: one per served program tree or container, each a source of trapped calls behind a
 * transport (transport.h). The registry is s->listeners under s->lock, which is held alone.
 */
#ifndef SV_NOTIFY_LISTENER_H
#define SV_NOTIFY_LISTENER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu/list.h>

#include "notify/events.h"
#include "notify/notify.h"
#include "notify/transport.h"

struct nt_super;
struct nt_ns;

struct nt_listener {
	struct nt_src src;
	const struct nt_transport *tp;
	void *tp_ctx;	     /* the transport's own (nt_listener_opts.tp_ctx) */
	atomic_int refcount; /* the registry's, plus one per request in flight or parked */
	struct nt_super *super;
	struct cds_list_head node; /* s->listeners, under s->lock */
	bool ns_traps;		   /* its filter traps unshare/setns (filter.h), so namespaces
				      may be kept (ident.h) */
	bool sync_wake;		   /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP is set on it */
	atomic_int unsynced;	   /* workers answering in bulk (nt_listener_unsync()) */
	/*
	 * The receiver owns it (offered or taken, receiver.h): its epoll entry then watches
	 * for a hang-up only, which the worker passes on to the receiver instead of handling.
	 */
	atomic_bool received;
	bool gone;		/* POLLHUP seen; under s->lock */
	struct nt_ns *fixed_ns; /* listener_opts.ns_name (a reference), or NULL */
	/*
	 * When it last made a heavy call (0: never), for its lane (super.c). Written by the
	 * worker that served the call, read by the one that owns its next event.
	 */
	_Atomic int64_t heavy_ns;
	struct cds_list_head bulk_node; /* s->bulk_queue while queued there, under s->bulk_lock */
	atomic_uint_fast64_t calls;	/* notifications received */
	atomic_int parked;		/* its calls on s->parked now */
	/* the inode of the IPC namespace a new thread of it was last seen in (0: none yet),
	   for `semvisorctl clients`: a container's calls are all served in one */
	atomic_uint_fast64_t ipc_ino;
	char name[384]; /* fits handoff/msg.h's HO_CLIENT_NAME_MAX */
	struct nt_pod pod;
	uint64_t key; /* nt_listener_opts.key */
};

/*
 * What makes a call heavy: the caller's memory it moved (a SETALL or GETALL of 8192
 * semaphores, 2730 sops) or the waiters it woke, each answered in turn. Work, not time: a
 * worker the machine's load preempts must not make an ordinary call look heavy.
 */
#define NT_HEAVY_BYTES	 16384
#define NT_HEAVY_WAKES	 32
#define NT_HEAVY_HOLD_NS 1000000000LL /* a listener stays heavy this long after such a call */

/* The clock is read only for a listener that ever was heavy: not on a light one's calls. */
static inline bool nt_listener_heavy(const struct nt_listener *l)
{
	int64_t t = atomic_load_explicit(&l->heavy_ns, memory_order_relaxed);

	return t && nt_now_ns() - t < NT_HEAVY_HOLD_NS;
}

static inline void nt_listener_get(struct nt_listener *l)
{
	atomic_fetch_add_explicit(&l->refcount, 1, memory_order_relaxed);
}

void nt_listener_put(struct nt_listener *l);

/*
 * Answers to many waiters at once (a SETALL, a semop that frees many) go out without
 * SYNC_WAKE_UP. With it, each answered waiter is put on the answering worker's CPU and runs
 * there before the next answer goes: N waiters run one after another on one CPU while the
 * others idle. bench/bulkwake, the kernel's time to the last waiter: 1.6-3.1x with it;
 * 1.0-1.6x without it for bulk answers, side by side with the build before, 1.2-2.2x in a
 * full run. The flag is the listener's, for all its threads: the first worker to answer in
 * bulk clears it, the last to finish sets it again. Each clears before its own count goes
 * down and sets after, so once all are done the last ioctl was a setting one; meanwhile a
 * call answered alone may only miss the same-CPU hand-off. No-ops where the flag was never
 * set (l->sync_wake).
 */
void nt_listener_unsync(struct nt_listener *l);
void nt_listener_resync(struct nt_listener *l);

/* ---- the transport, through a listener ---- */

static inline int nt_answer(const struct nt_listener *l, uint64_t id, long val, unsigned flags)
{
	return l->tp->answer(l, id, val, flags);
}

static inline int nt_answer_fd(const struct nt_listener *l, uint64_t id, int fd, bool cloexec)
{
	return l->tp->answer_fd(l, id, fd, cloexec);
}

static inline bool nt_waits(const struct nt_listener *l, uint64_t id)
{
	return l->tp->waits(l, id);
}

/* One region of thread tid's memory: 0 or -EFAULT. */
static inline int nt_read(const struct nt_listener *l, pid_t tid, uint64_t addr, void *buf,
			  size_t len)
{
	struct nt_span sp = { addr, buf, len, 0 };

	l->tp->read(l, tid, &sp, 1);
	return sp.err;
}

static inline int nt_write(const struct nt_listener *l, pid_t tid, uint64_t addr, const void *buf,
			   size_t len)
{
	return l->tp->write(l, tid, addr, buf, len);
}

#endif

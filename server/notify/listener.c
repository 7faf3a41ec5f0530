/* SPDX-License-Identifier: MIT */
/*
 * Listeners and their registry (listener.h).
 */
#include <errno.h>
#include <stdio.h>
#include <linux/kcmp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/listener.h"
#include "notify/nsreg.h"
#include "notify/stats.h"
#include "notify/super.h"

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

void nt_listener_put(struct nt_listener *l)
{
	if (atomic_fetch_sub_explicit(&l->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (l->tp->release)
		l->tp->release(l);
	close(l->src.fd);
	if (l->fixed_ns)
		nt_ns_put(l->fixed_ns);
	free(l);
}

bool nt_super_has_listener(struct nt_super *s, int fd)
{
	struct nt_listener *l;
	pid_t me = getpid();
	bool found = false;

	xlock(&s->lock);
	cds_list_for_each_entry(l, &s->listeners, node) {
		if (!l->gone && syscall(SYS_kcmp, me, me, KCMP_FILE, fd, l->src.fd) == 0) {
			found = true;
			break;
		}
	}
	xunlock(&s->lock);
	return found;
}

int nt_super_add_listener(struct nt_super *s, int fd, const struct nt_listener_opts *opts)
{
	struct nt_listener *l = calloc(1, sizeof(*l));

	if (!l) {
		/* the transport's context goes as a put would let it go (a tracer stops) */
		struct nt_listener bare = { .tp_ctx = opts ? opts->tp_ctx : NULL };

		if (opts && opts->tp && opts->tp->release)
			opts->tp->release(&bare);
		close(fd);
		return -ENOMEM;
	}
	l->src = (struct nt_src){ SRC_LISTENER, fd };
	l->tp = opts && opts->tp ? opts->tp : &nt_seccomp_transport;
	l->tp_ctx = opts ? opts->tp_ctx : NULL;
	l->refcount = 1;
	l->super = s;
	l->ns_traps = opts && opts->ns_traps;
	l->key = opts ? opts->key : 0;
	snprintf(l->name, sizeof(l->name), "%s", opts && opts->name ? opts->name : "listener");
	if (opts && opts->pod)
		l->pod = *opts->pod;
	if (opts && opts->ns_name) {
		l->fixed_ns = nsreg_named(&s->reg, opts->ns_name);
		if (!l->fixed_ns) {
			nt_listener_put(l); /* the last reference: fd and transport go too */
			return -ENOMEM;
		}
	}
	/*
	 * Wake-ups on the current CPU (6.6+). Without it the caller and the worker tend to land
	 * on different CPUs and every call pays for cross-CPU wake-ups.
	 */
	l->sync_wake = l->tp == &nt_seccomp_transport && !ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
								SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);

	if (l->tp->attached)
		l->tp->attached(l); /* (a failure below puts l, which releases it) */
	xlock(&s->lock);
	cds_list_add_tail(&l->node, &s->listeners);
	s->nlisteners++;
	xunlock(&s->lock);
	if (nt_watch(s, &l->src)) {
		xlock(&s->lock);
		cds_list_del(&l->node);
		s->nlisteners--;
		xunlock(&s->lock);
		nt_listener_put(l);
		return -ENOMEM;
	}
	NT_COUNT_EVENT(s, listeners_added);
	return 0;
}

void nt_listener_unsync(struct nt_listener *l)
{
	if (l->sync_wake && atomic_fetch_add(&l->unsynced, 1) == 0)
		ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, 0UL);
}

void nt_listener_resync(struct nt_listener *l)
{
	if (l->sync_wake && atomic_fetch_sub(&l->unsynced, 1) == 1)
		ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

void nt_super_drop_listeners(struct nt_super *s)
{
	struct nt_listener *l, *lt;

	xlock(&s->lock);
	cds_list_for_each_entry_safe(l, lt, &s->listeners, node) {
		nt_unwatch(s, &l->src);
		cds_list_del(&l->node);
		s->nlisteners--;
		nt_listener_put(l);
	}
	xunlock(&s->lock);
}

int nt_super_nlisteners(struct nt_super *s)
{
	int n;

	xlock(&s->lock);
	n = s->nlisteners;
	xunlock(&s->lock);
	return n;
}

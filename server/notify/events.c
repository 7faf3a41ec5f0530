/* SPDX-License-Identifier: MIT */
/*
 * The epoll sets the workers wait on (events.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

#include "notify/events.h"
#include "notify/super.h"
#include "util/fault.h"

int64_t nt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* An epoll set may refuse a new entry: no memory, or max_user_watches reached. */
static int watch_in(int epfd, struct nt_src *src, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = src };

	if (sv_fault(SV_FAULT_EPOLL))
		return -ENOMEM;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, src->fd, &ev) ? -ENOMEM : 0;
}

int nt_watch(struct nt_super *s, struct nt_src *src)
{
	/* the stop event is level-triggered: every worker sees it */
	return watch_in(s->epfd, src, src->kind == SRC_STOP ? EPOLLIN : EPOLLIN | EPOLLONESHOT);
}

int nt_watch_exit(struct nt_super *s, struct nt_src *src)
{
	return watch_in(s->exits.fd, src, EPOLLIN | EPOLLONESHOT);
}

void nt_rearm(struct nt_super *s, struct nt_src *src)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = src };

	/* ENOENT: it was unwatched meanwhile (listener gone); nothing to re-arm. */
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, src->fd, &ev) && errno != ENOENT)
		abort();
}

void nt_unwatch(struct nt_super *s, struct nt_src *src)
{
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, src->fd, NULL);
}

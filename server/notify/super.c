/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's life and its workers' loop: one epoll set, a fixed pool of workers, and the
 * event sources in it (listeners, the parked-call timer, the vanished-caller sweep, process and
 * thread pidfds). super.h has the state and the order of locks; receiver.c the second thread a
 * lone worker gets.
 *
 * Every source is registered EPOLLONESHOT: the worker that gets an event owns the source until
 * it re-arms it. A listener is re-armed right after it is received from, so another worker can
 * take the next call while this one serves.
 *
 * Lanes
 * -----
 * semvisord serves tenants that do not trust each other, and its workers serve their listeners
 * in turn (epoll's ready list is first in, first out, and a listener is re-armed after each
 * call). That is fair per call, not per unit of work: a tenant whose every call is a SETALL or
 * GETALL of 32000 semaphores (40 us of work, 64 KiB of its memory copied) would make everyone
 * else's calls of a few microseconds wait behind its own. So in semvisord (nt_config.bulk_lane)
 * a listener that makes a heavy call (listener.h: counted in bytes moved and waiters woken,
 * never in time) is served by the bulk lane's worker until NT_HEAVY_HOLD_NS pass without
 * one: the worker that gets its event passes the event on, through s->bulk_queue, instead of
 * receiving the call. Heavy listeners take turns at the bulk worker, light ones at the main
 * workers, and a light call never waits for a heavy one except the one that made its listener
 * heavy: at most one per listener per hold period, whatever the listener does. Passing an
 * event on costs the main worker a lock and a wake-up, not the call's work. The receiver never
 * keeps a heavy listener (receiver.c). Everything else, parked calls, timers, exits and
 * hang-ups, stays with the main workers, and the listener stays in their epoll set: its event
 * is passed on whole, so the bulk worker owns the listener until it re-arms it there.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/exits.h"
#include "notify/durable.h"
#include "notify/listener.h"
#include "notify/parked.h"
#include "notify/receiver.h"
#include "notify/stats.h"
#include "notify/super.h"
#include "notify/threads.h"

#define SWEEP_INTERVAL_MS 100
#define BULK_NICE	  10 /* the bulk worker's nice value, over the other workers' */
#define PROBE_SWEEPS	  10 /* namespaces without a confined thread are probed once a second */

/* Ask the kernel which of the namespaces nobody we serve is in have ended. */
static void probe_namespaces(struct nt_worker *wk)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	nsreg_probe(&wk->super->reg, &wq);
	nt_deliver(wk, &wq);
}

/* POLLHUP: no task uses the filter any more. Caller owns the source (its event). */
static void listener_hup(struct nt_worker *wk, struct nt_listener *l)
{
	struct nt_super *s = wk->super;
	bool idle;

	nt_unwatch(s, &l->src);
	xlock(&s->lock);
	l->gone = true;
	cds_list_del(&l->node);
	idle = --s->nlisteners == 0;
	xunlock(&s->lock);
	NT_COUNT_EVENT(s, listeners_gone);
	nt_listener_gone(wk, l);
	nt_listener_put(l);
	if (idle && s->cfg.exit_when_idle)
		nt_super_stop(s);
}

/* Pass the event of a heavy listener on to the bulk worker. Caller owns the listener's source. */
static void bulk_pass(struct nt_super *s, struct nt_listener *l)
{
	nt_listener_get(l); /* the queue's */
	xlock(&s->bulk_lock);
	cds_list_add_tail(&l->bulk_node, &s->bulk_queue);
	xcond_signal(&s->bulk_cond);
	xunlock(&s->bulk_lock);
}

/* The bulk lane's worker: the events passed on to it, in turn, until the supervisor stops. */
static void *bulk_main(void *arg)
{
	struct nt_worker *wk = arg;
	struct nt_super *s = wk->super;
	struct nt_listener *l;
	sigset_t all;

	nt_thread_start("sv-bulk", false);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/*
	 * Where CPUs are scarce the light calls go first: heavy ones are long anyway, and a
	 * light caller waiting for a CPU the bulk worker holds is what the lane is against.
	 * Nice, not SCHED_IDLE: the bulk worker takes locks others may need (a thread's,
	 * exits_lock, engine locks), so it must not starve while it holds one.
	 */
	nt_thread_lower(BULK_NICE);
	sv_thread_register();
	for (;;) {
		xlock(&s->bulk_lock);
		while (cds_list_empty(&s->bulk_queue) &&
		       !atomic_load_explicit(&s->stopping, memory_order_relaxed))
			xcond_wait(&s->bulk_cond, &s->bulk_lock);
		if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
			xunlock(&s->bulk_lock);
			break;
		}
		l = cds_list_first_entry(&s->bulk_queue, struct nt_listener, bulk_node);
		cds_list_del(&l->bulk_node);
		xunlock(&s->bulk_lock);
		NT_ADD(&wk->stats, bulk_calls, 1);
		nt_receive(wk, l, true); /* re-armed in the main set: a hang-up goes there */
		nt_listener_put(l);
	}
	/* Stopping: nothing is re-armed any more; the queue's references go. */
	while (!cds_list_empty(&s->bulk_queue)) {
		l = cds_list_first_entry(&s->bulk_queue, struct nt_listener, bulk_node);
		cds_list_del(&l->bulk_node);
		nt_listener_put(l);
	}
	sv_thread_unregister();
	return NULL;
}

/* Handles one event from the epoll set; false when the supervisor stops. */
static bool dispatch(struct nt_worker *wk, const struct epoll_event *ev)
{
	struct nt_super *s = wk->super;
	struct nt_src *src = ev->data.ptr;

	switch (src->kind) {
	case SRC_LISTENER: {
		struct nt_listener *l = caa_container_of(src, struct nt_listener, src);

		if (!(ev->events & EPOLLIN)) {
			/* A hang-up. The receiver's listener it hands back first (receiver.c). */
			if (atomic_load(&l->received))
				nt_receiver_kick(s);
			else
				listener_hup(wk, l);
		} else if (s->bulk && nt_listener_heavy(l)) {
			bulk_pass(s, l);
		} else if (!s->rcv || !l->sync_wake) {
			nt_receive(wk, l, true);
		} else {
			nt_receive(wk, l, false);
			if (!nt_receiver_offer(s, l))
				nt_rearm(s, src);
		}
		break;
	}
	case SRC_EXITS:
		nt_drain_exits(wk);
		nt_rearm(s, src);
		break;
	case SRC_PROCESS: /* only ever in s->exits */
		abort();
	case SRC_THREAD:
		nt_thread_exited(s, caa_container_of(src, struct nt_thread, src));
		break;
	case SRC_TIMER:
		nt_timers_expire(wk);
		break;
	case SRC_SWEEP: {
		uint64_t ticks;

		if (read(src->fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
			abort();
		nt_sweep(wk);
		if (++s->probe_ticks >= PROBE_SWEEPS) {
			s->probe_ticks = 0; /* (the sweep's event is ours alone until re-armed) */
			probe_namespaces(wk);
		}
		nt_rearm(s, src);
		break;
	}
	case SRC_STOP:
		if (s->rcv && s->rcv->running)
			nt_receiver_kick(s); /* it sees s->stopping */
		return false;
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct nt_worker *wk = arg;
	struct nt_super *s = wk->super;
	sigset_t all;

	nt_thread_start("sv-worker", true);
	/* Signals are for the process's main thread; workers never take them. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	sv_thread_register();
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(s->epfd, &ev, 1, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			abort();
		}
		if (n > 0 && !dispatch(wk, &ev))
			break;
	}
	sv_thread_unregister();
	return NULL;
}

/* A worker's buffers, for a worker of the pool or the receiver; false when out of memory. */
static bool worker_init(struct nt_worker *wk, struct nt_super *s, size_t notif_size)
{
	wk->super = s;
	wk->slot = -1;
	wk->notif_size = notif_size;
	wk->notif = calloc(1, notif_size);
	return wk->notif != NULL;
}

static void worker_fini(struct nt_worker *wk)
{
	free(wk->notif);
	free(wk->spare);
}

struct nt_worker *nt_guest_new(struct nt_super *s)
{
	struct nt_worker *wk = calloc(1, sizeof(*wk));

	if (!wk || !worker_init(wk, s, s->workers[0].notif_size)) {
		free(wk);
		return NULL;
	}
	xlock(&s->lock);
	cds_list_add_tail(&wk->guest_node, &s->guests);
	xunlock(&s->lock);
	return wk;
}

void nt_guest_free(struct nt_worker *wk)
{
	struct nt_super *s = wk->super;

	xlock(&s->lock);
	cds_list_del(&wk->guest_node);
	nt_stats_add(&s->events, &wk->stats); /* counted still */
	xunlock(&s->lock);
	worker_fini(wk);
	free(wk);
}

struct nt_super *nt_super_new(const struct nt_config *cfg, char *err, size_t errlen)
{
	struct nt_super *s = calloc(1, sizeof(*s));
	struct seccomp_notif_sizes sizes = { 0 };
	struct itimerspec sweep = {
		.it_interval = { 0, SWEEP_INTERVAL_MS * 1000000L },
		.it_value = { 0, SWEEP_INTERVAL_MS * 1000000L },
	};

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	s->counting_ns = nt_now_ns();
	/*
	 * One worker unless asked: a call's cost is two wake-ups, and with one worker the caller
	 * and the worker stay on one CPU (SYNC_WAKE_UP moves each to the other's). With more,
	 * epoll wakes them in turn and each lands wherever it last ran: measured on 2 CPUs, one
	 * worker 10-14 us per call, two workers 14 or 42 us, and no more throughput, since the
	 * kernel's notification path serialises the calls anyway.
	 */
	s->nworkers = cfg->nworkers > 0 ? cfg->nworkers : 1;
	s->cfg.limits = NULL; /* the registry keeps them */
	CDS_INIT_LIST_HEAD(&s->listeners);
	CDS_INIT_LIST_HEAD(&s->guests);
	CDS_INIT_LIST_HEAD(&s->parked);
	CDS_INIT_LIST_HEAD(&s->bulk_queue);
	xmutex_init(&s->lock);
	xmutex_init(&s->bulk_lock);
	xcond_init(&s->bulk_cond);
	xmutex_init(&s->tables_lock);
	xmutex_init(&s->timers_lock);
	xmutex_init(&s->parked_lock);
	xmutex_init(&s->exits_lock);
	tgt_probe(&s->feat);
	/* Without explicit limits each IPC namespace's /proc/sys/kernel/sem rules, natively. */
	if (nsreg_init(&s->reg, &s->feat, cfg->limits, cfg->budget)) {
		snprintf(err, errlen, "reading our own namespaces: %s", strerror(errno));
		return NULL;
	}

	s->threads = cds_lfht_new(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	s->procs = cds_lfht_new(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->stop = (struct nt_src){ SRC_STOP, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) };
	s->timer = (struct nt_src){ SRC_TIMER,
				    timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK) };
	s->sweep = (struct nt_src){ SRC_SWEEP,
				    timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK) };
	s->exits = (struct nt_src){ SRC_EXITS, epoll_create1(EPOLL_CLOEXEC) };
	if (!s->threads || !s->procs || s->epfd < 0 || s->stop.fd < 0 || s->timer.fd < 0 ||
	    s->sweep.fd < 0 || s->exits.fd < 0 || timerfd_settime(s->sweep.fd, 0, &sweep, NULL) ||
	    nt_watch(s, &s->stop) || nt_watch(s, &s->timer) || nt_watch(s, &s->sweep) ||
	    nt_watch(s, &s->exits)) {
		snprintf(err, errlen, "setting up the supervisor: %s", strerror(errno));
		return NULL;
	}

	/* Buffers as large as the running kernel says, in case it is newer than our headers. */
	s->resp_size = sizeof(struct seccomp_notif_resp);
	size_t notif_size = sizeof(struct seccomp_notif);
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
		if (sizes.seccomp_notif > notif_size)
			notif_size = sizes.seccomp_notif;
		if (sizes.seccomp_notif_resp > s->resp_size)
			s->resp_size = sizes.seccomp_notif_resp;
	}
	s->workers = calloc((size_t)s->nworkers, sizeof(*s->workers));
	if (!s->workers) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (int i = 0; i < s->nworkers; i++) {
		if (!worker_init(&s->workers[i], s, notif_size)) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
	}
	if (cfg->bulk_lane) {
		s->bulk = calloc(1, sizeof(*s->bulk));
		if (!s->bulk || !worker_init(s->bulk, s, notif_size)) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
	}
	/* Beside several workers a receiver would only take calls from them. */
	if (s->nworkers == 1) {
		s->rcv = aligned_alloc(64, sizeof(*s->rcv));
		if (s->rcv)
			memset(s->rcv, 0, sizeof(*s->rcv));
		if (!s->rcv || !worker_init(&s->rcv->wk, s, notif_size)) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
	}
	return s;
}

int nt_super_start(struct nt_super *s)
{
	int err = 0;

	if (s->rcv && (err = nt_receiver_start(s)))
		return err;
	if (s->bulk) {
		if ((err = pthread_create(&s->bulk->thread, NULL, bulk_main, s->bulk))) {
			nt_super_stop(s);
			nt_super_wait(s);
			return -err;
		}
		s->bulk_running = true;
	}
	for (s->started = 0; s->started < s->nworkers; s->started++) {
		err = pthread_create(&s->workers[s->started].thread, NULL, worker_main,
				     &s->workers[s->started]);
		if (err)
			break;
	}
	if (err) {
		nt_super_stop(s);
		nt_super_wait(s);
	}
	return -err;
}

void nt_super_wait(struct nt_super *s)
{
	for (int i = 0; i < s->started; i++)
		pthread_join(s->workers[i].thread, NULL);
	s->started = 0;
	if (s->bulk_running) {
		xlock(&s->bulk_lock); /* s->stopping is set: see it, under the lock it waits with */
		xcond_signal(&s->bulk_cond);
		xunlock(&s->bulk_lock);
		pthread_join(s->bulk->thread, NULL);
		s->bulk_running = false;
	}
	if (s->rcv && s->rcv->running) {
		nt_receiver_kick(s); /* in case no worker was there to (s->stopping is set) */
		pthread_join(s->rcv->wk.thread, NULL);
		s->rcv->running = false;
	}
}

int nt_super_run(struct nt_super *s)
{
	int err = nt_super_start(s);

	if (!err)
		nt_super_wait(s);
	return err;
}

void nt_super_stop(struct nt_super *s)
{
	uint64_t one = 1;

	atomic_store(&s->stopping, true);
	/* async-signal-safe: a write to an eventfd */
	if (write(s->stop.fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: workers are stopping */
	}
}

void nt_super_free(struct nt_super *s)
{
	struct nt_listener *l, *lt;

	if (!s)
		return;
	/* what is torn down from here on did not happen to the programs served */
	sv_journal_attach(NULL);
	s->journaling = false;
	/* Workers have stopped: nobody else touches the tables. */
	cds_list_for_each_entry_safe(l, lt, &s->listeners, node) {
		cds_list_del(&l->node);
		nt_listener_put(l);
	}
	/* Threads and processes stay allocated, and with them the namespaces they hold: the
	   engine owns the rest of them and the process exits right after this. */
	nsreg_fini(&s->reg);
	close(s->epfd);
	close(s->stop.fd);
	close(s->timer.fd);
	close(s->sweep.fd);
	close(s->exits.fd);
	for (int i = 0; i < s->nworkers; i++)
		worker_fini(&s->workers[i]);
	free(s->workers);
	if (s->rcv) {
		worker_fini(&s->rcv->wk);
		free(s->rcv);
	}
	if (s->bulk) {
		worker_fini(s->bulk);
		free(s->bulk);
	}
	free(s->timers);
	dur_close(s->dur);
}

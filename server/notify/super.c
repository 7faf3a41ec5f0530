/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's machinery: one epoll set, a fixed pool of workers, and the event sources in
 * it (listeners, the parked-call timer, the vanished-caller sweep, process and thread pidfds).
 *
 * Every source is registered EPOLLONESHOT: the worker that gets an event owns the source until it
 * re-arms it. A listener is re-armed right after NOTIF_RECV, so another worker can take the next
 * notification while this one serves.
 *
 * With SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set on a listener the kernel wakes its waiter on the
 * caller's CPU and, when we answer, the caller on ours: on this kind of machine the difference
 * between ~5 us and ~70 us per call (bench/floor). epoll does not pass that on: the listener's
 * wake-up reaches the epoll waiter as an ordinary one, ~1.5 us dearer per call. Nor is a wait
 * in poll(2) followed by NOTIF_RECV free: two system calls and two wait-queue round trips where
 * a NOTIF_RECV that blocks needs one, ~1.4 us of a ~12 us call on a machine where system calls
 * are dear.
 *
 * The receiver
 * ------------
 * So a lone worker (the default) gets a second thread, the receiver, that serves one listener,
 * the busiest, with a blocking NOTIF_RECV: the caller's CPU runs it at once and nothing else is
 * in the way. Everything else (other listeners, timers, exits, the sweep) stays with the worker
 * and its epoll set. Hundreds of idle listeners cost nothing, and the busy one is as cheap to
 * serve as if it were alone.
 *
 *  - Hand-over. The worker serves a listener's call from epoll and then, if the receiver has
 *    nothing or its listener received nothing since the worker last served one, offers the
 *    listener (rcv->offer) instead of re-arming it. The receiver takes it and re-arms the one it
 *    had. Two busy listeners therefore do not swap back and forth.
 *  - Hang-ups. While the receiver owns a listener (l->received), its epoll entry watches for a
 *    hang-up only, still EPOLLONESHOT. Only the worker ever handles a hang-up (listener_hup()),
 *    so a listener is freed by the only thread that takes events from the epoll set: for a
 *    received listener the worker kicks the receiver, which finds the hang-up with poll(2) and
 *    hands the listener back, and the re-arm reports the hang-up to the worker again. (A
 *    NOTIF_RECV on a listener nobody uses any more returns ENOENT since Linux 6.11; before, it
 *    waits forever, hence the kick.)
 *  - Kicks. The worker interrupts the receiver's NOTIF_RECV with a signal (KICK_SIG, handled
 *    without SA_RESTART, so the ioctl returns EINTR). A signal that lands just before the
 *    receiver enters the ioctl is lost, so a kick is a generation number the receiver
 *    acknowledges at the top of its loop, and the worker repeats the signal until it does.
 *    Kicks are rare: a hand-over, a hang-up, the stop.
 *  - Only listeners with SYNC_WAKE_UP (Linux 6.6+) are offered: without it a blocking RECV
 *    gains nothing over epoll, which then serves them all.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "notify/notify_int.h"
#include "util/fault.h"

#define SWEEP_INTERVAL_MS 100
#define PROBE_SWEEPS	  10 /* namespaces without a confined thread are probed once a second */

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

void nt_drain_exits(struct nt_worker *wk)
{
	struct nt_super *s = wk->super;
	struct epoll_event ev[16];
	int n;

	xlock(&s->exits_lock);
	do {
		n = epoll_wait(s->exits.fd, ev, 16, 0);
		for (int i = 0; i < n; i++) {
			struct sv_wakeq wq;

			sv_wakeq_init(&wq);
			ident_process_exited(
			    s, caa_container_of(ev[i].data.ptr, struct nt_process, src), &wq);
			nt_deliver(wk, &wq);
		}
	} while (n == 16);
	xunlock(&s->exits_lock);
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

/* ---- namespaces (nsreg.h) ---- */

int nt_super_for_each_ns(struct nt_super *s,
			 int (*fn)(const char *name, struct sv_ns *ns, void *arg), void *arg)
{
	struct nt_ns *n;
	int ret = 0;

	xlock(&s->reg.lock);
	cds_list_for_each_entry(n, &s->reg.namespaces, node) {
		ret = fn(n->name, n->ns, arg);
		if (ret)
			break;
	}
	xunlock(&s->reg.lock);
	return ret;
}

/* Ask the kernel which of the namespaces nobody we serve is in have ended. */
static void probe_namespaces(struct nt_worker *wk)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	nsreg_probe(&wk->super->reg, &wq);
	nt_deliver(wk, &wq);
}

/* ---- listeners ---- */

void nt_listener_put(struct nt_listener *l)
{
	if (atomic_fetch_sub_explicit(&l->refcount, 1, memory_order_acq_rel) != 1)
		return;
	close(l->src.fd);
	if (l->fixed_ns)
		nt_ns_put(l->fixed_ns);
	free(l);
}

int nt_super_add_listener(struct nt_super *s, int fd, const struct nt_listener_opts *opts)
{
	struct nt_listener *l = calloc(1, sizeof(*l));

	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->src = (struct nt_src){ SRC_LISTENER, fd };
	l->refcount = 1;
	l->super = s;
	l->ns_traps = opts && opts->ns_traps;
	snprintf(l->name, sizeof(l->name), "%s", opts && opts->name ? opts->name : "listener");
	if (opts && opts->ns_name) {
		l->fixed_ns = nsreg_named(&s->reg, opts->ns_name);
		if (!l->fixed_ns) {
			close(fd);
			free(l);
			return -ENOMEM;
		}
	}
	/*
	 * Wake-ups on the current CPU (6.6+). Without it the caller and the worker tend to land
	 * on different CPUs and every call pays for cross-CPU wake-ups.
	 */
	l->sync_wake =
	    !ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);

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

int nt_super_nlisteners(struct nt_super *s)
{
	int n;

	xlock(&s->lock);
	n = s->nlisteners;
	xunlock(&s->lock);
	return n;
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

/*
 * Receive one notification from @l and serve it: 0, or -errno from NOTIF_RECV (ENOENT: the
 * caller was interrupted before we picked its call up, or, since 6.11, nobody uses @l any more;
 * EINTR: the receiver was kicked). With @rearm, @l goes back into the epoll set before serving,
 * so another worker can take its next notification meanwhile. Caller owns @l's source.
 */
static int receive(struct nt_worker *wk, struct nt_listener *l, bool rearm)
{
	int rc;

	/* NOTIF_RECV insists on a zeroed buffer. */
	memset(wk->notif, 0, wk->notif_size);
	rc = ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_RECV, wk->notif) ? -errno : 0;
	if (rc == 0)
		atomic_fetch_add_explicit(&l->calls, 1, memory_order_relaxed);
	/* Once re-armed, @l may hang up and go while we serve; the request keeps it. */
	atomic_fetch_add_explicit(&l->refcount, 1, memory_order_relaxed);
	if (rearm)
		nt_rearm(wk->super, &l->src);
	if (rc == 0)
		nt_serve(wk, l, wk->notif);
	nt_listener_put(l);
	return rc;
}

/* ---- the receiver (see the top of this file) ---- */

#define KICK_SIG       SIGRTMIN
#define KICK_RESEND_NS 200000L /* a lost kick is sent again after this long */
#define KICK_POLL_NS   20000L  /* the worker looks for the acknowledgement this often */

static void kick_handler(int sig)
{
	(void)sig; /* its only job is to interrupt NOTIF_RECV */
}

static void futex_wake_all(atomic_uint *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/*
 * Make the receiver go round its loop once more, and wait until it has: it then has seen
 * everything the caller did before. Called by the worker only (one kicker at a time).
 */
static void receiver_kick(struct nt_super *s)
{
	struct nt_receiver *r = s->rcv;
	unsigned gen = atomic_fetch_add_explicit(&r->kick, 1, memory_order_acq_rel) + 1;
	const struct timespec poll_gap = { 0, KICK_POLL_NS };

	futex_wake_all(&r->kick); /* a receiver with no listener waits on @kick */
	for (long waited = KICK_RESEND_NS;; waited += KICK_POLL_NS) {
		if (waited >= KICK_RESEND_NS) {
			pthread_kill(r->wk.thread, KICK_SIG);
			waited = 0;
		}
		if ((int)(atomic_load_explicit(&r->ack, memory_order_acquire) - gen) >= 0 ||
		    atomic_load_explicit(&r->done, memory_order_acquire))
			return;
		nanosleep(&poll_gap, NULL);
	}
}

/*
 * The worker has served a call of @l from epoll (@l is disarmed there): offer it to the
 * receiver when the receiver's own listener has been quiet since the worker last looked, or
 * re-arm it. True when offered.
 */
static bool receiver_offer(struct nt_super *s, struct nt_listener *l)
{
	struct nt_receiver *r = s->rcv;
	uint64_t served = atomic_load_explicit(&r->served, memory_order_relaxed);
	bool quiet = served == r->seen;
	struct epoll_event ev = { .events = EPOLLONESHOT, .data.ptr = &l->src };

	r->seen = served;
	if (!quiet || atomic_load_explicit(&r->offer, memory_order_relaxed))
		return false;
	atomic_store(&l->received, true);
	/* The receiver's reference: see receiver_hand_back(). */
	atomic_fetch_add_explicit(&l->refcount, 1, memory_order_relaxed);
	/* Hang-ups only (epoll always reports EPOLLHUP and EPOLLERR). */
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, l->src.fd, &ev))
		abort();
	atomic_store_explicit(&r->offer, l, memory_order_release);
	NT_COUNT_EVENT(s, handovers);
	receiver_kick(s);
	return true;
}

/*
 * The receiver lets @l go: back into the epoll set, where the worker sees its next event. From
 * the store on, a hang-up event the worker already holds may make it drop @l (listener_hup(),
 * which takes @l out of the epoll set, so the re-arm then fails with ENOENT, which is fine):
 * the reference taken with the offer keeps @l until the re-arm is done.
 */
static void receiver_hand_back(struct nt_super *s, struct nt_listener *l)
{
	/* Before the re-arm: the worker must see a hang-up it reports as its own to handle. */
	atomic_store(&l->received, false);
	nt_rearm(s, &l->src);
	nt_listener_put(l);
}

static void *receiver_main(void *arg)
{
	struct nt_receiver *r = arg;
	struct nt_super *s = r->wk.super;
	struct nt_listener *l;
	bool check = false;
	sigset_t mask;

	/* Like every worker it takes no process signal, but the kick has to reach it. */
	sigfillset(&mask);
	sigdelset(&mask, KICK_SIG);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	sv_thread_register();
	for (;;) {
		unsigned gen = atomic_load_explicit(&r->kick, memory_order_acquire);
		int rc;

		if (atomic_load_explicit(&s->stopping, memory_order_relaxed))
			break;
		if (atomic_load_explicit(&r->offer, memory_order_relaxed)) {
			l = atomic_exchange_explicit(&r->offer, NULL, memory_order_acquire);
			if (r->hot)
				receiver_hand_back(s, r->hot);
			r->hot = l;
			check = true;
		}
		/* Woken without a call: was it a hang-up? */
		if (check && r->hot) {
			struct pollfd pfd = { .fd = r->hot->src.fd, .events = POLLIN };

			if (poll(&pfd, 1, 0) > 0 && (pfd.revents & ~POLLIN)) {
				receiver_hand_back(s, r->hot);
				r->hot = NULL;
			}
		}
		check = false;
		atomic_store_explicit(&r->ack, gen, memory_order_release);
		if (!r->hot) {
			syscall(SYS_futex, &r->kick, FUTEX_WAIT_PRIVATE, gen, NULL, NULL, 0);
			continue;
		}
		rc = receive(&r->wk, r->hot, false);
		if (rc == 0) {
			/* Only this thread writes it. */
			atomic_store_explicit(
			    &r->served, atomic_load_explicit(&r->served, memory_order_relaxed) + 1,
			    memory_order_relaxed);
			NT_ADD(&r->wk.stats, received, 1);
		} else {
			check = true;
		}
	}
	/* Stopping: nothing is re-armed any more, the references go. */
	if (r->hot)
		nt_listener_put(r->hot);
	l = atomic_exchange_explicit(&r->offer, NULL, memory_order_acquire);
	if (l)
		nt_listener_put(l);
	atomic_store_explicit(&r->done, true, memory_order_release);
	sv_thread_unregister();
	return NULL;
}

/* ---- workers ---- */

/* Handles one event from the epoll set; false when the supervisor stops. */
static bool dispatch(struct nt_worker *wk, const struct epoll_event *ev)
{
	struct nt_super *s = wk->super;
	struct nt_src *src = ev->data.ptr;

	switch (src->kind) {
	case SRC_LISTENER: {
		struct nt_listener *l = caa_container_of(src, struct nt_listener, src);

		if (!(ev->events & EPOLLIN)) {
			/* A hang-up. The receiver's listener it hands back first (top of file). */
			if (atomic_load(&l->received))
				receiver_kick(s);
			else
				listener_hup(wk, l);
		} else if (!s->rcv || !l->sync_wake) {
			receive(wk, l, true);
		} else {
			receive(wk, l, false);
			if (!receiver_offer(s, l))
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
		ident_thread_exited(s, caa_container_of(src, struct nt_thread, src));
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
			receiver_kick(s); /* it sees s->stopping */
		return false;
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct nt_worker *wk = arg;
	struct nt_super *s = wk->super;
	sigset_t all;

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
	wk->notif_size = notif_size;
	wk->notif = calloc(1, notif_size);
	return wk->notif != NULL;
}

static void worker_fini(struct nt_worker *wk)
{
	free(wk->notif);
	free(wk->spare);
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
	CDS_INIT_LIST_HEAD(&s->parked);
	xmutex_init(&s->lock);
	xmutex_init(&s->tables_lock);
	xmutex_init(&s->timers_lock);
	xmutex_init(&s->parked_lock);
	xmutex_init(&s->exits_lock);
	tgt_probe(&s->feat);
	/* Without explicit limits each IPC namespace's /proc/sys/kernel/sem rules, natively. */
	if (nsreg_init(&s->reg, &s->feat, cfg->limits)) {
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

	if (s->rcv) {
		/* No SA_RESTART: the kick must end the receiver's NOTIF_RECV with EINTR. */
		struct sigaction sa = { .sa_handler = kick_handler };

		sigemptyset(&sa.sa_mask);
		if (sigaction(KICK_SIG, &sa, NULL))
			return -errno;
		err = pthread_create(&s->rcv->wk.thread, NULL, receiver_main, s->rcv);
		if (err)
			return -err;
		s->rcv->running = true;
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
	if (s->rcv && s->rcv->running) {
		receiver_kick(s); /* in case no worker was there to (s->stopping is set) */
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
	free(s->timers);
}

/* ---- control ---- */

int nt_super_for_each_client(struct nt_super *s, int (*fn)(const struct nt_client_info *, void *),
			     void *arg)
{
	struct nt_listener *l;
	int ret = 0;

	xlock(&s->lock);
	cds_list_for_each_entry(l, &s->listeners, node) {
		struct nt_client_info info = {
			.ns_traps = l->ns_traps,
			.calls = atomic_load_explicit(&l->calls, memory_order_relaxed),
			.parked = atomic_load_explicit(&l->parked, memory_order_relaxed),
		};

		snprintf(info.name, sizeof(info.name), "%s", l->name);
		if (l->fixed_ns)
			snprintf(info.ns, sizeof(info.ns), "%s", l->fixed_ns->name);
		ret = fn(&info, arg);
		if (ret)
			break;
	}
	xunlock(&s->lock);
	return ret;
}

/* Every counter is a uint64_t, read by other threads while its owner adds to it. */
static void stats_zero(struct nt_stats *st)
{
	uint64_t *c = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		__atomic_store_n(&c[i], 0, __ATOMIC_RELAXED);
}

void nt_super_reset_stats(struct nt_super *s)
{
	struct nt_ns *n;

	for (int i = 0; i < s->nworkers; i++)
		stats_zero(&s->workers[i].stats);
	if (s->rcv)
		stats_zero(&s->rcv->wk.stats);
	stats_zero(&s->events);
	xlock(&s->reg.lock);
	cds_list_for_each_entry(n, &s->reg.namespaces, node)
		sv_ns_reset_stats(n->ns);
	xunlock(&s->reg.lock);
}

struct sv_ns *nt_super_find_ns(struct nt_super *s, const char *name)
{
	struct nt_ns *n = nsreg_find(&s->reg, name);
	struct sv_ns *ns = NULL;

	if (n) {
		ns = n->ns;
		sv_ns_get(ns);
		nt_ns_put(n);
	}
	return ns;
}

int nt_super_remove_set(struct nt_super *s, const char *ns, int id)
{
	struct sv_ns *sns = nt_super_find_ns(s, ns);
	struct sv_wakeq wq;
	int ret;

	if (!sns)
		return -ENOENT;
	sv_wakeq_init(&wq);
	ret = sv_ns_remove_set(sns, id, &wq);
	sv_ns_put(sns);
	/* the waiters get EIDRM, delivered as any completion is */
	nt_deliver(NULL, &wq);
	return ret;
}

int nt_super_set_limits(struct nt_super *s, const char *ns, const struct sv_limits *lim)
{
	struct nt_ns *n;
	int ret = 0;

	if (lim->semmni < 0 || lim->semmni > SV_IPCMNI)
		return -ERANGE;
	if (!ns) {
		nsreg_set_limits(&s->reg, lim);
		return 0;
	}
	n = nsreg_find(&s->reg, ns);
	if (!n)
		return -ENOENT;
	ret = sv_ns_set_limits(n->ns, lim);
	nt_ns_put(n);
	return ret;
}

/* ---- statistics ---- */

/* Fold one set of counters into another; every counter is a uint64_t. */
static void stats_add(struct nt_stats *to, const struct nt_stats *from)
{
	const uint64_t *f = (const uint64_t *)from;
	uint64_t *t = (uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		t[i] += __atomic_load_n(&f[i], __ATOMIC_RELAXED);
}

void nt_super_stats(struct nt_super *s, struct nt_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < s->nworkers; i++)
		stats_add(out, &s->workers[i].stats);
	if (s->rcv)
		stats_add(out, &s->rcv->wk.stats);
	stats_add(out, &s->events);
	out->namespaces_ended += atomic_load_explicit(&s->reg.ended, memory_order_relaxed);
}

static const char *const call_names[NT_NCALLS] = {
	"semget", "semop", "semtimedop", "semctl", "namespace changes", "other"
};

void nt_stats_print(const struct nt_stats *st, FILE *f)
{
	uint64_t total = 0, served = 0;

	for (int i = 0; i < NT_NCALLS; i++)
		total += st->calls[i];
	for (int b = 0; b < NT_NBUCKET; b++)
		served += st->service_ns[b];
	fprintf(f, "semvisor: %llu calls served:", (unsigned long long)total);
	for (int i = 0; i < NT_NCALLS; i++)
		if (st->calls[i])
			fprintf(f, " %s %llu", call_names[i], (unsigned long long)st->calls[i]);
	fprintf(f,
		"\nsemvisor: waits %llu (woken %llu, timed out %llu, interrupted %llu), "
		"rolled back %llu, kept %llu, callers gone %llu\n",
		(unsigned long long)st->parked, (unsigned long long)st->woken,
		(unsigned long long)st->timeouts, (unsigned long long)st->interrupted,
		(unsigned long long)st->rolled_back, (unsigned long long)st->kept,
		(unsigned long long)st->stale);
	fprintf(f, "semvisor: errors:");
	bool any = false;
	for (int e = 1; e < NT_NERRNO; e++) {
		if (st->errors[e]) {
			fprintf(f, " %s %llu", strerrorname_np(e) ? strerrorname_np(e) : "?",
				(unsigned long long)st->errors[e]);
			any = true;
		}
	}
	fprintf(f, "%s\n", any ? "" : " none");
	if (served) {
		/* median service time from the log2 histogram: the bucket's upper bound */
		uint64_t half = (served + 1) / 2, acc = 0;
		int b = 0;

		for (; b < NT_NBUCKET && acc + st->service_ns[b] < half; b++)
			acc += st->service_ns[b];
		fprintf(f, "semvisor: median service time < %llu ns\n", 1ull << (b + 1));
	}
	if (st->received)
		fprintf(f, "semvisor: %llu calls taken by the receiver, %llu hand-overs\n",
			(unsigned long long)st->received, (unsigned long long)st->handovers);
}

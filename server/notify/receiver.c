/* SPDX-License-Identifier: MIT */
/*
 * Receiving calls, by the workers from epoll and by the receiver with a blocking receive.
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
 *    hang-up only, still EPOLLONESHOT. Only the worker ever handles a hang-up (super.c),
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
 *    gains nothing over epoll, which then serves them all. Nor are heavy ones (super.c's
 *    lanes): the receiver hands its listener back once it has become heavy, and the worker
 *    then moves it to the bulk lane.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "notify/listener.h"
#include "notify/receiver.h"
#include "notify/recover.h"
#include "notify/serve.h"
#include "notify/stats.h"
#include "notify/super.h"
#include "notify/threads.h"
#include "util/debug.h"
#include "util/killpoint.h"

int nt_receive(struct nt_worker *wk, struct nt_listener *l, bool rearm)
{
	struct seccomp_notif *n = nt_slot_arm(wk, l);
	int rc = l->tp->recv(l, n, wk->notif_size);

	if (rc == 0) {
		nt_slot_received(wk, nt_now_ns());
		atomic_fetch_add_explicit(&l->calls, 1, memory_order_relaxed);
		sv_kp(SV_KP_RECEIVED);
	}
	/* Once re-armed, @l may hang up and go while we serve; the request keeps it. */
	nt_listener_get(l);
	if (rearm)
		nt_rearm(wk->super, &l->src);
	if (rc == 0)
		nt_serve(wk, l, n);
	nt_listener_put(l);
	return rc;
}

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

/* Once it has gone round, it has seen everything the caller did before. */
void nt_receiver_kick(struct nt_super *s)
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

bool nt_receiver_offer(struct nt_super *s, struct nt_listener *l)
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
	nt_receiver_kick(s);
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
	SV_DEBUG_YIELD(); /* the worker may handle a hang-up of l before the re-arm */
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

	nt_thread_start("sv-receiver", true);
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
		rc = nt_receive(&r->wk, r->hot, false);
		if (rc == 0) {
			/* Only this thread writes it. */
			atomic_store_explicit(
			    &r->served, atomic_load_explicit(&r->served, memory_order_relaxed) + 1,
			    memory_order_relaxed);
			NT_ADD(&r->wk.stats, received, 1);
			/* Its next call goes to the bulk lane: through the worker (super.c). */
			if (s->bulk && nt_listener_heavy(r->hot)) {
				receiver_hand_back(s, r->hot);
				r->hot = NULL;
			}
		} else {
			check = true;
		}
	}
	/*
	 * Stopping: nothing is re-armed any more, the references go; unless the workers only
	 * pause (a checkpoint, recover.c), and then the main set serves them until we are back.
	 */
	l = atomic_exchange_explicit(&r->offer, NULL, memory_order_acquire);
	if (s->pausing) {
		if (r->hot)
			receiver_hand_back(s, r->hot);
		if (l)
			receiver_hand_back(s, l);
	} else {
		if (r->hot)
			nt_listener_put(r->hot);
		if (l)
			nt_listener_put(l);
	}
	r->hot = NULL;
	atomic_store_explicit(&r->done, true, memory_order_release);
	sv_thread_unregister();
	return NULL;
}

int nt_receiver_start(struct nt_super *s)
{
	/* No SA_RESTART: the kick must end the receiver's NOTIF_RECV with EINTR. */
	struct sigaction sa = { .sa_handler = kick_handler };
	int err;

	sigemptyset(&sa.sa_mask);
	if (sigaction(KICK_SIG, &sa, NULL))
		return -errno;
	atomic_store(&s->rcv->done, false); /* a start after a pause (nt_super_checkpoint()) */
	err = pthread_create(&s->rcv->wk.thread, NULL, receiver_main, s->rcv);
	if (err)
		return -err;
	s->rcv->running = true;
	return 0;
}

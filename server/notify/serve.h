/* SPDX-License-Identifier: MIT */
/*
 * Serving one trapped call (serve.c): the calls are told apart by their x86_64 numbers.
 */
#ifndef SV_NOTIFY_SERVE_H
#define SV_NOTIFY_SERVE_H

#include <linux/seccomp.h>
#include <stdint.h>
#include <time.h>

#include "engine/sem.h"

struct nt_worker;
struct nt_listener;

#define NR_SEMGET     64
#define NR_SEMOP      65
#define NR_SEMCTL     66
#define NR_SEMTIMEDOP 220

/* Serve call n, received through l. The caller holds a reference to l. */
void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n);
/* The same for a call received at t0 (CLOCK_MONOTONIC ns): its timeout counts from there. */
void nt_serve_from(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		   int64_t t0);

/*
 * A semop that a previous supervisor process parked, still unanswered in the kernel (its
 * notification pending on l, which outlived that process): served again as it was made, at
 * received_ns, with the sops and timeout read then, its permission check already passed. It
 * parks again, or completes if what it waits for happened meanwhile; if its caller has gone,
 * nothing is done.
 */
struct nt_again {
	uint64_t id;
	int32_t tid;
	int nr; /* NR_SEMOP or NR_SEMTIMEDOP */
	uint64_t args[6];
	int64_t received_ns;
	struct timespec timeout; /* semtimedop's, when args[3] is set */
	unsigned int nsops;
	const struct sv_sembuf *sops;
};

void nt_serve_again(struct nt_worker *wk, struct nt_listener *l, const struct nt_again *a);

#endif

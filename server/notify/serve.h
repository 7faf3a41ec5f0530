/* SPDX-License-Identifier: MIT */
/*
 * Serving one trapped call (serve.c): the calls are told apart by their x86_64 numbers.
 */
#ifndef SV_NOTIFY_SERVE_H
#define SV_NOTIFY_SERVE_H

#include <linux/seccomp.h>

struct nt_worker;
struct nt_listener;

#define NR_SEMGET     64
#define NR_SEMOP      65
#define NR_SEMCTL     66
#define NR_SEMTIMEDOP 220

/* Serve call n, received through l. The caller holds a reference to l. */
void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n);

#endif

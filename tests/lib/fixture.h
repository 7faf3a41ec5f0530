/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the engine tests: a namespace, callers with chosen credentials, and short
 * ways to issue calls and collect the waiters a call completed.
 */
#ifndef SV_TEST_FIXTURE_H
#define SV_TEST_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sem.h"

struct fx_caller {
	struct sv_caller c;
	struct sv_cred cred;
	uint32_t groups[8];
};

/* A fresh namespace with Linux's default limits, the thread registered. */
extern struct sv_ns *fx_ns;
void fx_setup(void);
void fx_teardown(void);

/* A caller (its own process, pid) with euid/egid/fsgid; root gets CAP_IPC_OWNER + SYS_ADMIN. */
struct fx_caller *fx_caller_new(struct sv_ns *ns, int32_t pid, uint32_t uid, uint32_t gid);
/* Another thread of the same process: shares the proc (and so the undo list). */
struct fx_caller *fx_caller_thread(struct fx_caller *of);
/* Exit the caller's process (applies SEM_UNDO) and free it; completions go to wq (may be NULL). */
void fx_caller_exit(struct fx_caller *fc, struct sv_wakeq *wq);

/* semop with one to four sops given inline; park (may be NULL) receives the ticket. */
long fx_semop(struct fx_caller *fc, int id, struct sv_park *park, struct sv_wakeq *wq,
	      unsigned int nsops, const struct sv_sembuf *sops);
long fx_semctl(struct fx_caller *fc, int id, int semnum, int cmd, uint64_t arg, struct sv_wakeq *wq);
int fx_getval(struct fx_caller *fc, int id, int semnum);

/* Pop every waiter of wq: results into res[] in order (up to cap), cookies into cookies[]. */
int fx_drain(struct sv_wakeq *wq, int *res, void **cookies, int cap);

#define SOPS(...) (sizeof((struct sv_sembuf[]){ __VA_ARGS__ }) / sizeof(struct sv_sembuf)), \
		  ((const struct sv_sembuf[]){ __VA_ARGS__ })

#endif

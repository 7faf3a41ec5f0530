/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the engine tests: a namespace, callers with chosen credentials, and short
 * ways to issue calls and collect the waiters a call completed. And one for the notify layer's
 * tests, which serve confined children from a supervisor in the test process.
 */
#ifndef SV_TEST_FIXTURE_H
#define SV_TEST_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "engine/fastword.h"
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
long fx_semctl(struct fx_caller *fc, int id, int semnum, int cmd, uint64_t arg,
	       struct sv_wakeq *wq);
int fx_getval(struct fx_caller *fc, int id, int semnum);

/* Pop every waiter of wq: results into res[] in order (up to cap), cookies into cookies[]. */
int fx_drain(struct sv_wakeq *wq, int *res, void **cookies, int cap);

/* ---- helpers for the blocking, rollback and stress tests ---- */

/* fx_semop with a relative timeout (ts NULL: none), as semtimedop(2). */
long fx_semtimedop(struct fx_caller *fc, int id, const struct timespec *ts, struct sv_park *park,
		   struct sv_wakeq *wq, unsigned int nsops, const struct sv_sembuf *sops);
/*
 * An operation that is expected to wait: its ticket, or NULL if it did not park (what it returned
 * then goes to *ret when ret is not NULL). A parking call completes nobody, so no wake queue.
 */
struct sv_waiter *fx_park(struct fx_caller *fc, int id, void *cookie, long *ret, unsigned int nsops,
			  const struct sv_sembuf *sops);
int fx_getncnt(struct fx_caller *fc, int id, int semnum);
int fx_getzcnt(struct fx_caller *fc, int id, int semnum);
int fx_getpid(struct fx_caller *fc, int id, int semnum);
/* Pop every waiter of wq into w[] (up to cap; any beyond are freed): returns how many were on wq. */
int fx_take(struct sv_wakeq *wq, struct sv_waiter **w, int cap);

/* IPC_STAT, decoded from the 104-byte struct semid64_ds at the offsets of SPEC A7.4. */
struct fx_stat {
	int32_t key;
	uint32_t uid, gid, cuid, cgid, mode;
	uint16_t seq;
	int64_t otime, ctime;
	uint64_t nsems;
};
long fx_ipc_stat(struct fx_caller *fc, int id, struct fx_stat *st);

/*
 * A program's view of a set's fast storage: what it maps of the fds sv_fast_map() gives it
 * (which it closes), and one fast operation by its thread in pending slot `slot`.
 */
struct fx_fast {
	struct sv_fast_map m;
	_Atomic uint64_t *words;
	struct fw_pub *pub; /* read-only */
	struct fw_page *page;
};

int fx_fast_map(struct fx_caller *fc, int id, struct fx_fast *p); /* 0 or sv_fast_map()'s -errno */
void fx_fast_unmap(struct fx_fast *p);
struct fw_op fx_fast_op(const struct fx_fast *p, unsigned slot, unsigned num, int d, bool undo);

/*
 * In a forked child: install the filter on this process and send its listener over sock in
 * the hand-off message, as semvisor-run's launcher does; the test adds it to its supervisor.
 * Exits the child (92: no filter, 93: not sent) when either fails.
 */
void fx_confine(int sock);

/*
 * This process's own listener, made once: its filter traps only getpgid(FX_MAGIC_PID), which
 * nothing but the tests that want a notification call, so everything else runs natively.
 * -errno if the filter could not be installed. A test that closes it says so, and the next
 * call makes none: a process may have only one filter with a listener.
 */
#define FX_MAGIC_PID 0x5eed0c
int fx_magic_listener(void);
void fx_magic_listener_closed(void);

#define SOPS(...)                                                                                  \
	(sizeof((struct sv_sembuf[]){ __VA_ARGS__ }) / sizeof(struct sv_sembuf)),                  \
	    ((const struct sv_sembuf[]){ __VA_ARGS__ })

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The supervisor: answers the semaphore calls of confined programs from the engine.
 *
 * Listener fds (one per seccomp filter: per semvisor-run program tree, per container) are added
 * to one supervisor. A fixed pool of worker threads serves all of them: workers wait together on
 * one epoll set holding every listener (EPOLLONESHOT, so exactly one worker receives a given
 * notification), the timer of parked semtimedop calls, and the pidfds that report process exit
 * for SEM_UNDO; a lone worker also gets a receiver thread for its busiest listener. A parked
 * call costs memory, never a thread.
 *
 * Used by semvisor-run (one listener; the supervisor ends with its last confined process) and by
 * semvisord (many listeners, runs until stopped). This is the folder's only public header; the
 * map of its files, each one concern, and the order of its locks are in super.h.
 */
#ifndef SV_NOTIFY_H
#define SV_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/sem.h"

struct nt_super;

struct nt_config {
	int nworkers;			/* 0: one (see nt_super_new() for why) */
	const struct sv_limits *limits; /* for new namespaces; NULL: the host's */
	struct sv_budget *budget;	/* shared by every namespace (referenced); NULL: none */
	FILE *trace;			/* non-NULL: one line per served call */
	bool exit_when_idle;		/* run() returns once the last listener is gone */
	bool bulk_lane;			/* heavy listeners get a lane of their own (super.c) */
	/* refuse the fast path's requests (fastabi.h) with the kernel's own EINVAL */
	bool no_fast_path;
};

/*
 * Kubernetes' names for a client, from its runtime's CRI annotations (handoff/msg.h): for
 * people to read in the clients, sets and metrics it shows up in; nothing is decided by them.
 * Each "" where absent.
 */
struct nt_pod {
	char ns[64];	    /* the pod's Kubernetes namespace (a DNS label) */
	char pod[254];	    /* a DNS subdomain */
	char container[64]; /* a DNS label; "" in a namespace's names */
};

struct nt_transport;

struct nt_listener_opts {
	const char *name;	  /* for logs: "pid 1234", a container id, ... */
	const struct nt_pod *pod; /* or NULL */
	bool ns_traps;		  /* its filter traps unshare/setns (filter.h), so a thread's
				namespaces may be kept between calls; otherwise the IPC namespace
				is read on every call. Never a matter of privilege (ident.h). */
	const char *ns_name;	  /* non-NULL: serve it from this named namespace instead of one
				   per IPC namespace */
	uint64_t key;		  /* names it in a saved state (nt_super_save()); 0: none */
	/* how its calls come (transport.h); NULL: fd is a seccomp notifier */
	const struct nt_transport *tp;
	void *tp_ctx;
};

/* Counters, summed over workers when read. */
enum nt_call {
	NT_SEMGET,
	NT_SEMOP,
	NT_SEMTIMEDOP,
	NT_SEMCTL,
	NT_NS_CHANGE, /* unshare/setns, trapped to note the change; let through */
	NT_OTHER,     /* not ours: answered ENOSYS */
	NT_NCALLS
};

#define NT_NCMDS  21 /* semctl commands 0..20 */
#define NT_NERRNO 134
#define NT_NBUCKET                                                                                 \
	40 /* log2 histogram buckets of nanoseconds: the last finite one ends at 2^39 ns, 9 minutes */

struct nt_stats {
	uint64_t calls[NT_NCALLS];
	uint64_t semctl_cmds[NT_NCMDS + 1]; /* last: unknown commands */
	uint64_t errors[NT_NERRNO];	    /* answers with this errno */
	uint64_t parked;		    /* operations that waited */
	uint64_t woken;			    /* waiters completed by someone else's call */
	uint64_t timeouts;		    /* semtimedop timeouts */
	uint64_t interrupted;		    /* waits ended by a signal or the waiter's death */
	uint64_t rolled_back; /* completions undone because the answer could not be delivered */
	uint64_t kept;	      /* completions that could not be undone and were kept */
	uint64_t stale;	      /* notifications whose caller was gone before we answered */
	uint64_t service_ns[NT_NBUCKET];      /* notification received -> answered, non-waiting */
	uint64_t wait_ns[NT_NBUCKET];	      /* parked -> answered */
	uint64_t service_ns_sum, wait_ns_sum; /* the same durations added up, exactly */
	uint64_t listeners_added, listeners_gone;
	uint64_t processes_exited;
	uint64_t namespaces_ended; /* IPC namespaces found gone, and their sets with them */
	uint64_t received;  /* notifications the receiver took with its blocking NOTIF_RECV */
	uint64_t handovers; /* listeners handed over to the receiver */
	/* calls refused by the budget (nt_config.budget): in all, and by the bound that said no */
	uint64_t budget_refused;
	uint64_t budget_refused_kind[SV_BUDGET_KINDS];
	uint64_t bulk_calls; /* calls of heavy listeners, served in the bulk lane */
	/* semops the programs did themselves (--fast), counted in the words (sv_fast_ops_total) */
	uint64_t fast_ops;
	/*
	 * Of the semtimedop calls and their EAGAIN answers: tries of --fast calls that wait in
	 * the library before they park, which found the semaphore still short (fastabi.h)
	 */
	uint64_t busy_probes;
};

struct nt_super *nt_super_new(const struct nt_config *cfg, char *err, size_t errlen);
/* Serve a listener; the supervisor owns fd and opts->tp_ctx from here on (also on failure): 0 or
   -errno. */
int nt_super_add_listener(struct nt_super *s, int fd, const struct nt_listener_opts *opts);
/* Start the workers (0 or -errno); wait for them to end: nt_super_stop(), or idle if
   exit_when_idle. run() is both. */
int nt_super_start(struct nt_super *s);
void nt_super_wait(struct nt_super *s);
int nt_super_run(struct nt_super *s);
/* Ask run() to return; safe from any thread and from signal handlers. */
void nt_super_stop(struct nt_super *s);
void nt_super_free(struct nt_super *s);

void nt_super_stats(struct nt_super *s, struct nt_stats *out);
/*
 * Takes into the counters every operation programs made in their own memory (--fast) so far,
 * which the engine otherwise counts only when it takes a semaphore back. For statistics a
 * person or a scraper asked for: it takes every word of every set with fast storage.
 */
void nt_super_collect_fast(struct nt_super *s);
int nt_super_nlisteners(struct nt_super *s);
/*
 * Is fd a copy of a listener served already (the same open file)? A client whose handover was
 * cut short by a crash hands it again, and the store may have brought it back already.
 */
bool nt_super_has_listener(struct nt_super *s, int fd);
/* The engine namespaces in use (for the control socket), with the names of the pod whose
   containers were served in it first (for a namespace not named). fn returns non-zero to
   stop. */
int nt_super_for_each_ns(struct nt_super *s,
			 int (*fn)(const char *name, const struct nt_pod *pod, struct sv_ns *ns,
				   void *arg),
			 void *arg);

/* A client: one listener (a semvisor-run program tree, a container). */
struct nt_client_info {
	char name[384]; /* fits handoff/msg.h's HO_CLIENT_NAME_MAX */
	char ns[64];	/* its fixed namespace, else the IPC namespace a new thread of it was
			   last seen in ("" before its first call) */
	struct nt_pod pod;
	bool ns_traps;
	uint64_t calls; /* notifications received through it */
	int parked;	/* its calls waiting now */
};

int nt_super_for_each_client(struct nt_super *s, int (*fn)(const struct nt_client_info *, void *),
			     void *arg);
/* Zero every counter: the workers', the namespaces' per-set and per-semaphore ones. */
void nt_super_reset_stats(struct nt_super *s);
/* CLOCK_MONOTONIC (ns) since when the counters count: the last reset, else the first start
   of a supervisor whose restarts carried them over. */
int64_t nt_super_counting_since(struct nt_super *s);
/* The engine namespace of that name (as nt_super_for_each_ns() names them, or
   "NAMESPACE/POD" as its pod is named), with a reference (sv_ns_put() it), or NULL. */
struct sv_ns *nt_super_find_ns(struct nt_super *s, const char *name);
/* Remove a set as an administrator; its waiters get EIDRM. 0, -ENOENT (no such namespace),
   -EINVAL (no such set). */
int nt_super_remove_set(struct nt_super *s, const char *ns, int id);
/* New limits for one namespace, or (ns NULL) for every namespace and those to come.
   0, -ENOENT, -ERANGE. */
int nt_super_set_limits(struct nt_super *s, const char *ns, const struct sv_limits *lim);

/*
 * Restart without loss (persist.c). A listener's pending notifications outlive the process
 * that serves it while another holds an fd to it (systemd's fd store, a keeper), so a
 * supervisor can stop and another take over with nothing lost, given the state:
 *  - nt_super_save(): once nt_super_wait() has returned (no call is being served; the parked
 *    ones stay unanswered in the kernel), everything the next process needs, in a versioned
 *    byte string: every namespace's sets, limits and id sequence, SEM_UNDO entries of live
 *    processes, the parked calls, the listeners' names and the counters. 0 or -ENOMEM; *buf
 *    is malloc'd.
 *  - nt_super_restore(): in a new supervisor whose listeners were added again with the keys
 *    they were saved under, before nt_super_start(). The state is checked whole before
 *    anything is applied; a state that cannot be read (another format, damaged) is refused
 *    with the reason in err and nothing applied: 0, -EINVAL, -EPROTONOSUPPORT (written by a
 *    newer format), -ENOMEM. Namespaces that ended meanwhile are left out, undo entries of
 *    processes that exited meanwhile are applied, parked calls whose callers went are
 *    dropped; the rest is served on as if nothing happened.
 * Both from a thread registered with sv_thread_register().
 */
int nt_super_save(struct nt_super *s, void **buf, size_t *len);
/*
 * Close every listener, before nt_super_start() only: listeners taken over without a state to
 * serve them with (their parked calls would never be answered) are cut off instead, so the
 * kernel fails their calls with ENOSYS.
 */
void nt_super_drop_listeners(struct nt_super *s);
int nt_super_restore(struct nt_super *s, const void *buf, size_t len, char *err, size_t errlen);

/*
 * Crash safety (recover.c, durable.h). With a memfd the process's death does not take (the fd
 * store keeps it), a kill -9 at any instant loses no set, value, semadj, waiter or call:
 *  - nt_super_journal_open(): the memfd (fd -1: a new one; else the one a previous process
 *    left, its calls kept for nt_super_recover() if after_crash), before anything is restored
 *    or served. 0, -EINVAL / -EPROTONOSUPPORT (not one, or a newer build's), -ENOTSUP (this
 *    kernel's notifications do not fit), -ENOMEM.
 *  - nt_super_recover(): after a crash, in place of nt_super_restore(): the state the memfd
 *    holds (its checkpoint, then its journal), then every call received and not answered:
 *    answered with the result it had if it was done, served again if not. 0, or as
 *    nt_super_restore() (err says why), and then nothing is applied.
 *  - nt_super_journal_start(): checkpoint the state as it is and journal every change from
 *    here on; before nt_super_start(). 0 or -errno.
 *  - nt_super_journal_stop(): before nt_super_save() at a planned stop, or the end: nothing
 *    more goes into the memfd. nt_super_journal_fd() is the memfd, -1 without one.
 * One journaling supervisor per process (the engine's journal is the process's). From a thread
 * registered with sv_thread_register().
 */
int nt_super_journal_open(struct nt_super *s, int fd, bool after_crash);
int nt_super_recover(struct nt_super *s, char *err, size_t errlen);
int nt_super_journal_start(struct nt_super *s);
void nt_super_journal_stop(struct nt_super *s);
int nt_super_journal_fd(const struct nt_super *s);
/*
 * The journal grows with every change until the next checkpoint: nt_super_journal_size() is
 * its size now, and nt_super_checkpoint() starts it anew from a checkpoint of the state as it
 * is, the workers stopped meanwhile (what they were doing is finished first, parked calls stay
 * parked). From the thread that started the supervisor, between its other calls into it.
 * 0, or -errno (the workers are serving again either way).
 */
size_t nt_super_journal_size(const struct nt_super *s);
int nt_super_checkpoint(struct nt_super *s);

/* Human-readable summary (semvisor-run --stats). */
void nt_stats_print(const struct nt_stats *st, FILE *f);

#endif

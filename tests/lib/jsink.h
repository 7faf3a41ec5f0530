/* SPDX-License-Identifier: MIT */
/*
 * A journal for tests: records kept in memory in the order they were appended, and a replay
 * into fresh namespaces, record by record, with a check after each (every prefix of the journal
 * is a state a crash could leave).
 */
#ifndef SV_TEST_JSINK_H
#define SV_TEST_JSINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sem.h"

struct js_sink {
	struct sv_journal j;
	pthread_mutex_t lock;
	unsigned char *buf;
	size_t len, cap;
	size_t nrec;
};

/* Attach a new journal (sv_journal_attach()); js_stop() detaches it and keeps the records. */
struct js_sink *js_start(void);
void js_stop(struct js_sink *s);
void js_free(struct js_sink *s);

/* What a replay brings back: the namespaces by key, the processes it made, the calls done. */
#define JS_MAX_NS    4
#define JS_MAX_PROCS 64

struct js_calls {
	uint64_t *jid;
	int64_t *result;
	size_t n, cap;
};

struct js_target {
	int nns;
	uint64_t nskey[JS_MAX_NS];
	struct sv_ns *ns[JS_MAX_NS];
	int nprocs;
	uint64_t pkey[JS_MAX_PROCS];
	struct sv_proc *procs[JS_MAX_PROCS];
	struct js_calls calls;
	struct sv_replay r;
};

/* A target with one fresh namespace (the host's default limits) for each key given. */
void js_target_init(struct js_target *t, int nns, const uint64_t *keys);
/* The process with key in it, or NULL if the replay made none. */
struct sv_proc *js_target_proc(struct js_target *t, uint64_t key);
void js_target_fini(struct js_target *t);

/*
 * Replay s into t one record at a time; each (may be NULL) runs after every record, with its
 * number. Returns the bytes replayed (s->len), or what sv_journal_replay() returned for the
 * record that failed (-errno), or -1 if it took less than the record.
 */
long js_replay(const struct js_sink *s, struct js_target *t,
	       void (*each)(struct js_target *t, size_t rec, void *arg), void *arg);

/* Look up a call's result: 0 found (in *result; the last one if done again), -1 not there. */
int js_call(const struct js_calls *c, uint64_t jid, int64_t *result);

/*
 * Do namespaces a and b hold the same state: sets with their ids, keys, owners, modes, times,
 * values and sempids, the same limits and sem_next_id (statistics aside)? 0 if so; else 1 and
 * the first difference in why.
 */
int js_diff(struct sv_ns *a, struct sv_ns *b, char *why, size_t n);
#endif /* SV_TEST_JSINK_H */

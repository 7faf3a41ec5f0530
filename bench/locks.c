/* SPDX-License-Identifier: MIT */
/*
 * bench/locks: the adaptive mutex (server/lock/amutex.c) against the locks it could have been.
 *
 *   build/bench/locks [--quick] [--duration MS] [--runs N] [--threads 1,2,4,8,16]
 *                     [--locks amutex,pthread,adaptive_np,tas_spin,mcs_spin]
 *                     [--short-cs NS] [--long-cs NS] [--short-out NS] [--long-out NS]
 *                     [--out DIR] [--no-plot]
 *
 * Locks: amutex; glibc pthread_mutex (default type); pthread_mutex PTHREAD_MUTEX_ADAPTIVE_NP;
 * a test-and-test-and-set spinlock; a plain (non-cancelable) MCS spinlock.
 *
 * Throughput: N threads each loop { lock; critical section; unlock; work outside } for a fixed
 * time; ops/s summed over threads, median of --runs runs. Within each run the locks take turns
 * (round-robin), so a change in the machine's load affects them alike. Two workloads: a short critical
 * section (a few shared cache lines, ~50 ns by default) and a long one (~2 us), each followed by
 * thread-local work of similar size, so that the lock is contended but not every cycle.
 * Uncontended: one thread, lock+unlock in a tight loop, ns per pair (median of the runs).
 *
 * Prints a table (and the goals it is held to), writes DIR/locks.dat (default bench/results)
 * and, unless --no-plot or gnuplot is missing, DIR/locks.png through bench/locks.gp.
 * --quick: 5 runs of 60 ms per point, about 20 s in all; the default is 5 runs of 400 ms.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lock/amutex.h"

#define MAX_THREADS 64
#define MAX_RUNS    31
#define CACHELINE   64

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void check(int r, const char *what)
{
	if (r) {
		fprintf(stderr, "locks: %s: %s\n", what, strerror(r));
		exit(2);
	}
}

/* ---- the two spinlocks to compare with ------------------------------------------------------ */

/* Test-and-test-and-set: spin reading, then try to swap. */
struct tas_lock {
	_Atomic int v;
};

static inline void tas_lock(struct tas_lock *l)
{
	while (atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
		while (atomic_load_explicit(&l->v, memory_order_relaxed))
			cpu_relax();
}

static inline void tas_unlock(struct tas_lock *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* Plain MCS: FIFO hand-over, a waiter spins on its own node and never gives up. */
struct mcs_node {
	_Atomic(struct mcs_node *) next;
	_Atomic int locked;
} __attribute__((aligned(CACHELINE)));

struct mcs_lock {
	_Atomic(struct mcs_node *) tail;
};

static __thread struct mcs_node mcs_self;

static inline void mcs_lock(struct mcs_lock *l)
{
	struct mcs_node *me = &mcs_self, *prev;

	atomic_store_explicit(&me->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&me->locked, 0, memory_order_relaxed);
	prev = atomic_exchange_explicit(&l->tail, me, memory_order_acq_rel);
	if (!prev)
		return;
	atomic_store_explicit(&prev->next, me, memory_order_release);
	while (!atomic_load_explicit(&me->locked, memory_order_acquire))
		cpu_relax();
}

static inline void mcs_unlock(struct mcs_lock *l)
{
	struct mcs_node *me = &mcs_self, *next, *expect = me;

	next = atomic_load_explicit(&me->next, memory_order_acquire);
	if (!next) {
		if (atomic_compare_exchange_strong_explicit(
			&l->tail, &expect, NULL, memory_order_acq_rel, memory_order_relaxed))
			return;
		while (!(next = atomic_load_explicit(&me->next, memory_order_acquire)))
			cpu_relax();
	}
	atomic_store_explicit(&next->locked, 1, memory_order_release);
}

/* ---- workload --------------------------------------------------------------------------------- */

enum lock_kind {
	L_AMUTEX,
	L_PTHREAD,
	L_ADAPTIVE,
	L_TAS,
	L_MCS,
	NLOCKS
};

static const char *const lock_names[NLOCKS] = {
	[L_AMUTEX] = "amutex", [L_PTHREAD] = "pthread", [L_ADAPTIVE] = "adaptive_np",
	[L_TAS] = "tas_spin",  [L_MCS] = "mcs_spin",
};

struct shared {
	/* the locks, each on its own line */
	struct amutex am __attribute__((aligned(CACHELINE)));
	pthread_mutex_t pm __attribute__((aligned(CACHELINE)));
	pthread_mutex_t pa __attribute__((aligned(CACHELINE)));
	struct tas_lock tas __attribute__((aligned(CACHELINE)));
	struct mcs_lock mcs __attribute__((aligned(CACHELINE)));
	/* what the critical section touches: a few lines that move between CPUs with the lock */
	uint64_t data[4][CACHELINE / 8] __attribute__((aligned(CACHELINE)));
	_Atomic bool stop __attribute__((aligned(CACHELINE)));
	pthread_barrier_t start;
};

struct worker {
	struct shared *sh;
	enum lock_kind kind;
	unsigned cs_iters, out_iters;
	uint64_t ops;
} __attribute__((aligned(CACHELINE)));

/* About one iteration per ns here; calibrated at start-up (spin_per_us). */
static inline uint64_t spin_work(unsigned iters, uint64_t x)
{
	for (unsigned i = 0; i < iters; i++) {
		x = x * 6364136223846793005u + 1442695040888963407u;
		__asm__ __volatile__("" : "+r"(x));
	}
	return x;
}

static inline void critical_section(struct shared *sh, unsigned iters)
{
	uint64_t x = sh->data[0][0];

	x = spin_work(iters, x);
	for (int i = 0; i < 4; i++)
		sh->data[i][0] += x | 1;
}

#define WORKER_LOOP(LOCK, UNLOCK)                                                                  \
	do {                                                                                       \
		while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {                   \
			LOCK;                                                                      \
			critical_section(sh, w->cs_iters);                                         \
			UNLOCK;                                                                    \
			local = spin_work(w->out_iters, local);                                    \
			ops++;                                                                     \
		}                                                                                  \
	} while (0)

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	uint64_t ops = 0, local = (uintptr_t)w;
	int r = pthread_barrier_wait(&sh->start);

	if (r && r != PTHREAD_BARRIER_SERIAL_THREAD)
		check(r, "pthread_barrier_wait");
	switch (w->kind) {
	case L_AMUTEX:
		WORKER_LOOP(amutex_lock(&sh->am), amutex_unlock(&sh->am));
		break;
	case L_PTHREAD:
		WORKER_LOOP(pthread_mutex_lock(&sh->pm), pthread_mutex_unlock(&sh->pm));
		break;
	case L_ADAPTIVE:
		WORKER_LOOP(pthread_mutex_lock(&sh->pa), pthread_mutex_unlock(&sh->pa));
		break;
	case L_TAS:
		WORKER_LOOP(tas_lock(&sh->tas), tas_unlock(&sh->tas));
		break;
	case L_MCS:
		WORKER_LOOP(mcs_lock(&sh->mcs), mcs_unlock(&sh->mcs));
		break;
	default:
		abort();
	}
	w->ops = ops + (local == 42); /* keep the local work alive */
	return NULL;
}

static struct shared *shared_new(void)
{
	struct shared *sh = aligned_alloc(CACHELINE, sizeof(*sh));
	pthread_mutexattr_t at;

	if (!sh) {
		perror("aligned_alloc");
		exit(2);
	}
	memset(sh, 0, sizeof(*sh));
	amutex_init(&sh->am);
	check(pthread_mutex_init(&sh->pm, NULL), "pthread_mutex_init");
	check(pthread_mutexattr_init(&at), "pthread_mutexattr_init");
	check(pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ADAPTIVE_NP), "settype");
	check(pthread_mutex_init(&sh->pa, &at), "pthread_mutex_init");
	check(pthread_mutexattr_destroy(&at), "pthread_mutexattr_destroy");
	return sh;
}

static void shared_free(struct shared *sh)
{
	check(pthread_mutex_destroy(&sh->pm), "pthread_mutex_destroy");
	check(pthread_mutex_destroy(&sh->pa), "pthread_mutex_destroy");
	free(sh);
}

/* One timed run: ops/s over all threads. */
static double run_once(enum lock_kind kind, int threads, unsigned cs_iters, unsigned out_iters,
		       unsigned duration_ms)
{
	struct shared *sh = shared_new();
	struct worker w[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	struct timespec d = { duration_ms / 1000, (long)(duration_ms % 1000) * 1000000 };
	uint64_t t0, t1, total = 0;

	check(pthread_barrier_init(&sh->start, NULL, (unsigned)threads + 1), "barrier_init");
	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){
			.sh = sh, .kind = kind, .cs_iters = cs_iters, .out_iters = out_iters
		};
		check(pthread_create(&t[i], NULL, worker_main, &w[i]), "pthread_create");
	}
	int r = pthread_barrier_wait(&sh->start);

	if (r && r != PTHREAD_BARRIER_SERIAL_THREAD)
		check(r, "pthread_barrier_wait");
	t0 = now_ns();
	while (nanosleep(&d, &d) && errno == EINTR)
		;
	atomic_store(&sh->stop, true);
	t1 = now_ns();
	for (int i = 0; i < threads; i++) {
		check(pthread_join(t[i], NULL), "pthread_join");
		total += w[i].ops;
	}
	check(pthread_barrier_destroy(&sh->start), "barrier_destroy");
	shared_free(sh);
	return (double)total * 1e9 / (double)(t1 - t0);
}

/* Uncontended: ns per lock+unlock pair, one thread. */
static double uncontended_once(enum lock_kind kind)
{
	struct shared *sh = shared_new();
	const long n = 5000000;
	uint64_t t0 = now_ns(), t1;

	switch (kind) {
	case L_AMUTEX:
		for (long i = 0; i < n; i++) {
			amutex_lock(&sh->am);
			amutex_unlock(&sh->am);
		}
		break;
	case L_PTHREAD:
		for (long i = 0; i < n; i++) {
			pthread_mutex_lock(&sh->pm);
			pthread_mutex_unlock(&sh->pm);
		}
		break;
	case L_ADAPTIVE:
		for (long i = 0; i < n; i++) {
			pthread_mutex_lock(&sh->pa);
			pthread_mutex_unlock(&sh->pa);
		}
		break;
	case L_TAS:
		for (long i = 0; i < n; i++) {
			tas_lock(&sh->tas);
			tas_unlock(&sh->tas);
		}
		break;
	case L_MCS:
		for (long i = 0; i < n; i++) {
			mcs_lock(&sh->mcs);
			mcs_unlock(&sh->mcs);
		}
		break;
	default:
		abort();
	}
	t1 = now_ns();
	shared_free(sh);
	return (double)(t1 - t0) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Iterations of spin_work() per microsecond on this machine. */
static double calibrate(void)
{
	double best = 0;

	for (int k = 0; k < 5; k++) {
		uint64_t t0 = now_ns(), x = spin_work(2000000, k), t1 = now_ns();
		double per_us = 2000000.0 * 1000.0 / (double)(t1 - t0) + (double)(x == 42);

		if (per_us > best)
			best = per_us;
	}
	return best;
}

static void stats_diff(struct amutex_stats *d, const struct amutex_stats *b,
		       const struct amutex_stats *a)
{
	d->acquired = b->acquired - a->acquired;
	d->fast = b->fast - a->fast;
	d->spun = b->spun - a->spun;
	d->slept = b->slept - a->slept;
	d->sleeps = b->sleeps - a->sleeps;
	d->wakes = b->wakes - a->wakes;
	d->unqueues = b->unqueues - a->unqueues;
	d->head_quits = b->head_quits - a->head_quits;
	d->spin_ns = b->spin_ns - a->spin_ns;
}

/* ---- main ------------------------------------------------------------------------------------ */

struct opts {
	bool use[NLOCKS];
	unsigned duration_ms, runs;
	int threads[16], nthreads;
	unsigned cs_ns[2], out_ns[2];
	const char *out_dir;
	bool plot;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: locks [--quick] [--duration MS] [--runs N] [--threads 1,2,4,8,16]\n"
		   "             [--locks amutex,pthread,adaptive_np,tas_spin,mcs_spin]\n"
		   "             [--short-cs NS] [--long-cs NS] [--short-out NS] [--long-out NS]\n"
		   "             [--out DIR] [--no-plot]\n");
}

static void parse_threads(struct opts *o, const char *s)
{
	char *end;

	o->nthreads = 0;
	while (*s && o->nthreads < 16) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > MAX_THREADS) {
			fprintf(stderr, "locks: bad thread count list\n");
			exit(2);
		}
		o->threads[o->nthreads++] = (int)v;
		s = *end == ',' ? end + 1 : end;
	}
}

static void parse_locks(struct opts *o, const char *s)
{
	memset(o->use, 0, sizeof(o->use));
	while (*s) {
		size_t n = strcspn(s, ",");
		int l;

		for (l = 0; l < NLOCKS; l++)
			if (strlen(lock_names[l]) == n && !strncmp(s, lock_names[l], n))
				break;
		if (l == NLOCKS) {
			fprintf(stderr, "locks: unknown lock '%.*s'\n", (int)n, s);
			exit(2);
		}
		o->use[l] = true;
		s += n + (s[n] == ',');
	}
}

static unsigned parse_uint(const char *s, unsigned max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == 0 || *end || v > max) {
		fprintf(stderr, "locks: bad number '%s'\n", s);
		exit(2);
	}
	return (unsigned)v;
}

static void plot(const char *dat, const char *png)
{
	pid_t pid;
	int status;
	char dexpr[1100];

	snprintf(dexpr, sizeof(dexpr), "datafile='%s'; outfile='%s'", dat, png);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return;
	}
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", "-e", dexpr, "bench/locks.gp", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "locks: gnuplot failed (is gnuplot installed? run from the source "
				"tree); no plot written\n");
		return;
	}
	printf("wrote %s\n", png);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "duration", required_argument, NULL, 'd' },
		{ "runs", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "short-cs", required_argument, NULL, 's' },
		{ "long-cs", required_argument, NULL, 'l' },
		{ "short-out", required_argument, NULL, 'S' },
		{ "long-out", required_argument, NULL, 'L' },
		{ "out", required_argument, NULL, 'o' },
		{ "no-plot", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ "locks", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.use = { true, true, true, true, true },
		.duration_ms = 400,
		.runs = 5,
		.threads = { 1, 2, 4, 8, 16 },
		.nthreads = 5,
		.cs_ns = { 50, 2000 },
		.out_ns = { 100, 2000 },
		.out_dir = "bench/results",
		.plot = true,
	};
	static const char *const cs_names[2] = { "short", "long" };
	double tput[2][16][NLOCKS], unc[NLOCKS], per_us;
	struct amutex_stats ast[2][16];
	char dat[512], png[512];
	FILE *f;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'q':
			o.duration_ms = 60;
			o.runs = 5;
			break;
		case 'd':
			o.duration_ms = parse_uint(optarg, 600000);
			break;
		case 'r':
			o.runs = parse_uint(optarg, MAX_RUNS);
			break;
		case 't':
			parse_threads(&o, optarg);
			break;
		case 'k':
			parse_locks(&o, optarg);
			break;
		case 's':
			o.cs_ns[0] = parse_uint(optarg, 10000000);
			break;
		case 'l':
			o.cs_ns[1] = parse_uint(optarg, 10000000);
			break;
		case 'S':
			o.out_ns[0] = parse_uint(optarg, 10000000);
			break;
		case 'L':
			o.out_ns[1] = parse_uint(optarg, 10000000);
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'n':
			o.plot = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || o.runs < 1 || o.duration_ms < 1) {
		usage(stderr);
		return 2;
	}

	per_us = calibrate();
	printf("# bench/locks: %ld CPUs, %u runs x %u ms per point, work loop %.0f iterations/us\n",
	       sysconf(_SC_NPROCESSORS_ONLN), o.runs, o.duration_ms, per_us);
	for (int k = 0; k < 2; k++)
		printf("# %s: critical section ~%u ns, outside work ~%u ns\n", cs_names[k],
		       o.cs_ns[k], o.out_ns[k]);

	/* Uncontended cost first, on a quiet machine. */
	{
		double uv[NLOCKS][MAX_RUNS];

		for (unsigned r = 0; r < o.runs; r++)
			for (int l = 0; l < NLOCKS; l++)
				uv[l][r] = o.use[l] ? uncontended_once((enum lock_kind)l) : 0;
		for (int l = 0; l < NLOCKS; l++)
			unc[l] = median(uv[l], (int)o.runs);
	}

	for (int k = 0; k < 2; k++) {
		unsigned cs_iters = (unsigned)(o.cs_ns[k] * per_us / 1000.0);
		unsigned out_iters = (unsigned)(o.out_ns[k] * per_us / 1000.0);

		for (int ti = 0; ti < o.nthreads; ti++) {
			double vv[NLOCKS][MAX_RUNS];
			struct amutex_stats a, b;

			/*
			 * Round-robin over the locks within each run, so that a change in the load
			 * of the machine hits all of them alike instead of one.
			 */
			amutex_stats_read(&a);
			for (unsigned r = 0; r < o.runs; r++)
				for (int l = 0; l < NLOCKS; l++)
					vv[l][r] =
					    o.use[l] ? run_once((enum lock_kind)l, o.threads[ti],
								cs_iters, out_iters, o.duration_ms)
						     : 0;
			amutex_stats_read(&b);
			stats_diff(&ast[k][ti], &b, &a);
			for (int l = 0; l < NLOCKS; l++)
				tput[k][ti][l] = median(vv[l], (int)o.runs);
			fprintf(stderr, ".");
		}
	}
	fprintf(stderr, "\n");

	/* The table. */
	printf("\nuncontended lock+unlock, ns (median):");
	for (int l = 0; l < NLOCKS; l++)
		if (o.use[l])
			printf("  %s %.1f", lock_names[l], unc[l]);
	printf("\n");
	for (int k = 0; k < 2; k++) {
		printf("\n%s critical section: throughput, Mops/s (median of %u)\n", cs_names[k],
		       o.runs);
		printf("%7s", "threads");
		for (int l = 0; l < NLOCKS; l++)
			printf(" %12s", lock_names[l]);
		printf(" %12s %12s\n", "amx/pthread", "amx/mcs");
		for (int ti = 0; ti < o.nthreads; ti++) {
			double *p = tput[k][ti];

			printf("%7d", o.threads[ti]);
			for (int l = 0; l < NLOCKS; l++)
				if (o.use[l])
					printf(" %12.3f", p[l] / 1e6);
				else
					printf(" %12s", "-");
			if (p[L_PTHREAD] > 0)
				printf(" %12.2f", p[L_AMUTEX] / p[L_PTHREAD]);
			else
				printf(" %12s", "-");
			if (p[L_MCS] > 0)
				printf(" %12.1f\n", p[L_AMUTEX] / p[L_MCS]);
			else
				printf(" %12s\n", "-");
		}
	}

	/* How amutex got its locks, per point (all runs together). */
	printf(
	    "\namutex: how locks were obtained (%% of acquisitions), unqueues and head quits per "
	    "1000 acquisitions, spin time per acquisition\n");
	printf("%6s %7s %7s %7s %7s %9s %9s %9s\n", "cs", "threads", "fast%", "spun%", "slept%",
	       "unq/1k", "quit/1k", "spin ns");
	for (int k = 0; k < 2; k++)
		for (int ti = 0; ti < o.nthreads; ti++) {
			const struct amutex_stats *s = &ast[k][ti];
			double n = s->acquired ? (double)s->acquired : 1;

			printf("%6s %7d %7.1f %7.1f %7.1f %9.2f %9.2f %9.1f\n", cs_names[k],
			       o.threads[ti], 100 * (double)s->fast / n, 100 * (double)s->spun / n,
			       100 * (double)s->slept / n, 1000 * (double)s->unqueues / n,
			       1000 * (double)s->head_quits / n, (double)s->spin_ns / n);
		}

	/* The goals, checked. */
	{
		bool ok_p = true, ok_m = true;

		for (int k = 0; k < 2; k++)
			for (int ti = 0; ti < o.nthreads; ti++) {
				double *p = tput[k][ti];

				if (!o.use[L_AMUTEX] || !o.use[L_PTHREAD] ||
				    p[L_AMUTEX] < p[L_PTHREAD])
					ok_p = false;
				if (o.threads[ti] >= 8 && (!o.use[L_AMUTEX] || !o.use[L_MCS] ||
							   p[L_AMUTEX] < 5 * p[L_MCS]))
					ok_m = false;
			}
		printf("\ngoals: amutex >= pthread_mutex at every point: %s; >= 5x plain MCS at 8+ "
		       "threads: %s; uncontended <= 25 ns: %s (%.1f ns)\n",
		       ok_p ? "met" : "MISSED", ok_m ? "met" : "MISSED",
		       unc[L_AMUTEX] <= 25 ? "met" : "MISSED", unc[L_AMUTEX]);
	}

	/* The data file: one block per workload, for gnuplot's "index". */
	if (mkdir(o.out_dir, 0755) && errno != EEXIST) {
		perror(o.out_dir);
		return 1;
	}
	snprintf(dat, sizeof(dat), "%s/locks.dat", o.out_dir);
	snprintf(png, sizeof(png), "%s/locks.png", o.out_dir);
	f = fopen(dat, "w");
	if (!f) {
		perror(dat);
		return 1;
	}
	fprintf(f, "# bench/locks: %u runs x %u ms per point; ops/s, median\n", o.runs,
		o.duration_ms);
	fprintf(f, "# uncontended ns:");
	for (int l = 0; l < NLOCKS; l++)
		fprintf(f, " %s=%.1f", lock_names[l], unc[l]);
	fprintf(f, "\n");
	for (int k = 0; k < 2; k++) {
		fprintf(f, "%s# %s critical section ~%u ns, outside ~%u ns\n# threads",
			k ? "\n\n" : "", cs_names[k], o.cs_ns[k], o.out_ns[k]);
		for (int l = 0; l < NLOCKS; l++)
			fprintf(f, " %s", lock_names[l]);
		fprintf(f, "\n");
		for (int ti = 0; ti < o.nthreads; ti++) {
			fprintf(f, "%d", o.threads[ti]);
			for (int l = 0; l < NLOCKS; l++)
				fprintf(f, " %.0f", tput[k][ti][l]);
			fprintf(f, "\n");
		}
	}
	if (fclose(f)) {
		perror(dat);
		return 1;
	}
	printf("wrote %s\n", dat);
	if (o.plot)
		plot(dat, png);
	return 0;
}

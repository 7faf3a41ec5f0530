/* SPDX-License-Identifier: MIT */
/*
 * bench/engine: the engine called directly, no seccomp.
 *
 *  - semop throughput: T threads, each doing +1 then -1 on its own semaphore of one shared set
 *    (S = T), for --seconds; ops/s, median of --reps runs. With per-semaphore locks two threads
 *    on two semaphores of one set do not share a lock; build with LOCKING=global (every semop
 *    takes the set lock, the kernel before 3.10) for the contrast.
 *  - memory: heap bytes (mallinfo2) per set for 32000 sets of one semaphore, and per semaphore
 *    added by growing one set from 1 to 32000 semaphores; the empty namespace they live in (its
 *    hash tables) apart; then the totals with it.
 *
 * Output: a table, and with --out FILE tab-separated lines "name value unit".
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sem.h"

#ifdef SV_FORCE_GLOBAL_LOCK
#define LOCKING "global"
#else
#define LOCKING "per-semaphore"
#endif
#ifdef SV_LOCK_PTHREAD
#define LOCKNAME "pthread_mutex"
#else
#define LOCKNAME "amutex"
#endif

static struct sv_cred root = { .cap_ipc_owner = true, .cap_sys_admin = true };
static atomic_bool go, stop;

struct worker {
	pthread_t t;
	struct sv_ns *ns;
	int id;
	unsigned short num;
	uint64_t ops;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct sv_proc *p;
	struct sv_caller c;
	struct sv_sembuf up = { w->num, 1, 0 }, down = { w->num, -1, 0 };
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	uint64_t n = 0;

	sv_thread_register();
	p = sv_proc_new(w->ns, 1000 + w->num);
	c = (struct sv_caller){ .ns = w->ns, .cred = &root, .proc = p };
	sv_wakeq_init(&wq);
	while (!atomic_load(&go))
		;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 256; i++) {
			if (sv_semtimedop(&c, w->id, (uint64_t)(uintptr_t)&up, 1, 0, &park, &wq) ||
			    sv_semtimedop(&c, w->id, (uint64_t)(uintptr_t)&down, 1, 0, &park, &wq))
				abort();
		}
		n += 512;
	}
	w->ops = n;
	sv_proc_exit(p, &wq);
	sv_proc_put(p);
	sv_thread_unregister();
	return NULL;
}

static double run_threads(int nthreads, double seconds)
{
	struct sv_ns *ns = sv_ns_new(NULL);
	struct sv_caller c = { .ns = ns, .cred = &root };
	struct worker w[64];
	uint64_t total = 0;
	double t0, t1;
	int id = (int)sv_semget(&c, SV_IPC_PRIVATE, nthreads, 0600);

	if (id < 0)
		abort();
	atomic_store(&go, false);
	atomic_store(&stop, false);
	for (int i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ .ns = ns, .id = id, .num = (unsigned short)i };
		if (pthread_create(&w[i].t, NULL, work, &w[i]))
			abort();
	}
	t0 = now_s();
	atomic_store(&go, true);
	while ((t1 = now_s()) - t0 < seconds) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
	}
	atomic_store(&stop, true);
	t1 = now_s();
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		total += w[i].ops;
	}
	sv_ns_put(ns);
	return (double)total / (t1 - t0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_ops(int nthreads, double seconds, int reps)
{
	double v[32];

	for (int r = 0; r < reps; r++)
		v[r] = run_threads(nthreads, seconds);
	qsort(v, (size_t)reps, sizeof(v[0]), cmp);
	return v[reps / 2];
}

static size_t heap_used(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/*
 * Heap bytes for nsets sets of nsems semaphores each in a fresh namespace: *ns_bytes for the
 * empty namespace (its hash tables, once per IPC namespace) unless NULL, the result for the sets
 * in it.
 */
static double sets_bytes(int nsets, int nsems, double *ns_bytes)
{
	struct sv_limits lim = { 32000, SV_SEMMNS, 500, 32000 };
	struct sv_ns *ns;
	struct sv_caller c;
	size_t before, empty, after;

	malloc_trim(0);
	before = heap_used();
	ns = sv_ns_new(&lim);
	empty = heap_used();
	c = (struct sv_caller){ .ns = ns, .cred = &root };
	for (int i = 0; i < nsets; i++)
		if (sv_semget(&c, SV_IPC_PRIVATE, nsems, 0600) < 0)
			abort();
	after = heap_used();
	sv_ns_put(ns);
	if (ns_bytes)
		*ns_bytes = (double)(empty - before);
	return (double)(after - empty);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "seconds", required_argument, NULL, 's' },
					      { "reps", required_argument, NULL, 'r' },
					      { "out", required_argument, NULL, 'o' },
					      { "quick", no_argument, NULL, 'q' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	double seconds = 1.0, ops1, ops2, b_set, b_sem, b_big, b_ns;
	int reps = 5, c;
	const char *out = NULL;
	FILE *f;

	while ((c = getopt_long(argc, argv, "s:r:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'o':
			out = optarg;
			break;
		case 'q':
			seconds = 0.3;
			reps = 3;
			break;
		default:
			printf(
			    "usage: engine [--seconds S] [--reps N] [--quick] [--out FILE]\n"
			    "Engine throughput (1 and 2 threads, own semaphore each, one set) and\n"
			    "memory per set and per semaphore; medians of N runs.\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (reps < 1 || reps > 31 || seconds <= 0) {
		fprintf(stderr, "engine: --reps 1..31, --seconds > 0\n");
		return 2;
	}
	sv_thread_register();

	ops1 = median_ops(1, seconds, reps);
	ops2 = median_ops(2, seconds, reps);
	b_set = sets_bytes(32000, 1, &b_ns) / 32000;
	/* a semaphore's own cost: what 31999 more of them add to a set */
	b_big = sets_bytes(1, 32000, NULL);
	b_sem = (b_big - sets_bytes(1, 1, NULL)) / 31999;

	printf("engine bench (locking %s, lock %s): medians of %d runs of %.1f s\n", LOCKING,
	       LOCKNAME, reps, seconds);
	printf("  1 thread,  1 semaphore:        %12.0f ops/s\n", ops1);
	printf("  2 threads, own semaphore each: %12.0f ops/s  (%.2fx one thread)\n", ops2,
	       ops2 / ops1);
	printf("  an empty namespace:            %8.0f bytes\n", b_ns);
	printf(
	    "  32000 sets of 1 semaphore:     %8.0f bytes per set (%.1f MiB with the namespace)\n",
	    b_set, (b_set * 32000 + b_ns) / 1048576);
	printf("  1 set of 32000 semaphores:     %8.1f bytes per semaphore (%.1f MiB with the "
	       "namespace)\n",
	       b_sem, (b_big + b_ns) / 1048576);
	if (out) {
		f = fopen(out, "w");
		if (!f) {
			perror(out);
			return 1;
		}
		fprintf(f, "# engine locking=%s lock=%s reps=%d seconds=%.2f\n", LOCKING, LOCKNAME,
			reps, seconds);
		fprintf(f, "ops_1t\t%.0f\tops/s\nops_2t\t%.0f\tops/s\nscale_2t\t%.3f\tx\n", ops1,
			ops2, ops2 / ops1);
		fprintf(f, "bytes_ns\t%.0f\tB\n", b_ns);
		fprintf(f, "bytes_per_set_1sem\t%.0f\tB\nbytes_per_sem_32000\t%.1f\tB\n", b_set,
			b_sem);
		fprintf(f, "mib_32000_sets\t%.2f\tMiB\nmib_32000_sems\t%.2f\tMiB\n",
			(b_set * 32000 + b_ns) / 1048576, (b_big + b_ns) / 1048576);
		fclose(f);
	}
	sv_thread_unregister();
	return 0;
}

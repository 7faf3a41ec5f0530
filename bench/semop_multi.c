/* SPDX-License-Identifier: MIT */
/*
 * bench/semop_multi - semop-multi style throughput: T threads, S semaphores in one set.
 *
 * Each of T threads loops { semop(+1 on semaphore i mod S); semop(-1 on the same) } for a fixed
 * time; the figure is operations per second summed over the threads. With S = 1 every thread
 * hits one semaphore (contended); with S = T each thread has its own semaphore of the one set,
 * which is where per-semaphore locking pays (the workload of the 2013 ipc/sem.c series, seed 000).
 * A thread's down always follows its own up, so the value never drops below the number of
 * threads between their two calls and no call ever blocks: the loop measures the cost of
 * serving a call, not of waiting.
 *
 * Rows: "native" (the kernel), plus one per --run-under[=LABEL] CMD... (e.g. semvisor-run --),
 * each the same target code (this binary, --target) run inside CMD; see bench_util.h.
 * Repetitions go round-robin over the rows (rep 1 of every row, then rep 2, ...), so a change in
 * the machine's load hits every row alike. Each figure is the median over the repetitions, and
 * its ratio to the native median of the same point, measured in the same run.
 *
 * Checked, not only timed: every semop must return 0, and at the end every semaphore's value,
 * ncnt and zcnt must be 0; a row whose target finds otherwise fails.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ipc.h>
#include <sys/sem.h>

#include "bench_util.h"

#define MAX_T	   64
#define MAX_LIST   16
#define MAX_POINTS (2 * MAX_LIST)
#define MAX_REPS   31

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

struct opts {
	struct bu_opts common; /* --reps, --quick, --out, --timeout, --target, --result-fd */
	int threads[MAX_LIST], nthreads;
	double seconds;
	const char *compare; /* "A/B": also print A's ops/s divided by B's */
};

/* One measured configuration. T = 1 is measured once (S = 1 = T) and shown in both tables. */
struct point {
	int t, s;
};

static int make_points(const struct opts *o, struct point *p)
{
	int n = 0;

	for (int i = 0; i < o->nthreads; i++) {
		p[n++] = (struct point){ o->threads[i], 1 };
		if (o->threads[i] > 1)
			p[n++] = (struct point){ o->threads[i], o->threads[i] };
	}
	return n;
}

/* ---- the target ---------------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int id;
	unsigned short num;
	uint64_t ops, end_ns;
	int err;
};

static pthread_barrier_t g_start;
static atomic_int g_stop;

static void *work(void *arg)
{
	struct worker *w = arg;
	struct sembuf up = { .sem_num = w->num, .sem_op = 1, .sem_flg = 0 };
	struct sembuf down = { .sem_num = w->num, .sem_op = -1, .sem_flg = 0 };
	uint64_t n = 0;

	pthread_barrier_wait(&g_start);
	/* The flag is read once per pair: a relaxed load, nothing next to a system call. */
	while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
		if (semop(w->id, &up, 1) < 0 || semop(w->id, &down, 1) < 0) {
			w->err = errno;
			break;
		}
		n += 2;
	}
	w->end_ns = bu_now_ns();
	w->ops = n;
	return NULL;
}

/* One point: returns 0 and the operations done and the nanoseconds they took, or -1. */
static int run_point(const struct point *p, double seconds, uint64_t *ops, uint64_t *ns)
{
	static struct worker w[MAX_T];
	pthread_attr_t attr;
	uint64_t t0, end = 0, total = 0;
	int id, rc = 0;

	id = semget(IPC_PRIVATE, p->s, IPC_CREAT | 0600);
	if (id < 0) {
		bu_tmsg("semget(IPC_PRIVATE, %d): %s", p->s, strerror(errno));
		return -1;
	}
	atomic_store(&g_stop, 0);
	if (pthread_barrier_init(&g_start, NULL, (unsigned)p->t + 1) != 0 ||
	    pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, 1 << 18) != 0) {
		bu_tmsg("pthread set-up failed");
		goto fail;
	}
	for (int i = 0; i < p->t; i++) {
		w[i] = (struct worker){ .id = id, .num = (unsigned short)(i % p->s) };
		if (pthread_create(&w[i].th, &attr, work, &w[i]) != 0) {
			bu_tmsg("pthread_create: thread %d of %d failed", i + 1, p->t);
			/* the ones started are waiting at the barrier: nothing can release them */
			_exit(1);
		}
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&g_start);
	t0 = bu_now_ns();
	bu_sleep_ns((uint64_t)(seconds * 1e9));
	atomic_store(&g_stop, 1);
	for (int i = 0; i < p->t; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].err) {
			bu_tmsg("semop on semaphore %u (T=%d S=%d): %s", w[i].num, p->t, p->s,
				strerror(w[i].err));
			rc = -1;
		}
		total += w[i].ops;
		if (w[i].end_ns > end)
			end = w[i].end_ns;
	}
	pthread_barrier_destroy(&g_start);

	/* Every up was matched by a down: all values back to 0 and nobody counted as waiting. */
	for (int s = 0; s < p->s && rc == 0; s++) {
		int v = semctl(id, s, GETVAL), nc = semctl(id, s, GETNCNT),
		    zc = semctl(id, s, GETZCNT);

		if (v != 0 || nc != 0 || zc != 0) {
			bu_tmsg("after T=%d S=%d: semaphore %d has value %d ncnt %d zcnt %d "
				"(expected 0 0 0)",
				p->t, p->s, s, v, nc, zc);
			rc = -1;
		}
	}
	if (semctl(id, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		rc = -1;
	}
	*ops = total;
	*ns = end - t0;
	return rc;

fail:
	(void)semctl(id, 0, IPC_RMID);
	return -1;
}

static int target_main(const struct opts *o)
{
	struct point pts[MAX_POINTS];
	struct bu_text t = { 0 };
	int np = make_points(o, pts);

	bu_target_init("semop_multi", o->common.result_fd, o->common.timeout);
	for (int i = 0; i < np; i++) {
		uint64_t ops, ns;

		if (run_point(&pts[i], o->seconds, &ops, &ns) < 0)
			return 1;
		bu_text_add(&t, "point %d %d %" PRIu64 " %" PRIu64 "\n", pts[i].t, pts[i].s, ops,
			    ns);
	}
	if (bu_target_report(o->common.result_fd, t.s) < 0) {
		bu_tmsg("writing the report: %s", strerror(errno));
		return 1;
	}
	free(t.s);
	return 0;
}

/* ---- the driver ---------------------------------------------------------------------------- */

struct cell {
	double v[MAX_REPS]; /* ops/s per repetition */
	int n;
	struct bu_stat st;
};

static int parse_report(char *rep, const struct point *pts, int np, struct cell *cells, char *why,
			size_t whysz)
{
	char *save = NULL;
	int got = 0;

	for (char *l = strtok_r(rep, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t ops, ns;
		int t, s, i;

		if (sscanf(l, "point %d %d %" SCNu64 " %" SCNu64, &t, &s, &ops, &ns) != 4) {
			snprintf(why, whysz, "unexpected report line \"%.60s\"", l);
			return -1;
		}
		for (i = 0; i < np; i++) {
			if (pts[i].t == t && pts[i].s == s)
				break;
		}
		if (i == np || ns == 0 || ops == 0) {
			snprintf(why, whysz, "bad point T=%d S=%d ops=%" PRIu64, t, s, ops);
			return -1;
		}
		cells[i].v[cells[i].n++] = (double)ops / ((double)ns / 1e9);
		got++;
	}
	if (got != np) {
		snprintf(why, whysz, "%d of %d points reported", got, np);
		return -1;
	}
	return 0;
}

/* What bu_run_rounds() needs to file a report under its row. */
struct rounds {
	const struct point *pts;
	int np;
	struct cell (*cells)[MAX_POINTS];
};

static int parse_row(char *rep, int row, void *arg, char *why, size_t whysz)
{
	const struct rounds *x = arg;

	return parse_report(rep, x->pts, x->np, x->cells[row], why, whysz);
}

/* clang-format off */
static void usage(FILE *f)
{
	fputs(
	"NAME\n"
	"    semop_multi - semop-multi style throughput, native and under supervisors\n"
	"\n"
	"SYNOPSIS\n"
	"    semop_multi [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    T threads share one System V set of S semaphores; thread i loops\n"
	"    semop(+1) then semop(-1) on semaphore i mod S for --seconds.  Reported:\n"
	"    operations per second summed over the threads, for every T in --threads\n"
	"    and S = 1 (one contended semaphore) and S = T (a semaphore each).  No\n"
	"    call ever blocks.  Every call must succeed and every semaphore must end\n"
	"    at value 0 with ncnt = zcnt = 0, or the row fails.\n"
	"\n"
	"    Rows: native (the kernel), and one per --run-under: the same target code\n"
	"    (this program, internally --target) executed inside CMD..., e.g.\n"
	"      --run-under=semvisor-run build/semvisor-run --\n"
	"      --run-under=semvisord build/semvisor-run --daemon=SOCKET --\n"
	"    Repetitions go round-robin over the rows; each figure is the median\n"
	"    over --reps repetitions and its ratio to native's median for the same\n"
	"    point, measured in the same run.  Targets run in a fresh IPC namespace\n"
	"    when root.\n"
	"\n"
	"OPTIONS\n"
	"    --threads LIST   thread counts (default 1,2,4,8; at most 64 each)\n"
	"    --seconds SEC    length of one point (default 0.3; --quick: 0.1)\n"
	"    --reps N         repetitions (default 5; --quick: 3)\n"
	"    --quick          the short settings: about 2 s per row\n"
	"    --compare A/B    also print row A's ops/s divided by row B's, per point\n"
	"                     (e.g. per-semaphore vs whole-set locking builds)\n"
	"    --out FILE       tab-separated results (see OUTPUT)\n"
	"    --timeout SEC    kill a target after SEC seconds (default: 60 + 20 x\n"
	"                     its expected length)\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row run inside CMD... (which must pass an\n"
	"                     inherited fd through exec); everything up to the next\n"
	"                     --run-under is CMD, so these come last.  LABEL\n"
	"                     defaults to \"under:\" and CMD's basename.\n"
	"\n"
	"OUTPUT\n"
	"    stdout: a markdown table (T, S, then per row the median ops/s and its\n"
	"    ratio to native).  --out FILE: a '#' header, then per row and point:\n"
	"    row, mode (S=1 or S=T), T, S, median, min, max ops/s, ratio to native,\n"
	"    repetitions; rows grouped for gnuplot (bench/semop_multi.gp).\n"
	"\n"
	"EXIT STATUS\n"
	"    0 all rows measured; 1 a row failed; 2 usage or set-up error.\n"
	"\n"
	"EXAMPLE\n"
	"    semop_multi --quick --run-under=semvisor-run build/semvisor-run --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_THREADS = BU_OPT_OWN,
	OPT_SECONDS,
	OPT_COMPARE,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "seconds", required_argument, NULL, OPT_SECONDS },
		{ "compare", required_argument, NULL, OPT_COMPARE },
		BU_LONG_OPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double seconds = 0;
	int c;

	memset(o, 0, sizeof(*o));
	bu_opts_init(&o->common);
	o->threads[0] = 1, o->threads[1] = 2, o->threads[2] = 4, o->threads[3] = 8;
	o->nthreads = 4;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_THREADS:
			o->nthreads =
			    bu_parse_list("--threads", optarg, o->threads, MAX_LIST, 1, MAX_T);
			break;
		case OPT_SECONDS:
			seconds = bu_parse_seconds("--seconds", optarg);
			break;
		case OPT_COMPARE:
			if (strchr(optarg, '/') == NULL)
				bu_die("--compare: expected A/B (two row labels)");
			o->compare = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (bu_opt(&o->common, c, optarg, MAX_REPS))
				break;
			fputs("Try 'semop_multi --help'.\n", stderr);
			exit(2);
		}
	}
	o->seconds = seconds > 0 ? seconds : o->common.quick ? 0.1 : 0.3;
	bu_opts_done(&o->common, argc, argv, 60 + 20 * o->seconds * 2 * o->nthreads);
}

static int find_row(const struct bu_rows *rows, const char *label, size_t len)
{
	for (int r = 0; r < rows->n; r++) {
		if (strlen(rows->v[r].label) == len && strncmp(rows->v[r].label, label, len) == 0)
			return r;
	}
	return -1;
}

int main(int argc, char **argv)
{
	static struct cell cells[BU_MAX_ROWS][MAX_POINTS];
	struct point pts[MAX_POINTS];
	struct bu_rows rows;
	struct opts o;
	bool failed[BU_MAX_ROWS] = { false };
	char list[128], rbuf[32], secbuf[32], repsbuf[16], tobuf[32];
	int own, np, any_failed = 0, cmp_a = -1, cmp_b = -1;
	uint64_t t_start;

	own = bu_split_rows(argc, argv, &rows);
	parse_opts(own, argv, &o);
	if (o.common.target) {
		bu_free_rows(&rows);
		return target_main(&o);
	}
	bu_init("semop_multi");
	if (o.compare) {
		const char *slash = strchr(o.compare, '/');

		cmp_a = find_row(&rows, o.compare, (size_t)(slash - o.compare));
		cmp_b = find_row(&rows, slash + 1, strlen(slash + 1));
		if (cmp_a < 0 || cmp_b < 0)
			bu_die("--compare %s: no row with that label", o.compare);
	}
	np = make_points(&o, pts);

	bu_format_list(o.threads, o.nthreads, list, sizeof(list));
	snprintf(secbuf, sizeof(secbuf), "%.9g", o.seconds);
	snprintf(repsbuf, sizeof(repsbuf), "%d", o.common.reps);
	snprintf(tobuf, sizeof(tobuf), "%.0f", o.common.timeout);
	char *targs[] = { (char *)"--target",
			  (char *)"--threads",
			  list,
			  (char *)"--seconds",
			  secbuf,
			  (char *)"--timeout",
			  tobuf,
			  NULL };

	printf("### semop-multi: T threads, one set of S semaphores, thread i does +1/-1 on "
	       "semaphore i mod S\n\n");
	bu_print_conditions(stdout, "semop_multi");
	printf("\nEach point runs %.2f s; figures are ops/s (both calls of a pair counted), "
	       "median of %d repetitions taken round-robin over the rows; \"x native\" is the "
	       "ratio to the native median of the same point in this run.\n\n",
	       o.seconds, o.common.reps);
	fflush(stdout);

	t_start = bu_now_ns();
	any_failed = bu_run_rounds(&rows, targs, o.common.reps, o.common.timeout, failed, parse_row,
				   &(struct rounds){ pts, np, cells });
	for (int r = 0; r < rows.n; r++) {
		for (int i = 0; i < np; i++)
			cells[r][i].st = bu_stats(cells[r][i].v, failed[r] ? 0 : cells[r][i].n);
	}

	/* The table: one line per point, per row the median and its ratio to native. */
	printf("| T | S |");
	for (int r = 0; r < rows.n; r++)
		printf(" %s ops/s |%s", rows.v[r].label, r ? " x native |" : "");
	printf("\n|--:|--:|");
	for (int r = 0; r < rows.n; r++)
		printf("--:|%s", r ? "--:|" : "");
	printf("\n");
	for (int i = 0; i < np; i++) {
		printf("| %d | %d |", pts[i].t, pts[i].s);
		for (int r = 0; r < rows.n; r++) {
			if (failed[r])
				printf(" FAILED |%s", r ? " NA |" : "");
			else
				printf(" %.0f |", cells[r][i].st.med);
			if (r && !failed[r])
				printf(" %s |", bu_ratio(cells[r][i].st.med, cells[0][i].st.med,
							 rbuf, sizeof(rbuf)));
		}
		printf("\n");
	}

	/* What the design is about: a semaphore each vs one shared, and scaling with T. */
	printf("\nPer row: own semaphore vs shared (S=T / S=1 at the same T), and scaling "
	       "(S=T at T / T=1):\n\n| row |");
	for (int i = 0; i < o.nthreads; i++) {
		if (o.threads[i] > 1)
			printf(" T=%d S=T/S=1 |", o.threads[i]);
	}
	for (int i = 0; i < o.nthreads; i++) {
		if (o.threads[i] > 1)
			printf(" T=%d / T=1 |", o.threads[i]);
	}
	printf("\n|---|");
	for (int i = 0; i < o.nthreads; i++) {
		if (o.threads[i] > 1)
			printf("--:|--:|");
	}
	printf("\n");
	for (int r = 0; r < rows.n; r++) {
		double one = NAN;

		if (failed[r])
			continue;
		for (int i = 0; i < np; i++) {
			if (pts[i].t == 1)
				one = cells[r][i].st.med;
		}
		printf("| %s |", rows.v[r].label);
		for (int i = 0; i + 1 < np; i++) {
			if (pts[i].t > 1 && pts[i].s == 1)
				printf(" %s |", bu_ratio(cells[r][i + 1].st.med, cells[r][i].st.med,
							 rbuf, sizeof(rbuf)));
		}
		for (int i = 0; i < np; i++) {
			if (pts[i].t > 1 && pts[i].s == pts[i].t)
				printf(" %s |",
				       bu_ratio(cells[r][i].st.med, one, rbuf, sizeof(rbuf)));
		}
		printf("\n");
	}
	if (cmp_a >= 0 && !failed[cmp_a] && !failed[cmp_b]) {
		printf("\n%s / %s, ops/s per point:", rows.v[cmp_a].label, rows.v[cmp_b].label);
		for (int i = 0; i < np; i++)
			printf(" T=%d,S=%d %s%s", pts[i].t, pts[i].s,
			       bu_ratio(cells[cmp_a][i].st.med, cells[cmp_b][i].st.med, rbuf,
					sizeof(rbuf)),
			       i + 1 < np ? ";" : "\n");
	}
	printf("\nsemop_multi: %.1f s in all; load average (1 min) %.2f at the end\n",
	       (double)(bu_now_ns() - t_start) / 1e9, bu_loadavg1());
	for (int r = 0; r < rows.n; r++) {
		if (failed[r])
			printf("semop_multi: row %s FAILED (see stderr)\n", rows.v[r].label);
	}

	if (o.common.out) {
		FILE *f = fopen(o.common.out, "w");

		if (f == NULL)
			bu_die("%s: %s", o.common.out, strerror(errno));
		fprintf(f, "# semop_multi seconds=%g reps=%d cpus=%ld\n", o.seconds, o.common.reps,
			sysconf(_SC_NPROCESSORS_ONLN));
		fprintf(f, "# row\tmode\tT\tS\tmedian_ops_s\tmin\tmax\tx_native\treps\n");
		/* Grouped by row, then mode, T ascending: each gnuplot line is contiguous.  T=1
		   belongs to both modes. */
		for (int r = 0; r < rows.n; r++) {
			for (int mode = 0; mode < 2; mode++) {
				for (int i = 0; i < np; i++) {
					const struct bu_stat *s = &cells[r][i].st;
					bool in = mode == 0 ? pts[i].s == 1 : pts[i].s == pts[i].t;

					if (!in)
						continue;
					if (failed[r]) {
						fprintf(f, "%s\t%s\t%d\t%d\tNA\tNA\tNA\tNA\t0\n",
							rows.v[r].label, mode ? "S=T" : "S=1",
							pts[i].t, pts[i].s);
						continue;
					}
					fprintf(f, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.4f\t%d\n",
						rows.v[r].label, mode ? "S=T" : "S=1", pts[i].t,
						pts[i].s, s->med, s->min, s->max,
						s->med / cells[0][i].st.med, s->n);
				}
				fprintf(f, "\n");
			}
		}
		if (ferror(f) | (fclose(f) != 0))
			bu_die("writing %s failed", o.common.out);
	}
	bu_free_rows(&rows);
	return any_failed;
}

/* SPDX-License-Identifier: MIT */
/*
 * bench/bulkwake - sembench style bulk wake-up: one call releases N parked waiters.
 *
 * One set of N semaphores, all 0. N waiter threads each block in semop(-1) on their own
 * semaphore. When every one of them is blocked in semop (/proc/self/task/TID/syscall) and counted
 * as waiting (GETNCNT 1 -- of every semaphore with --check=all, of a sample by default), the
 * waker reads the clock and issues ONE
 * semctl(SETALL) setting every semaphore to 1: a single call that releases all N waiters.
 * (SETALL rather than one semop with N sops: Linux caps sops per call at SEMOPM, 500 by
 * default, below N = 1000 and 4000.) Each waiter, as soon as its semop returns, writes the clock
 * into its slot of a shared array. Reported per N: the time from just before the waking call to
 * the last waiter's timestamp (the figure the goal is about), the time the waking call itself
 * took, and the median waiter's time.
 *
 * The goal: linear in N -- the 4000 figure at most 4.5x the 1000 figure -- which needs
 * the wake-up pass and the answers after it to be O(N), not O(N^2).
 *
 * Checked, not only timed: every waiter's semop returns 0, every timestamp is later than the
 * waking call's start, and afterwards every semaphore is back to 0 (each waiter consumed exactly
 * its own unit) with nobody waiting.
 *
 * Rows and method as bench/semop_multi (see bench_util.h): native plus --run-under rows, one
 * round per N per target run, repetitions round-robin over the rows, medians, ratios to native.
 */
#include <getopt.h>
#include <pthread.h>
#include <sys/ipc.h>
#include <sys/sem.h>

#include "bench_util.h"

#define MAX_N	 16000
#define MAX_LIST 8
#define MAX_REPS 31

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

struct opts {
	struct bu_opts common; /* --reps, --quick, --out, --timeout, --target, --result-fd */
	int waiters[MAX_LIST], nwaiters;
	bool verbose;
	bool check_all;
};

static bool g_verbose, g_check_all;

/* ---- the target ---------------------------------------------------------------------------- */

/* When each step of parking was reached (--verbose). */
static uint64_t g_step_ns[BU_PARK_COUNTED + 1];

static void note_step(enum bu_park_step step)
{
	g_step_ns[step] = bu_now_ns();
}

/* One round with n waiters: returns 0 and the three figures in ns, or -1. */
static int run_point(int n, uint64_t *last, uint64_t *call, uint64_t *median)
{
	struct bu_waiter *w = calloc((size_t)n, sizeof(*w));
	unsigned short *ones = malloc(sizeof(*ones) * (size_t)n);
	unsigned short *vals = malloc(sizeof(*vals) * (size_t)n);
	double *lat = malloc(sizeof(*lat) * (size_t)n);
	union semun arg;
	uint64_t t0, t1, mx = 0, t_begin = bu_now_ns(), t_joined;
	int id, rc = 0, started = 0;

	if (w == NULL || ones == NULL || vals == NULL || lat == NULL) {
		bu_tmsg("out of memory");
		return -1;
	}
	id = semget(IPC_PRIVATE, n, IPC_CREAT | 0600);
	if (id < 0) {
		bu_tmsg("semget(IPC_PRIVATE, %d): %s", n, strerror(errno));
		return -1;
	}
	if (bu_park_waiters(w, n, id, g_check_all, &started, g_verbose ? note_step : NULL) < 0) {
		bu_tmsg("N=%d: the waiters could not all be parked", n);
		rc = -1;
		goto release;
	}

	for (int i = 0; i < n; i++)
		ones[i] = 1;
	arg.array = ones;
	t0 = bu_now_ns();
	if (semctl(id, 0, SETALL, arg) < 0) {
		bu_tmsg("semctl(SETALL): %s", strerror(errno));
		rc = -1;
		goto release;
	}
	t1 = bu_now_ns();
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	started = 0;
	t_joined = bu_now_ns();
	/* Where a slow round spends its time (set-up is not part of any figure). */
	if (g_verbose)
		bu_tmsg("N=%d: threads created %.1f ms, all inside semop %.1f ms, ncnt checked "
			"%.1f ms, wake to all joined %.1f ms",
			n, (double)(g_step_ns[BU_PARK_RUNNING] - t_begin) / 1e6,
			(double)(g_step_ns[BU_PARK_BLOCKED] - g_step_ns[BU_PARK_RUNNING]) / 1e6,
			(double)(t0 - g_step_ns[BU_PARK_BLOCKED]) / 1e6,
			(double)(t_joined - t0) / 1e6);

	for (int i = 0; i < n; i++) {
		if (w[i].err) {
			bu_tmsg("N=%d: waiter %d: semop: %s", n, i, strerror(w[i].err));
			rc = -1;
		} else if (w[i].woke_ns < t0) {
			bu_tmsg("N=%d: waiter %d returned before the waking call", n, i);
			rc = -1;
		} else {
			lat[i] = (double)(w[i].woke_ns - t0);
			if (w[i].woke_ns > mx)
				mx = w[i].woke_ns;
		}
	}
	arg.array = vals;
	if (rc == 0 && semctl(id, 0, GETALL, arg) < 0) {
		bu_tmsg("semctl(GETALL): %s", strerror(errno));
		rc = -1;
	}
	for (int i = 0; i < n && rc == 0; i++) {
		if (vals[i] != 0 || semctl(id, i, GETNCNT) != 0) {
			bu_tmsg("N=%d: after the wake-up semaphore %d has value %u, ncnt %d "
				"(expected 0, 0)",
				n, i, vals[i], semctl(id, i, GETNCNT));
			rc = -1;
		}
	}
	if (rc == 0) {
		*last = mx - t0;
		*call = t1 - t0;
		*median = (uint64_t)bu_stats(lat, n).med;
	}

release:
	/* Removing the set releases any waiter still parked (EIDRM), so the joins return. */
	if (semctl(id, 0, IPC_RMID) < 0 && rc == 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		rc = -1;
	}
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	free(w);
	free(ones);
	free(vals);
	free(lat);
	return rc;
}

static int target_main(const struct opts *o)
{
	struct bu_text t = { 0 };

	bu_target_init("bulkwake", o->common.result_fd, o->common.timeout);
	g_verbose = o->verbose;
	g_check_all = o->check_all;
	bu_raise_limits();
	for (int i = 0; i < o->nwaiters; i++) {
		uint64_t last, call, med;

		if (run_point(o->waiters[i], &last, &call, &med) < 0)
			return 1;
		bu_text_add(&t, "point %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", o->waiters[i],
			    last, call, med);
	}
	if (bu_target_report(o->common.result_fd, t.s) < 0) {
		bu_tmsg("writing the report: %s", strerror(errno));
		return 1;
	}
	free(t.s);
	return 0;
}

/* ---- the driver ---------------------------------------------------------------------------- */

enum {
	F_LAST,
	F_CALL,
	F_MED,
	NF
};

struct cell {
	double v[NF][MAX_REPS]; /* microseconds */
	int n;
	struct bu_stat st[NF];
};

static int parse_report(char *rep, const struct opts *o, struct cell *cells, char *why,
			size_t whysz)
{
	char *save = NULL;
	int got = 0;

	for (char *l = strtok_r(rep, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t last, call, med;
		int n, i;

		if (sscanf(l, "point %d %" SCNu64 " %" SCNu64 " %" SCNu64, &n, &last, &call,
			   &med) != 4) {
			snprintf(why, whysz, "unexpected report line \"%.60s\"", l);
			return -1;
		}
		for (i = 0; i < o->nwaiters; i++) {
			if (o->waiters[i] == n)
				break;
		}
		if (i == o->nwaiters || last == 0) {
			snprintf(why, whysz, "bad point N=%d", n);
			return -1;
		}
		cells[i].v[F_LAST][cells[i].n] = (double)last / 1e3;
		cells[i].v[F_CALL][cells[i].n] = (double)call / 1e3;
		cells[i].v[F_MED][cells[i].n] = (double)med / 1e3;
		cells[i].n++;
		got++;
	}
	if (got != o->nwaiters) {
		snprintf(why, whysz, "%d of %d points reported", got, o->nwaiters);
		return -1;
	}
	return 0;
}

/* What bu_run_rounds() needs to file a report under its row. */
struct rounds {
	const struct opts *o;
	struct cell (*cells)[MAX_LIST];
};

static int parse_row(char *rep, int row, void *arg, char *why, size_t whysz)
{
	const struct rounds *x = arg;

	return parse_report(rep, x->o, x->cells[row], why, whysz);
}

/* clang-format off */
static void usage(FILE *f)
{
	fputs(
	"NAME\n"
	"    bulkwake - one call releases N parked waiters; time to the last one\n"
	"\n"
	"SYNOPSIS\n"
	"    bulkwake [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    One set of N semaphores at 0; N threads each block in semop(-1) on\n"
	"    their own semaphore.  Once they are all parked (see --check), the\n"
	"    waker reads the clock and calls semctl(SETALL) with all ones: one call\n"
	"    that releases every waiter (SETALL, not an N-sop semop, because SEMOPM\n"
	"    caps sops per call at 500).  Each waiter stores the clock as soon as\n"
	"    its semop returns.  Reported per N: time from the waking call to the\n"
	"    LAST waiter running, the waking call's own duration, and the median\n"
	"    waiter.  Checked: every semop returns 0 after the waking call started,\n"
	"    and every semaphore ends at 0 with ncnt 0.\n"
	"\n"
	"    Goal: linear, i.e. last(4000) <= 4.5 x last(1000).\n"
	"\n"
	"    Rows: native, and one per --run-under (the same code run inside CMD...,\n"
	"    e.g. semvisor-run --).  One round per N per target run; repetitions go\n"
	"    round-robin over the rows; figures are medians over --reps with the\n"
	"    ratio to native's median in the same run.\n"
	"\n"
	"OPTIONS\n"
	"    --waiters LIST   waiter counts (default 250,1000,4000; at most 16000)\n"
	"    --reps N         repetitions (default 5; --quick: 3)\n"
	"    --quick          the short settings\n"
	"    --out FILE       tab-separated results (see OUTPUT)\n"
	"    --timeout SEC    kill a target after SEC seconds (default 300)\n"
	"    --check=all|sample\n"
	"                     before waking, wait for GETNCNT = 1 on every semaphore\n"
	"                     (all) or on 65 spread over the set (sample, the\n"
	"                     default: under a seccomp supervisor each call costs\n"
	"                     time proportional to the calls parked, so checking all\n"
	"                     N is O(N^2)); either way every waiter must first be\n"
	"                     seen blocked in semop in /proc/self/task/TID/syscall\n"
	"    -v, --verbose    targets print where each round's time went (stderr)\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row run inside CMD... (see semop_multi --help)\n"
	"\n"
	"OUTPUT\n"
	"    stdout: a markdown table and the linearity check per row.  --out FILE:\n"
	"    a '#' header, then per row and N: row, N, median/min/max microseconds\n"
	"    to the last waiter, median waking-call and median-waiter microseconds,\n"
	"    ratio to native, repetitions; one block per row.\n"
	"\n"
	"EXIT STATUS\n"
	"    0 all rows measured; 1 a row failed; 2 usage or set-up error.\n"
	"\n"
	"EXAMPLE\n"
	"    bulkwake --quick --run-under=semvisor-run build/semvisor-run --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_WAITERS = BU_OPT_OWN,
	OPT_CHECK,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "waiters", required_argument, NULL, OPT_WAITERS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "check", required_argument, NULL, OPT_CHECK },
		BU_LONG_OPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	bu_opts_init(&o->common);
	o->waiters[0] = 250, o->waiters[1] = 1000, o->waiters[2] = 4000;
	o->nwaiters = 3;
	while ((c = getopt_long(argc, argv, "hv", lopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			o->verbose = true;
			break;
		case OPT_CHECK:
			if (strcmp(optarg, "all") == 0)
				o->check_all = true;
			else if (strcmp(optarg, "sample") == 0)
				o->check_all = false;
			else
				bu_die("--check: expected all or sample, got \"%s\"", optarg);
			break;
		case OPT_WAITERS:
			o->nwaiters =
			    bu_parse_list("--waiters", optarg, o->waiters, MAX_LIST, 1, MAX_N);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (bu_opt(&o->common, c, optarg, MAX_REPS))
				break;
			fputs("Try 'bulkwake --help'.\n", stderr);
			exit(2);
		}
	}
	bu_opts_done(&o->common, argc, argv, 300);
}

int main(int argc, char **argv)
{
	static struct cell cells[BU_MAX_ROWS][MAX_LIST];
	struct bu_rows rows;
	struct opts o;
	bool failed[BU_MAX_ROWS] = { false };
	char list[128], tobuf[32], rbuf[32];
	int own, any_failed = 0, i1000 = -1, i4000 = -1;
	uint64_t t_start;

	own = bu_split_rows(argc, argv, &rows);
	parse_opts(own, argv, &o);
	if (o.common.target) {
		bu_free_rows(&rows);
		return target_main(&o);
	}
	bu_init("bulkwake");
	for (int i = 0; i < o.nwaiters; i++) {
		if (o.waiters[i] == 1000)
			i1000 = i;
		if (o.waiters[i] == 4000)
			i4000 = i;
	}

	bu_format_list(o.waiters, o.nwaiters, list, sizeof(list));
	snprintf(tobuf, sizeof(tobuf), "%.0f", o.common.timeout);
	char *targs[] = { (char *)"--target",
			  (char *)"--waiters",
			  list,
			  (char *)"--timeout",
			  tobuf,
			  (char *)"--check",
			  o.check_all ? (char *)"all" : (char *)"sample",
			  o.verbose ? (char *)"-v" : NULL,
			  NULL };

	printf("### bulk wake-up: one semctl(SETALL) releases N waiters, each parked on its own "
	       "semaphore of one set\n\n");
	bu_print_conditions(stdout, "bulkwake");
	printf("\nWaiters are threads of one process. \"last\" is the time from just before the "
	       "SETALL call to the last waiter's timestamp after its semop returned; \"call\" is "
	       "how long the SETALL call itself took; \"median\" is the median waiter. "
	       "Microseconds, median of %d repetitions taken round-robin over the rows; "
	       "\"x native\" compares \"last\" with the native median of the same N in this "
	       "run.\n\n",
	       o.common.reps);
	fflush(stdout);

	t_start = bu_now_ns();
	any_failed = bu_run_rounds(&rows, targs, o.common.reps, o.common.timeout, failed, parse_row,
				   &(struct rounds){ &o, cells });
	for (int r = 0; r < rows.n; r++) {
		for (int i = 0; i < o.nwaiters; i++) {
			for (int f = 0; f < NF; f++)
				cells[r][i].st[f] =
				    bu_stats(cells[r][i].v[f], failed[r] ? 0 : cells[r][i].n);
		}
	}

	printf("| row | N | last us | per waiter us | call us | median us | x native |\n"
	       "|---|--:|--:|--:|--:|--:|--:|\n");
	for (int r = 0; r < rows.n; r++) {
		for (int i = 0; i < o.nwaiters; i++) {
			const struct bu_stat *s = cells[r][i].st;

			if (failed[r]) {
				printf("| %s | %d | FAILED | NA | NA | NA | NA |\n",
				       rows.v[r].label, o.waiters[i]);
				continue;
			}
			printf("| %s | %d | %.0f | %.2f | %.0f | %.0f | %s |\n", rows.v[r].label,
			       o.waiters[i], s[F_LAST].med, s[F_LAST].med / o.waiters[i],
			       s[F_CALL].med, s[F_MED].med,
			       bu_ratio(s[F_LAST].med, cells[0][i].st[F_LAST].med, rbuf,
					sizeof(rbuf)));
		}
	}
	if (i1000 >= 0 && i4000 >= 0) {
		printf("\nLinearity (goal: last(4000) <= 4.5 x last(1000)):\n\n");
		for (int r = 0; r < rows.n; r++) {
			double q;

			if (failed[r])
				continue;
			q = cells[r][i4000].st[F_LAST].med / cells[r][i1000].st[F_LAST].med;
			printf("- %s: last(4000) / last(1000) = %.2f: %s\n", rows.v[r].label, q,
			       q <= 4.5 ? "met" : "MISSED");
		}
	}
	printf("\nbulkwake: %.1f s in all; load average (1 min) %.2f at the end\n",
	       (double)(bu_now_ns() - t_start) / 1e9, bu_loadavg1());
	for (int r = 0; r < rows.n; r++) {
		if (failed[r])
			printf("bulkwake: row %s FAILED (see stderr)\n", rows.v[r].label);
	}

	if (o.common.out) {
		FILE *f = fopen(o.common.out, "w");

		if (f == NULL)
			bu_die("%s: %s", o.common.out, strerror(errno));
		fprintf(f, "# bulkwake reps=%d cpus=%ld wake=SETALL waiters=threads\n",
			o.common.reps, sysconf(_SC_NPROCESSORS_ONLN));
		fprintf(f, "# row\tN\tlast_us\tlast_min_us\tlast_max_us\tcall_us\tmedian_waiter_us"
			   "\tx_native\treps\n");
		for (int r = 0; r < rows.n; r++) {
			for (int i = 0; i < o.nwaiters; i++) {
				const struct bu_stat *s = cells[r][i].st;

				if (failed[r]) {
					fprintf(f, "%s\t%d\tNA\tNA\tNA\tNA\tNA\tNA\t0\n",
						rows.v[r].label, o.waiters[i]);
					continue;
				}
				fprintf(f, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t%d\n",
					rows.v[r].label, o.waiters[i], s[F_LAST].med, s[F_LAST].min,
					s[F_LAST].max, s[F_CALL].med, s[F_MED].med,
					s[F_LAST].med / cells[0][i].st[F_LAST].med, s[F_LAST].n);
			}
			fprintf(f, "\n");
		}
		if (ferror(f) | (fclose(f) != 0))
			bu_die("writing %s failed", o.common.out);
	}
	bu_free_rows(&rows);
	return any_failed;
}

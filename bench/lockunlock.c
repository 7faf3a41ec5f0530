/* SPDX-License-Identifier: MIT */
/*
 * bench/lockunlock - sem-lockunlock style: P processes use one semaphore as a mutex.
 *
 * One set of one semaphore, value 1. P forked processes share a counter in shared memory; each
 * does its share of --pairs iterations of { semop(-1) "lock"; counter++ (a plain, non-atomic
 * increment); semop(+1) "unlock" }, all of them starting together. Reported: the total time from
 * the start to the last process finishing, and lock+unlock pairs per second. With P > 1 the lock
 * is contended, so a lock often waits: under a supervisor that is a parked call and a wake-up,
 * the costliest path there is. (The workload of Manfred Spraul's sem-lockunlock, seed 002.)
 *
 * Checked, not only timed: the counter must equal --pairs exactly (a lost update means two
 * processes were inside the critical section at once), every semop must succeed, and the
 * semaphore must end at value 1 with nobody waiting.
 *
 * Rows and method as bench/semop_multi (see bench_util.h): native plus --run-under rows,
 * repetitions round-robin over the rows, medians, ratios to native measured in the same run.
 */
#include <getopt.h>
#include <stdatomic.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>

#include "bench_util.h"

#define MAX_P	 256
#define MAX_LIST 16
#define MAX_REPS 31

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

struct opts {
	struct bu_opts common; /* --reps, --quick, --out, --timeout, --target, --result-fd */
	int procs[MAX_LIST], nprocs;
	long pairs;
};

/* ---- the target ---------------------------------------------------------------------------- */

/* Shared by the target and its P children (MAP_SHARED | MAP_ANONYMOUS). */
struct shared {
	volatile unsigned long counter; /* the critical section's data; deliberately not atomic */
	uint64_t end_ns[MAX_P];
	int err[MAX_P];
};

__attribute__((noreturn)) static void child(int id, int idx, long n, struct shared *sh, int go)
{
	struct sembuf lock = { .sem_num = 0, .sem_op = -1, .sem_flg = 0 };
	struct sembuf unlock = { .sem_num = 0, .sem_op = 1, .sem_flg = 0 };
	char c;

	/* Block until the target closes the write end: every child starts at once. */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	for (long i = 0; i < n; i++) {
		if (semop(id, &lock, 1) < 0) {
			sh->err[idx] = errno;
			_exit(1);
		}
		sh->counter++;
		if (semop(id, &unlock, 1) < 0) {
			sh->err[idx] = errno;
			_exit(1);
		}
	}
	sh->end_ns[idx] = bu_now_ns();
	_exit(0);
}

/* One point: P processes, pairs in all.  Returns 0 and the nanoseconds, or -1. */
static int run_point(int p, long pairs, uint64_t *ns)
{
	struct shared *sh;
	union semun arg = { .val = 1 };
	pid_t pids[MAX_P];
	int id, go[2], ready[2], rc = 0, v, nc;
	uint64_t t0, end = 0;
	char c;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		bu_tmsg("mmap: %s", strerror(errno));
		return -1;
	}
	id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (id < 0 || semctl(id, 0, SETVAL, arg) < 0) {
		bu_tmsg("semget/SETVAL: %s", strerror(errno));
		return -1;
	}
	if (pipe(go) < 0 || pipe(ready) < 0) {
		bu_tmsg("pipe: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < p; i++) {
		long n = pairs / p + (i < pairs % p);

		pids[i] = fork();
		if (pids[i] < 0) {
			bu_tmsg("fork: %s", strerror(errno));
			/* The children started wait on go; they must not run once we are gone. */
			for (int k = 0; k < i; k++)
				kill(pids[k], SIGKILL);
			_exit(1);
		}
		if (pids[i] == 0) {
			close(go[1]);
			close(ready[0]);
			/* Tell the target this child exists; closing ready[1] at once. */
			close(ready[1]);
			child(id, i, n, sh, go[0]);
		}
	}
	close(go[0]);
	close(ready[1]);
	/* Every child has closed its copy of ready[1] when this read sees EOF: all are started
	   and waiting on go. */
	for (;;) {
		ssize_t n = read(ready[0], &c, 1);

		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	close(ready[0]);
	t0 = bu_now_ns();
	close(go[1]);

	for (int i = 0; i < p; i++) {
		int st;

		while (waitpid(pids[i], &st, 0) < 0) {
			if (errno != EINTR) {
				bu_tmsg("waitpid: %s", strerror(errno));
				return -1;
			}
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			bu_tmsg("child %d of %d failed: %s", i + 1, p,
				sh->err[i] ? strerror(sh->err[i]) : "died");
			rc = -1;
		}
		if (sh->end_ns[i] > end)
			end = sh->end_ns[i];
	}

	v = semctl(id, 0, GETVAL);
	nc = semctl(id, 0, GETNCNT);
	if (rc == 0 && (sh->counter != (unsigned long)pairs || v != 1 || nc != 0)) {
		bu_tmsg("P=%d: counter %lu (expected %ld), value %d (expected 1), ncnt %d "
			"(expected 0)",
			p, sh->counter, pairs, v, nc);
		rc = -1;
	}
	if (semctl(id, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		rc = -1;
	}
	munmap(sh, sizeof(*sh));
	*ns = end - t0;
	return rc;
}

static int target_main(const struct opts *o)
{
	struct bu_text t = { 0 };

	bu_target_init("lockunlock", o->common.result_fd, o->common.timeout);
	bu_raise_limits();
	for (int i = 0; i < o->nprocs; i++) {
		uint64_t ns;

		if (run_point(o->procs[i], o->pairs, &ns) < 0)
			return 1;
		bu_text_add(&t, "point %d %ld %" PRIu64 "\n", o->procs[i], o->pairs, ns);
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
	double v[MAX_REPS]; /* seconds per repetition */
	int n;
	struct bu_stat st;
};

static int parse_report(char *rep, const struct opts *o, struct cell *cells, char *why,
			size_t whysz)
{
	char *save = NULL;
	int got = 0;

	for (char *l = strtok_r(rep, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		uint64_t ns;
		long pairs;
		int p, i;

		if (sscanf(l, "point %d %ld %" SCNu64, &p, &pairs, &ns) != 3) {
			snprintf(why, whysz, "unexpected report line \"%.60s\"", l);
			return -1;
		}
		for (i = 0; i < o->nprocs; i++) {
			if (o->procs[i] == p)
				break;
		}
		if (i == o->nprocs || pairs != o->pairs || ns == 0) {
			snprintf(why, whysz, "bad point P=%d pairs=%ld", p, pairs);
			return -1;
		}
		cells[i].v[cells[i].n++] = (double)ns / 1e9;
		got++;
	}
	if (got != o->nprocs) {
		snprintf(why, whysz, "%d of %d points reported", got, o->nprocs);
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
	"    lockunlock - P processes share one semaphore as a mutex\n"
	"\n"
	"SYNOPSIS\n"
	"    lockunlock [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    One semaphore, value 1; P forked processes each do their share of\n"
	"    --pairs iterations of semop(-1), counter++ on a plain counter in\n"
	"    shared memory, semop(+1), all starting together.  Reported per P: the\n"
	"    time from the start until the last process is done, and pairs per\n"
	"    second.  The counter must end exactly at --pairs, every call must\n"
	"    succeed, and the semaphore must end at 1 with ncnt 0, or the row fails.\n"
	"\n"
	"    Rows: native, and one per --run-under (the same code run inside CMD...,\n"
	"    e.g. semvisor-run --).  Repetitions go round-robin over the rows; each\n"
	"    figure is the median over --reps and its ratio to native's median for\n"
	"    the same P in the same run.  Targets run in a fresh IPC namespace when\n"
	"    root.\n"
	"\n"
	"OPTIONS\n"
	"    --procs LIST     process counts (default 1,2,4,8)\n"
	"    --pairs N        lock+unlock pairs in all, per point (default 100000;\n"
	"                     --quick: 10000)\n"
	"    --reps N         repetitions (default 5; --quick: 3)\n"
	"    --quick          the short settings\n"
	"    --out FILE       tab-separated results (see OUTPUT)\n"
	"    --timeout SEC    kill a target after SEC seconds (default 600)\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row run inside CMD... (see semop_multi --help)\n"
	"\n"
	"OUTPUT\n"
	"    stdout: a markdown table.  --out FILE: a '#' header, then per row and\n"
	"    P: row, P, pairs, median, min, max seconds, pairs/s (from the median),\n"
	"    time ratio to native, repetitions; one block per row.\n"
	"\n"
	"EXIT STATUS\n"
	"    0 all rows measured; 1 a row failed; 2 usage or set-up error.\n"
	"\n"
	"EXAMPLE\n"
	"    lockunlock --quick --run-under=semvisor-run build/semvisor-run --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_PROCS = BU_OPT_OWN,
	OPT_PAIRS,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "procs", required_argument, NULL, OPT_PROCS },
		{ "pairs", required_argument, NULL, OPT_PAIRS },
		BU_LONG_OPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	bu_opts_init(&o->common);
	o->procs[0] = 1, o->procs[1] = 2, o->procs[2] = 4, o->procs[3] = 8;
	o->nprocs = 4;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_PROCS:
			o->nprocs = bu_parse_list("--procs", optarg, o->procs, MAX_LIST, 1, MAX_P);
			break;
		case OPT_PAIRS:
			o->pairs = bu_parse_long("--pairs", optarg, 1, 1000000000L);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (bu_opt(&o->common, c, optarg, MAX_REPS))
				break;
			fputs("Try 'lockunlock --help'.\n", stderr);
			exit(2);
		}
	}
	bu_opts_done(&o->common, argc, argv, 600);
	if (o->pairs == 0)
		o->pairs = o->common.quick ? 10000 : 100000;
}

int main(int argc, char **argv)
{
	static struct cell cells[BU_MAX_ROWS][MAX_LIST];
	struct bu_rows rows;
	struct opts o;
	bool failed[BU_MAX_ROWS] = { false };
	char list[128], pairsbuf[32], tobuf[32], rbuf[32];
	int own, any_failed = 0;
	uint64_t t_start;

	own = bu_split_rows(argc, argv, &rows);
	parse_opts(own, argv, &o);
	if (o.common.target) {
		bu_free_rows(&rows);
		return target_main(&o);
	}
	bu_init("lockunlock");

	bu_format_list(o.procs, o.nprocs, list, sizeof(list));
	snprintf(pairsbuf, sizeof(pairsbuf), "%ld", o.pairs);
	snprintf(tobuf, sizeof(tobuf), "%.0f", o.common.timeout);
	char *targs[] = { (char *)"--target", (char *)"--procs",   list,  (char *)"--pairs",
			  pairsbuf,	      (char *)"--timeout", tobuf, NULL };

	printf("### lock/unlock: P processes, one semaphore as a mutex around counter++ in shared "
	       "memory\n\n");
	bu_print_conditions(stdout, "lockunlock");
	printf("\n%ld lock+unlock pairs in all per point, split over the P processes; time from "
	       "the common start to the last process done, median of %d repetitions taken "
	       "round-robin over the rows; \"x native\" is the time ratio to the native median "
	       "of the same P in this run. The shared counter was checked to be exactly %ld "
	       "after every repetition.\n\n",
	       o.pairs, o.common.reps, o.pairs);
	fflush(stdout);

	t_start = bu_now_ns();
	any_failed = bu_run_rounds(&rows, targs, o.common.reps, o.common.timeout, failed, parse_row,
				   &(struct rounds){ &o, cells });
	for (int r = 0; r < rows.n; r++) {
		for (int i = 0; i < o.nprocs; i++)
			cells[r][i].st = bu_stats(cells[r][i].v, failed[r] ? 0 : cells[r][i].n);
	}

	printf("| P |");
	for (int r = 0; r < rows.n; r++)
		printf(" %s s | %s pairs/s |%s", rows.v[r].label, rows.v[r].label,
		       r ? " x native |" : "");
	printf("\n|--:|");
	for (int r = 0; r < rows.n; r++)
		printf("--:|--:|%s", r ? "--:|" : "");
	printf("\n");
	for (int i = 0; i < o.nprocs; i++) {
		printf("| %d |", o.procs[i]);
		for (int r = 0; r < rows.n; r++) {
			const struct bu_stat *s = &cells[r][i].st;

			if (failed[r]) {
				printf(" FAILED | NA |%s", r ? " NA |" : "");
				continue;
			}
			printf(" %.4f | %.0f |", s->med, (double)o.pairs / s->med);
			if (r)
				printf(" %s |",
				       bu_ratio(s->med, cells[0][i].st.med, rbuf, sizeof(rbuf)));
		}
		printf("\n");
	}
	printf("\nlockunlock: %.1f s in all; load average (1 min) %.2f at the end\n",
	       (double)(bu_now_ns() - t_start) / 1e9, bu_loadavg1());
	for (int r = 0; r < rows.n; r++) {
		if (failed[r])
			printf("lockunlock: row %s FAILED (see stderr)\n", rows.v[r].label);
	}

	if (o.common.out) {
		FILE *f = fopen(o.common.out, "w");

		if (f == NULL)
			bu_die("%s: %s", o.common.out, strerror(errno));
		fprintf(f, "# lockunlock pairs=%ld reps=%d cpus=%ld\n", o.pairs, o.common.reps,
			sysconf(_SC_NPROCESSORS_ONLN));
		fprintf(f,
			"# row\tP\tpairs\tmedian_s\tmin_s\tmax_s\tpairs_per_s\tx_native\treps\n");
		for (int r = 0; r < rows.n; r++) {
			for (int i = 0; i < o.nprocs; i++) {
				const struct bu_stat *s = &cells[r][i].st;

				if (failed[r]) {
					fprintf(f, "%s\t%d\t%ld\tNA\tNA\tNA\tNA\tNA\t0\n",
						rows.v[r].label, o.procs[i], o.pairs);
					continue;
				}
				fprintf(f, "%s\t%d\t%ld\t%.6f\t%.6f\t%.6f\t%.0f\t%.4f\t%d\n",
					rows.v[r].label, o.procs[i], o.pairs, s->med, s->min,
					s->max, (double)o.pairs / s->med,
					s->med / cells[0][i].st.med, s->n);
			}
			fprintf(f, "\n");
		}
		if (ferror(f) | (fclose(f) != 0))
			bu_die("writing %s failed", o.common.out);
	}
	bu_free_rows(&rows);
	return any_failed;
}

/* SPDX-License-Identifier: MIT */
/*
 * bench/scale - does the cost of one uncontended semop stay flat as the server's state grows?
 *
 * One target process per (row, case). It creates 10 small sets (1 semaphore each) and times
 * semop(+1), semop(-1) pairs on the first of them: the SMALL case. Then it builds the case's
 * condition and times again (LARGE), tears the condition down and times once more (AFTER: the
 * small case again, a control for drift over the run):
 *
 *   sets     31990 more sets of 1 semaphore: 32000 sets in the namespace; the call still goes to
 *            the first small set.
 *   bigset   one set of 32000 semaphores; the call goes to its last semaphore.
 *   waiters  N threads (default 10000) parked in semop(-1), each on its own semaphore of another
 *            set; the call still goes to the first small set.
 *
 * Reported per case: per-call microseconds (median of --reps repetitions, each sized by a short
 * warm-up to last about --rep-time), LARGE as a ratio to SMALL (before and after pooled; goal in
 * goal: <= 1.2x), and the supervisor's resident memory (VmRSS) before and after building the
 * condition, per set, per semaphore, or per parked waiter. The supervisor of semvisor-run is
 * found as the other child of the target's parent (semvisor-run forks the supervisor and the
 * program); for a daemon, --rss-pid LABEL:PID names the process to read. Native rows report no
 * memory: the kernel's is not a process's RSS.
 *
 * By default everything (driver, wrapper, supervisor, target) runs on one CPU (--cpu-pin=same):
 * on this kind of VM a served call costs 2-3x more when the answering worker sits on the other
 * CPU, and which it is flips at random, which would drown a 1.2x threshold. The bigset case times
 * its small and large probes in turns (both sets exist at once); the others cannot, so they time
 * SMALL before and AFTER the condition and pool the two. How long building the condition took is
 * reported too (for waiters: from starting the threads until all are parked).
 *
 * Checked, not only timed: every call succeeds, the measured semaphore returns to 0, every
 * waiter is seen blocked in semop (/proc/self/task/TID/syscall) and counted (GETNCNT on a
 * sample of their semaphores), every waiter is released by one SETALL and returns 0, and each
 * built set is removed again.
 */
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/ipc.h>
#include <sys/sem.h>

#include "bench_util.h"

#define MAX_REPS    31
#define SMALL_SETS  10
#define MAX_WAITERS 30000

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

enum {
	C_SETS,
	C_BIGSET,
	C_WAITERS,
	NCASES
};

static const char *const case_names[NCASES] = { "sets", "bigset", "waiters" };

struct opts {
	struct bu_opts common; /* --reps, --quick, --out, --timeout, --target, --result-fd */
	bool cases[NCASES];
	int sets, nsems, waiters;
	double rep_time, warm_time;
	const char *rss_pid[BU_MAX_ROWS]; /* "LABEL:PID" */
	int nrss;
	int case_only; /* target: the one case to run */
	long target_rss_pid;
	bool verbose;
	bool pin_same; /* --cpu-pin=same (the default): everything on one CPU */
};

/* ---- the target ---------------------------------------------------------------------------- */

static int updown(int id, unsigned short num, long pairs)
{
	struct sembuf up = { .sem_num = num, .sem_op = 1, .sem_flg = 0 };
	struct sembuf down = { .sem_num = num, .sem_op = -1, .sem_flg = 0 };

	for (long i = 0; i < pairs; i++) {
		if (semop(id, &up, 1) < 0 || semop(id, &down, 1) < 0)
			return -1;
	}
	return 0;
}

/* What one phase times: pairs on semaphore num of set id, K pairs per repetition. */
struct probe {
	const char *tag;
	int id;
	unsigned short num;
	long pairs;
};

/* A warm-up of --warm-time sizes K so that one repetition lasts about --rep-time in this
   phase: a phase a hundred times slower than another still takes the same time. */
static int size_probe(struct probe *p, const struct opts *o)
{
	uint64_t t0 = bu_now_ns(), t1;
	long warm = 0;

	do {
		if (updown(p->id, p->num, 8) < 0) {
			bu_tmsg("%s: semop: %s", p->tag, strerror(errno));
			return -1;
		}
		warm += 8;
		t1 = bu_now_ns();
	} while ((double)(t1 - t0) < o->warm_time * 1e9);
	p->pairs = (long)(o->rep_time * 1e9 / ((double)(t1 - t0) / (double)warm)) + 1;
	if (p->pairs < 8)
		p->pairs = 8;
	return 0;
}

/*
 * --reps repetitions of each probe, taken in turns (rep 1 of every probe, then rep 2, ...), so
 * that a change of conditions during the phase -- on this VM above all which CPU the
 * supervisor's answering worker runs on, which changes a call's cost by 2-3x (floor.md) -- hits
 * the probes alike. Appends one line "TAG us us ..." per probe: per-call microseconds.
 */
static int time_probes(struct bu_text *t, struct probe *p, int n, const struct opts *o)
{
	double us[2][MAX_REPS];

	for (int i = 0; i < n; i++) {
		if (size_probe(&p[i], o) < 0)
			return -1;
	}
	for (int r = 0; r < o->common.reps; r++) {
		for (int i = 0; i < n; i++) {
			uint64_t t0 = bu_now_ns();

			if (updown(p[i].id, p[i].num, p[i].pairs) < 0) {
				bu_tmsg("%s: semop: %s", p[i].tag, strerror(errno));
				return -1;
			}
			us[i][r] = (double)(bu_now_ns() - t0) / 1e3 / (double)(2 * p[i].pairs);
		}
	}
	for (int i = 0; i < n; i++) {
		bu_text_add(t, "%s", p[i].tag);
		for (int r = 0; r < o->common.reps; r++)
			bu_text_add(t, " %.4f", us[i][r]);
		bu_text_add(t, "\n");
		if (semctl(p[i].id, p[i].num, GETVAL) != 0) {
			bu_tmsg("%s: semaphore %u of set %d did not return to 0", p[i].tag,
				p[i].num, p[i].id);
			return -1;
		}
	}
	return 0;
}

static int time_calls(struct bu_text *t, const char *tag, int id, unsigned short num,
		      const struct opts *o)
{
	struct probe p = { .tag = tag, .id = id, .num = num };

	return time_probes(t, &p, 1, o);
}

/* -v: where a target's time goes (set-up is not part of any figure, but it can be long). */
static bool g_verbose;
static uint64_t g_phase_ns;

static void phase(const char *what)
{
	uint64_t now = bu_now_ns();

	if (g_verbose && g_phase_ns)
		bu_tmsg("%s: %.1f ms", what, (double)(now - g_phase_ns) / 1e6);
	g_phase_ns = now;
}

/* The supervisor to weigh: --rss-pid, or the other child of our parent (semvisor-run). */
static pid_t find_supervisor(long given)
{
	pid_t me = getpid(), parent = getppid(), found = 0;
	char comm[64] = "";
	struct dirent *d;
	DIR *dir;

	if (given > 0)
		return (pid_t)given;
	/* Only semvisor-run forks a supervisor next to its program; the bench driver's only
	   child is us (native), and semvisor-run --daemon's only child too. */
	{
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)parent);
		f = fopen(path, "r");
		if (f == NULL)
			return 0;
		if (fgets(comm, sizeof(comm), f) == NULL)
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
	}
	if (strcmp(comm, "semvisor-run") != 0)
		return 0;
	dir = opendir("/proc");
	if (dir == NULL)
		return 0;
	while ((d = readdir(dir)) != NULL) {
		char path[300], buf[512], *rp;
		int ppid = -1;
		long pid;
		FILE *f;

		pid = strtol(d->d_name, &rp, 10);
		if (*rp != '\0' || pid <= 0 || pid == me)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
		/* "pid (comm) state ppid ...": comm may hold anything, so parse after the last ')' */
		rp = strrchr(buf, ')');
		if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == parent) {
			found = (pid_t)pid;
			break;
		}
	}
	closedir(dir);
	return found;
}

/* VmRSS of pid in KiB, or -1. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

/* ---- parked waiters (the waiters case) ---- */

static void note_step(enum bu_park_step step)
{
	static const char *const what[] = {
		[BU_PARK_RUNNING] = "waiters: threads created and running",
		[BU_PARK_BLOCKED] = "waiters: all blocked in semop",
		[BU_PARK_COUNTED] = "waiters: counted by GETNCNT",
	};

	phase(what[step]);
}

/* Releases every waiter with one SETALL and checks each returned 0; 0 or -1. */
static int release_waiters(struct bu_waiter *w, int n, int id, int *started)
{
	unsigned short *ones = malloc(sizeof(*ones) * (size_t)n);
	union semun arg = { .array = ones };
	int rc = 0;

	if (ones == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		ones[i] = 1;
	if (semctl(id, 0, SETALL, arg) < 0) {
		bu_tmsg("semctl(SETALL): %s", strerror(errno));
		rc = -1;
		(void)semctl(id, 0, IPC_RMID); /* EIDRM for all: the joins return */
	}
	for (int i = 0; i < *started; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].err && rc == 0) {
			bu_tmsg("waiter %d: semop: %s", i, strerror(w[i].err));
			rc = -1;
		}
	}
	*started = 0;
	free(ones);
	return rc;
}

static int target_main(const struct opts *o)
{
	struct bu_text t = { 0 };
	int small[SMALL_SETS], *built = NULL, nbuilt = 0, big = -1, wset = -1, started = 0;
	struct bu_waiter *w = NULL;
	pid_t sup;
	long rss0, rss1, units = 0;
	uint64_t t_build;
	int c = o->case_only, rc = 1;

	bu_target_init("scale", o->common.result_fd, o->common.timeout);
	g_verbose = o->verbose;
	bu_raise_limits();
	sup = find_supervisor(o->target_rss_pid);

	for (int i = 0; i < SMALL_SETS; i++) {
		small[i] = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
		if (small[i] < 0) {
			bu_tmsg("semget: %s", strerror(errno));
			while (i-- > 0)
				(void)semctl(small[i], 0, IPC_RMID);
			return 1;
		}
	}
	/* The waiters' own set exists in the small case too: only the parked calls differ. */
	if (c == C_WAITERS) {
		wset = semget(IPC_PRIVATE, o->waiters, IPC_CREAT | 0600);
		w = calloc((size_t)o->waiters, sizeof(*w));
		if (wset < 0 || w == NULL) {
			bu_tmsg("semget(%d semaphores): %s", o->waiters, strerror(errno));
			goto out;
		}
	}
	bu_text_add(&t, "case %s\n", case_names[c]);
	phase("set-up");
	/* bigset times its small case later, in turns with the large one (both sets exist). */
	if (c != C_BIGSET && time_calls(&t, "small", small[0], 0, o) < 0)
		goto out;
	phase("small");
	rss0 = rss_kib(sup);
	t_build = bu_now_ns();

	switch (c) {
	case C_SETS:
		units = o->sets - SMALL_SETS;
		built = malloc(sizeof(*built) * (size_t)units);
		if (built == NULL)
			goto out;
		for (nbuilt = 0; nbuilt < units; nbuilt++) {
			built[nbuilt] = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
			if (built[nbuilt] < 0) {
				bu_tmsg("semget: set %d of %d: %s (limits: /proc/sys/kernel/sem)",
					SMALL_SETS + nbuilt + 1, o->sets, strerror(errno));
				goto out;
			}
		}
		break;
	case C_BIGSET:
		units = o->nsems;
		big = semget(IPC_PRIVATE, o->nsems, IPC_CREAT | 0600);
		if (big < 0) {
			bu_tmsg("semget(%d semaphores): %s", o->nsems, strerror(errno));
			goto out;
		}
		/* Touch every semaphore, as a set in use would be. */
		{
			unsigned short *vals = calloc((size_t)o->nsems, sizeof(*vals));
			union semun arg = { .array = vals };

			if (vals == NULL || semctl(big, 0, SETALL, arg) < 0) {
				bu_tmsg("semctl(SETALL): %s", strerror(errno));
				free(vals);
				goto out;
			}
			free(vals);
		}
		break;
	case C_WAITERS:
		units = o->waiters;
		if (bu_park_waiters(w, o->waiters, wset, false, &started, note_step) < 0)
			goto out;
		break;
	}
	/* How long building took is a figure too: parking N waiters costs the supervisor (and the
	   kernel's notification list) far more than it costs the kernel's own semop. */
	t_build = bu_now_ns() - t_build;
	rss1 = rss_kib(sup);
	bu_text_add(&t, "rss %ld %ld %ld\n", rss0, rss1, units);
	bu_text_add(&t, "build %" PRIu64 "\n", t_build);
	phase("building the condition");

	if (c == C_BIGSET) {
		struct probe p[2] = {
			{ .tag = "small", .id = small[0], .num = 0 },
			{ .tag = "large", .id = big, .num = (unsigned short)(o->nsems - 1) }
		};

		if (time_probes(&t, p, 2, o) < 0)
			goto out;
	} else if (time_calls(&t, "large", small[0], 0, o) < 0) {
		goto out;
	}
	phase("large");

	/* Tear down, then the small case once more. */
	if (c == C_WAITERS && release_waiters(w, o->waiters, wset, &started) < 0)
		goto out;
	for (int i = 0; i < nbuilt; i++) {
		if (semctl(built[i], 0, IPC_RMID) < 0) {
			bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
			goto out;
		}
	}
	nbuilt = 0;
	if (big >= 0 && semctl(big, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		goto out;
	}
	big = -1;
	phase("tearing down");
	if (time_calls(&t, "after", small[0], 0, o) < 0)
		goto out;
	phase("after");
	bu_text_add(&t, "supervisor %d\n", (int)sup);
	if (bu_target_report(o->common.result_fd, t.s) < 0) {
		bu_tmsg("writing the report: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (started)
		(void)semctl(wset, 0, IPC_RMID); /* EIDRM releases the waiters */
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < nbuilt; i++)
		(void)semctl(built[i], 0, IPC_RMID);
	if (big >= 0)
		(void)semctl(big, 0, IPC_RMID);
	if (wset >= 0)
		(void)semctl(wset, 0, IPC_RMID);
	for (int i = 0; i < SMALL_SETS; i++)
		(void)semctl(small[i], 0, IPC_RMID);
	free(built);
	free(w);
	free(t.s);
	return rc;
}

/* ---- the driver ---------------------------------------------------------------------------- */

enum {
	P_SMALL,
	P_LARGE,
	P_AFTER,
	NP
};

struct result {
	bool ok;
	double v[NP][MAX_REPS];
	int n[NP];
	double both[2 * MAX_REPS]; /* small and after pooled: the baseline */
	struct bu_stat st[NP], base;
	long rss0, rss1, units;
	uint64_t build_ns;
	int sup;
};

static int parse_report(char *rep, int c, struct result *res, char *why, size_t whysz)
{
	static const char *const tags[NP] = { "small", "large", "after" };
	char *save = NULL, name[32];
	bool have_case = false, have_rss = false;

	memset(res, 0, sizeof(*res));
	for (char *l = strtok_r(rep, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int p;

		if (sscanf(l, "case %31s", name) == 1) {
			have_case = strcmp(name, case_names[c]) == 0;
			continue;
		}
		if (sscanf(l, "rss %ld %ld %ld", &res->rss0, &res->rss1, &res->units) == 3) {
			have_rss = true;
			continue;
		}
		if (sscanf(l, "supervisor %d", &res->sup) == 1)
			continue;
		if (sscanf(l, "build %" SCNu64, &res->build_ns) == 1)
			continue;
		for (p = 0; p < NP; p++) {
			size_t tl = strlen(tags[p]);

			if (strncmp(l, tags[p], tl) == 0 && l[tl] == ' ')
				break;
		}
		if (p == NP) {
			snprintf(why, whysz, "unexpected report line \"%.60s\"", l);
			return -1;
		}
		for (char *s = l + strlen(tags[p]), *end;; s = end) {
			double v = strtod(s, &end);

			if (end == s)
				break;
			if (res->n[p] < MAX_REPS && v > 0)
				res->v[p][res->n[p]++] = v;
		}
	}
	if (!have_case || !have_rss || res->n[P_SMALL] == 0 || res->n[P_LARGE] == 0 ||
	    res->n[P_AFTER] == 0) {
		snprintf(why, whysz, "incomplete report");
		return -1;
	}
	for (int p = 0; p < NP; p++)
		res->st[p] = bu_stats(res->v[p], res->n[p]);
	memcpy(res->both, res->v[P_SMALL], sizeof(double) * (size_t)res->n[P_SMALL]);
	memcpy(res->both + res->n[P_SMALL], res->v[P_AFTER],
	       sizeof(double) * (size_t)res->n[P_AFTER]);
	res->base = bu_stats(res->both, res->n[P_SMALL] + res->n[P_AFTER]);
	res->ok = true;
	return 0;
}

/* clang-format off */
static void usage(FILE *f)
{
	fputs(
	"NAME\n"
	"    scale - per-call cost and memory as sets, semaphores and waiters grow\n"
	"\n"
	"SYNOPSIS\n"
	"    scale [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    One target process per row and case.  It creates 10 sets of one\n"
	"    semaphore and times semop(+1)/semop(-1) on the first (SMALL), builds\n"
	"    the case's condition and times again (LARGE), removes it and times\n"
	"    once more (AFTER, a control for drift):\n"
	"      sets     31990 more sets of 1 semaphore (32000 sets in all; --sets)\n"
	"      bigset   one set of 32000 semaphores (--nsems); the call goes to its\n"
	"               last semaphore\n"
	"      waiters  N threads parked in semop(-1), each on its own semaphore of\n"
	"               another set (--waiters, default 10000)\n"
	"    Reported: per-call microseconds (median of --reps repetitions of about\n"
	"    --rep-time each, sized by a --warm-time warm-up in every phase), LARGE\n"
	"    / SMALL with SMALL and AFTER pooled (goal <= 1.2x), and the\n"
	"    supervisor's VmRSS before and after building, per set, semaphore or\n"
	"    waiter.  semvisor-run's supervisor is found as the other child of the\n"
	"    target's parent; name any other with --rss-pid.  Checked: every call\n"
	"    succeeds, waiters are seen blocked in semop and counted by GETNCNT (a\n"
	"    sample of 65), one SETALL releases them all with result 0.\n"
	"\n"
	"    Rows: native, and one per --run-under (e.g. semvisor-run --).  Targets\n"
	"    run in a fresh IPC namespace when root, so the native sets count\n"
	"    against a namespace of their own.\n"
	"\n"
	"OPTIONS\n"
	"    --cases LIST     any of sets,bigset,waiters (default all)\n"
	"    --sets N         sets in all for 'sets' (default 32000)\n"
	"    --nsems N        semaphores of the big set (default 32000)\n"
	"    --waiters N      parked waiters (default 10000; --quick: 2000)\n"
	"    --reps N         repetitions per phase (default 5; --quick: 3)\n"
	"    --rep-time SEC   length of one repetition (default 0.2; --quick: 0.1)\n"
	"    --warm-time SEC  warm-up per phase (default 0.05)\n"
	"    --rss-pid LABEL:PID\n"
	"                     read VmRSS of PID for row LABEL (e.g. a semvisord)\n"
	"    --quick          the short settings\n"
	"    --out FILE       tab-separated results (see OUTPUT)\n"
	"    --timeout SEC    kill a target after SEC seconds (default 900)\n"
	"    --cpu-pin=same|off\n"
	"                     same (the default): run everything -- this driver, the\n"
	"                     wrapper, its supervisor, the target -- on one CPU.  On\n"
	"                     this kind of VM a served call costs 2-3x more when the\n"
	"                     answering worker runs on the other CPU, and which one\n"
	"                     it is changes at random (floor.md); that noise would\n"
	"                     drown the 1.2x this measures.  off: the scheduler\n"
	"                     places everything, as in production.  A daemon named\n"
	"                     by --rss-pid is not pinned by this.\n"
	"    -v, --verbose    targets print how long each phase took (stderr)\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row run inside CMD... (see semop_multi --help)\n"
	"\n"
	"OUTPUT\n"
	"    stdout: a markdown table.  --out FILE: a '#' header, then per row and\n"
	"    case: row, case, units, small, large, after median us, large/small,\n"
	"    RSS before and after (KiB, NA if unknown), bytes per unit.\n"
	"\n"
	"EXIT STATUS\n"
	"    0 all measured; 1 a row failed; 2 usage or set-up error.\n"
	"\n"
	"EXAMPLE\n"
	"    scale --quick --run-under=semvisor-run build/semvisor-run --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_CASES = BU_OPT_OWN,
	OPT_SETS,
	OPT_NSEMS,
	OPT_WAITERS,
	OPT_REP_TIME,
	OPT_WARM_TIME,
	OPT_RSS_PID,
	OPT_CPU_PIN,
	OPT_CASE,
	OPT_TARGET_RSS,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "cases", required_argument, NULL, OPT_CASES },
		{ "sets", required_argument, NULL, OPT_SETS },
		{ "nsems", required_argument, NULL, OPT_NSEMS },
		{ "waiters", required_argument, NULL, OPT_WAITERS },
		{ "rep-time", required_argument, NULL, OPT_REP_TIME },
		{ "warm-time", required_argument, NULL, OPT_WARM_TIME },
		{ "rss-pid", required_argument, NULL, OPT_RSS_PID },
		{ "verbose", no_argument, NULL, 'v' },
		{ "cpu-pin", required_argument, NULL, OPT_CPU_PIN },
		{ "case", required_argument, NULL, OPT_CASE },
		{ "target-rss-pid", required_argument, NULL, OPT_TARGET_RSS },
		BU_LONG_OPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool any_case = false;
	int c;

	memset(o, 0, sizeof(*o));
	bu_opts_init(&o->common);
	o->case_only = -1;
	o->sets = 32000;
	o->nsems = 32000;
	o->pin_same = true;
	while ((c = getopt_long(argc, argv, "hv", lopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			o->verbose = true;
			break;
		case OPT_CPU_PIN:
			if (strcmp(optarg, "same") == 0)
				o->pin_same = true;
			else if (strcmp(optarg, "off") == 0)
				o->pin_same = false;
			else
				bu_die("--cpu-pin: expected same or off, got \"%s\"", optarg);
			break;
		case OPT_CASES:
			for (const char *s = optarg; *s;) {
				size_t n = strcspn(s, ",");
				int k;

				for (k = 0; k < NCASES; k++) {
					if (strlen(case_names[k]) == n &&
					    !strncmp(s, case_names[k], n))
						break;
				}
				if (k == NCASES)
					bu_die("--cases: unknown case \"%.*s\" (sets, bigset, "
					       "waiters)",
					       (int)n, s);
				o->cases[k] = any_case = true;
				s += n + (s[n] == ',');
			}
			break;
		case OPT_SETS:
			o->sets = (int)bu_parse_long("--sets", optarg, SMALL_SETS + 1, 32768);
			break;
		case OPT_NSEMS:
			o->nsems = (int)bu_parse_long("--nsems", optarg, 1, 65535);
			break;
		case OPT_WAITERS:
			o->waiters = (int)bu_parse_long("--waiters", optarg, 1, MAX_WAITERS);
			break;
		case OPT_REP_TIME:
			o->rep_time = bu_parse_seconds("--rep-time", optarg);
			break;
		case OPT_WARM_TIME:
			o->warm_time = bu_parse_seconds("--warm-time", optarg);
			break;
		case OPT_RSS_PID:
			if (strchr(optarg, ':') == NULL || o->nrss == BU_MAX_ROWS)
				bu_die("--rss-pid: expected LABEL:PID");
			o->rss_pid[o->nrss++] = optarg;
			break;
		case OPT_CASE:
			for (int k = 0; k < NCASES; k++) {
				if (strcmp(optarg, case_names[k]) == 0)
					o->case_only = k;
			}
			if (o->case_only < 0)
				bu_die("--case: unknown case \"%s\"", optarg);
			break;
		case OPT_TARGET_RSS:
			o->target_rss_pid = bu_parse_long("--target-rss-pid", optarg, 1, INT_MAX);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (bu_opt(&o->common, c, optarg, MAX_REPS))
				break;
			fputs("Try 'scale --help'.\n", stderr);
			exit(2);
		}
	}
	bu_opts_done(&o->common, argc, argv, 900);
	if (!any_case)
		o->cases[C_SETS] = o->cases[C_BIGSET] = o->cases[C_WAITERS] = true;
	if (o->waiters == 0)
		o->waiters = o->common.quick ? 2000 : 10000;
	if (o->rep_time == 0)
		o->rep_time = o->common.quick ? 0.1 : 0.2;
	if (o->warm_time == 0)
		o->warm_time = 0.05;
	if (o->common.target && o->case_only < 0)
		bu_die("--target needs --case");
}

/* The --rss-pid PID for a row's label, or 0. */
static long rss_pid_for(const struct opts *o, const char *label)
{
	size_t n = strlen(label);

	for (int i = 0; i < o->nrss; i++) {
		if (strncmp(o->rss_pid[i], label, n) == 0 && o->rss_pid[i][n] == ':')
			return bu_parse_long("--rss-pid", o->rss_pid[i] + n + 1, 1, INT_MAX);
	}
	return 0;
}

static const char *unit_name(int c)
{
	return c == C_SETS ? "set" : c == C_BIGSET ? "semaphore" : "parked waiter";
}

int main(int argc, char **argv)
{
	static struct result res[BU_MAX_ROWS][NCASES];
	struct bu_rows rows;
	struct opts o;
	int own, any_failed = 0;
	uint64_t t_start;
	char rbuf[32], pinning[64] = "off (the scheduler places everything)";

	own = bu_split_rows(argc, argv, &rows);
	parse_opts(own, argv, &o);
	if (o.common.target) {
		bu_free_rows(&rows);
		return target_main(&o);
	}
	bu_init("scale");
	if (o.pin_same) {
		cpu_set_t set;
		int cpu = -1;

		/* The first CPU we may use; the targets and wrappers inherit the mask. */
		if (sched_getaffinity(0, sizeof(set), &set) < 0)
			bu_die("sched_getaffinity: %s", strerror(errno));
		for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++) {
			if (CPU_ISSET(i, &set))
				cpu = i;
		}
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			bu_die("sched_setaffinity(CPU %d): %s", cpu, strerror(errno));
		snprintf(pinning, sizeof(pinning), "everything on CPU %d (--cpu-pin=same)", cpu);
	}

	printf("### scale: one uncontended semop as the server's state grows\n\n");
	bu_print_conditions(stdout, "scale");
	printf("CPU pinning: %s.\n", pinning);
	printf(
	    "\nPer-call microseconds of semop(+1)/semop(-1) on one semaphore, median of %d "
	    "repetitions of about %.2f s. SMALL: 10 sets of 1 semaphore exist. LARGE: the "
	    "case's condition holds (sets: %d sets in the namespace; bigset: the call goes to "
	    "the last semaphore of a set of %d; waiters: %d threads parked in semop on their "
	    "own semaphores of another set). AFTER: the condition removed again. \"x small\" "
	    "is LARGE over SMALL and AFTER pooled, from the same target process (goal <= "
	    "1.2x). \"building\" is how long creating the condition took (for waiters: "
	    "starting the threads until all are parked). Memory is the supervisor's VmRSS growth "
	    "while building the condition, divided by the units built.\n\n",
	    o.common.reps, o.rep_time, o.sets, o.nsems, o.waiters);
	fflush(stdout);

	t_start = bu_now_ns();
	for (int c = 0; c < NCASES; c++) {
		if (!o.cases[c])
			continue;
		for (int r = 0; r < rows.n; r++) {
			char setsb[16], nsemsb[16], waitb[16], repsb[16], rtb[32], wtb[32], tob[32],
			    rssb[32], *report, why[256];
			long rp = rss_pid_for(&o, rows.v[r].label);
			int bad;

			snprintf(setsb, sizeof(setsb), "%d", o.sets);
			snprintf(nsemsb, sizeof(nsemsb), "%d", o.nsems);
			snprintf(waitb, sizeof(waitb), "%d", o.waiters);
			snprintf(repsb, sizeof(repsb), "%d", o.common.reps);
			snprintf(rtb, sizeof(rtb), "%.9g", o.rep_time);
			snprintf(wtb, sizeof(wtb), "%.9g", o.warm_time);
			snprintf(tob, sizeof(tob), "%.0f", o.common.timeout);
			snprintf(rssb, sizeof(rssb), "%ld", rp);
			char *targs[32];
			int na = 0;

			targs[na++] = (char *)"--target";
			targs[na++] = (char *)"--case";
			targs[na++] = (char *)case_names[c];
			targs[na++] = (char *)"--sets";
			targs[na++] = setsb;
			targs[na++] = (char *)"--nsems";
			targs[na++] = nsemsb;
			targs[na++] = (char *)"--waiters";
			targs[na++] = waitb;
			targs[na++] = (char *)"--reps";
			targs[na++] = repsb;
			targs[na++] = (char *)"--rep-time";
			targs[na++] = rtb;
			targs[na++] = (char *)"--warm-time";
			targs[na++] = wtb;
			targs[na++] = (char *)"--timeout";
			targs[na++] = tob;
			if (rp) {
				targs[na++] = (char *)"--target-rss-pid";
				targs[na++] = rssb;
			}
			if (o.verbose)
				targs[na++] = (char *)"-v";
			targs[na] = NULL;

			bad = bu_run_target(&rows.v[r], targs, o.common.timeout, &report, why,
					    sizeof(why));
			if (bad == 0)
				bad = parse_report(report, c, &res[r][c], why, sizeof(why));
			if (bad < 0) {
				fprintf(stderr, "scale: row %s, case %s: %s\n", rows.v[r].label,
					case_names[c], why);
				res[r][c].ok = false;
				any_failed = 1;
			}
			free(report);
		}
	}

	printf("| case | row | small us | large us | after us | x small | building s | RSS before "
	       "KiB | RSS after KiB | bytes per unit |\n"
	       "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	for (int c = 0; c < NCASES; c++) {
		if (!o.cases[c])
			continue;
		for (int r = 0; r < rows.n; r++) {
			const struct result *x = &res[r][c];

			if (!x->ok) {
				printf("| %s | %s | FAILED | | | | | | | |\n", case_names[c],
				       rows.v[r].label);
				continue;
			}
			printf("| %s | %s | %.3f | %.3f | %.3f | %s | %.2f |", case_names[c],
			       rows.v[r].label, x->st[P_SMALL].med, x->st[P_LARGE].med,
			       x->st[P_AFTER].med,
			       bu_ratio(x->st[P_LARGE].med, x->base.med, rbuf, sizeof(rbuf)),
			       (double)x->build_ns / 1e9);
			if (x->rss0 > 0 && x->rss1 > 0 && x->units > 0)
				printf(" %ld | %ld | %.0f per %s |\n", x->rss0, x->rss1,
				       (double)(x->rss1 - x->rss0) * 1024.0 / (double)x->units,
				       unit_name(c));
			else
				printf(" NA | NA | NA |\n");
		}
	}
	printf("\nGoal: LARGE <= 1.2x SMALL for every case:\n\n");
	for (int r = 1; r < rows.n; r++) {
		for (int c = 0; c < NCASES; c++) {
			const struct result *x = &res[r][c];

			if (!o.cases[c] || !x->ok)
				continue;
			printf("- %s, %s: %.2fx: %s\n", rows.v[r].label, case_names[c],
			       x->st[P_LARGE].med / x->base.med,
			       x->st[P_LARGE].med / x->base.med <= 1.2 ? "met" : "MISSED");
		}
	}
	printf("\nscale: %.1f s in all; load average (1 min) %.2f at the end\n",
	       (double)(bu_now_ns() - t_start) / 1e9, bu_loadavg1());

	if (o.common.out) {
		FILE *f = fopen(o.common.out, "w");

		if (f == NULL)
			bu_die("%s: %s", o.common.out, strerror(errno));
		fprintf(
		    f,
		    "# scale reps=%d rep_time=%g sets=%d nsems=%d waiters=%d cpus=%ld pin=\"%s\"\n",
		    o.common.reps, o.rep_time, o.sets, o.nsems, o.waiters,
		    sysconf(_SC_NPROCESSORS_ONLN), pinning);
		fprintf(f,
			"# row\tcase\tunits\tsmall_us\tlarge_us\tafter_us\tx_small\trss0_kib\trss1_"
			"kib\tbytes_per_unit\tbuild_s\n");
		for (int r = 0; r < rows.n; r++) {
			for (int c = 0; c < NCASES; c++) {
				const struct result *x = &res[r][c];

				if (!o.cases[c])
					continue;
				if (!x->ok) {
					fprintf(f, "%s\t%s\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\n",
						rows.v[r].label, case_names[c]);
					continue;
				}
				fprintf(f, "%s\t%s\t%ld\t%.4f\t%.4f\t%.4f\t%.4f\t", rows.v[r].label,
					case_names[c], x->units, x->st[P_SMALL].med,
					x->st[P_LARGE].med, x->st[P_AFTER].med,
					x->st[P_LARGE].med / x->base.med);
				if (x->rss0 > 0 && x->rss1 > 0 && x->units > 0)
					fprintf(f, "%ld\t%ld\t%.1f\t", x->rss0, x->rss1,
						(double)(x->rss1 - x->rss0) * 1024.0 /
						    (double)x->units);
				else
					fprintf(f, "NA\tNA\tNA\t");
				fprintf(f, "%.3f\n", (double)x->build_ns / 1e9);
			}
		}
		if (ferror(f) | (fclose(f) != 0))
			bu_die("writing %s failed", o.common.out);
	}
	bu_free_rows(&rows);
	return any_failed;
}

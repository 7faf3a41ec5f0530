/* SPDX-License-Identifier: MIT */
/*
 * bench/restart - what a restart of semvisord costs its clients (issue 14): with --sets sets
 * (32000 by default) and --waiters parked calls (10,000), how long a restart takes, and how
 * soon the parked calls are answered once released after it, beside the same release without
 * a restart.
 *
 * The daemon runs under semvisor-keeper (systemd's fd store where systemd does not run), in
 * a private IPC namespace of this bench. A client under `semvisor-run --daemon` makes the sets;
 * --procs clients of --waiters / --procs threads each park in semop(-1) on one keyed gate set
 * (the kind of load a pool of workers waiting for jobs makes). Per round:
 *   - "restart": the keeper is told "restart TERM"; timed from the command to the new daemon's
 *     READY=1, which it says only after it applied the state: every parked call is in its
 *     queue again. Then a client adds --waiters to the gate at once;
 *   - "no restart": the same release, the daemon left alone.
 * Each waiter notes the CLOCK_MONOTONIC time its semop returned; reported are the times from
 * the release to the first and to the last answer. Every waiter must return 0 (checked), and
 * every round ends with the gate at 0 (checked).
 *
 *   restart [--bin DIR] [--sets N] [--waiters N] [--procs N] [--rounds N]
 *
 * Run as root (a private IPC namespace, and the daemon reads its clients' memory). Output: one
 * line per round and kind, then medians. Numbers go into the README with the command line.
 */
#include <getopt.h>

#include "bench_util.h"

#define GATE_KEY   0x5e3714
#define MAX_ROUNDS 31
#define MAX_PROCS  512

static const char *bin = "build";
static int nsets = 32000, nwaiters = 10000, nprocs = 100, rounds = 3;
static char dir[64];

/* ---- the clients' roles (run under semvisor-run --daemon) ---- */

static int gate(void)
{
	int id = semget(GATE_KEY, 1, IPC_CREAT | 0600);

	if (id < 0)
		bu_die("semget(gate): %s", strerror(errno));
	return id;
}

static int role_sets(int n)
{
	gate();
	for (int i = 1; i < n; i++)
		if (semget(IPC_PRIVATE, 1, 0600) < 0)
			bu_die("semget #%d: %s", i, strerror(errno));
	return 0;
}

static int64_t *woke;

static void *waiter(void *arg)
{
	struct sembuf sb = { 0, -1, 0 };
	int id = gate();

	if (semop(id, &sb, 1))
		bu_die("waiter: semop: %s", strerror(errno));
	woke[(intptr_t)arg] = (int64_t)bu_now_ns();
	return NULL;
}

/* n threads wait; when all returned, prints the first and last time one did */
static int role_wait(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	pthread_attr_t attr;
	int64_t lo = INT64_MAX, hi = 0;

	woke = calloc((size_t)n, sizeof(*woke));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (intptr_t i = 0; i < n; i++)
		if (pthread_create(&t[i], &attr, waiter, (void *)i))
			bu_die("pthread_create");
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		lo = woke[i] < lo ? woke[i] : lo;
		hi = woke[i] > hi ? woke[i] : hi;
	}
	printf("%lld %lld\n", (long long)lo, (long long)hi);
	return 0;
}

/* waits until n are parked on the gate */
static int role_ncnt(int n)
{
	int id = gate();

	while (semctl(id, 0, GETNCNT) < n)
		usleep(20000);
	return 0;
}

/* releases n: prints the time just before */
static int role_post(int n)
{
	struct sembuf sb = { 0, (short)0, 0 };
	int id = gate();
	int64_t t = (int64_t)bu_now_ns();

	/* SEMVMX bounds one operation: add in steps, each at once */
	for (int left = n; left > 0; left -= sb.sem_op) {
		sb.sem_op = (short)(left > 32767 ? 32767 : left);
		if (semop(id, &sb, 1))
			bu_die("post: %s", strerror(errno));
	}
	printf("%lld\n", (long long)t);
	return 0;
}

static int role_zero(void)
{
	int v = semctl(gate(), 0, GETVAL);

	if (v != 0)
		bu_die("the gate ends at %d, not 0", v);
	return 0;
}

/* ---- the driver ---- */

struct child {
	pid_t pid;
	FILE *out; /* its stdout */
};

/* argv under semvisor-run --daemon; stdout a pipe unless out is NULL */
static struct child client(const char *role, int n, bool piped)
{
	char self[PATH_MAX], run[PATH_MAX], sock[128], arg[32];
	int p[2] = { -1, -1 };
	struct child c = { 0 };

	snprintf(run, sizeof(run), "%s/semvisor-run", bin);
	snprintf(sock, sizeof(sock), "--daemon=%s/agent.sock", dir);
	snprintf(arg, sizeof(arg), "%d", n);
	if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
		bu_die("readlink: %s", strerror(errno));
	self[sizeof(self) - 1] = '\0';
	if (piped && pipe(p))
		bu_die("pipe");
	c.pid = fork();
	if (c.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (piped) {
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
		}
		execl(run, run, sock, "--", self, "--role", role, arg, (char *)NULL);
		_exit(127);
	}
	if (piped) {
		close(p[1]);
		c.out = fdopen(p[0], "r");
	}
	return c;
}

static void reap(struct child *c, const char *what)
{
	int st;

	if (waitpid(c->pid, &st, 0) != c->pid || !WIFEXITED(st) || WEXITSTATUS(st))
		bu_die("%s failed (status %#x)", what, st);
	if (c->out)
		fclose(c->out);
}

static void run_client(const char *role, int n)
{
	struct child c = client(role, n, false);

	reap(&c, role);
}

static FILE *keeper_in, *keeper_out;

static void keeper_expect(const char *prefix, char *line, size_t len)
{
	if (!fgets(line, (int)len, keeper_out))
		bu_die("semvisor-keeper ended");
	if (strncmp(line, prefix, strlen(prefix)))
		bu_die("semvisor-keeper: %s", line);
}

static void keeper_start(void)
{
	char keeper[PATH_MAX], daemon[PATH_MAX], listen[128], ctl[128], line[256];
	int in[2], out[2];

	snprintf(keeper, sizeof(keeper), "%s/semvisor-keeper", bin);
	snprintf(daemon, sizeof(daemon), "%s/semvisord", bin);
	snprintf(listen, sizeof(listen), "agent=%s/agent.sock", dir);
	snprintf(ctl, sizeof(ctl), "--control-socket=%s/control.sock", dir);
	if (pipe(in) || pipe(out))
		bu_die("pipe");
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int log;

		snprintf(line, sizeof(line), "%s/daemon.log", dir);
		log = open(line, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (log >= 0)
			dup2(log, 2); /* the daemon's log: kept with the run's sockets */
		close(in[1]);
		close(out[0]);
		/* room for --sets, whatever this host's defaults and the budget's per uid */
		execl(keeper, keeper, "--commands", "--listen", listen, "--log", "/dev/null", "--",
		      daemon, ctl, "--limits=32000,1024000000,500,32000", "--set",
		      "max_sets_per_uid=0", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	keeper_in = fdopen(in[1], "w");
	keeper_out = fdopen(out[0], "r");
	setvbuf(keeper_in, NULL, _IOLBF, 0);
	keeper_expect("ready", line, sizeof(line));
}

struct sample {
	double restart_ms, first_ms, last_ms;
};

static struct sample round_once(bool restart)
{
	struct child w[MAX_PROCS], post;
	struct sample s = { 0 };
	int64_t t_post, lo = INT64_MAX, hi = 0;
	char line[256];
	long long a, b;

	for (int i = 0; i < nprocs; i++)
		w[i] = client("wait", nwaiters / nprocs, true);
	run_client("ncnt", nwaiters / nprocs * nprocs);
	if (restart) {
		int64_t t0 = (int64_t)bu_now_ns();

		fprintf(keeper_in, "restart TERM\n");
		keeper_expect("exited", line, sizeof(line));
		keeper_expect("ready", line, sizeof(line));
		s.restart_ms = (double)((int64_t)bu_now_ns() - t0) / 1e6;
	}
	post = client("post", nwaiters / nprocs * nprocs, true);
	if (fscanf(post.out, "%lld", &a) != 1)
		bu_die("post said nothing");
	t_post = a;
	reap(&post, "post");
	for (int i = 0; i < nprocs; i++) {
		if (fscanf(w[i].out, "%lld %lld", &a, &b) != 2)
			bu_die("a waiter said nothing");
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
		reap(&w[i], "wait");
	}
	run_client("zero", 0);
	s.first_ms = (double)(lo - t_post) / 1e6;
	s.last_ms = (double)(hi - t_post) / 1e6;
	return s;
}

static __attribute__((noreturn)) void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"Usage: restart [--bin DIR] [--sets N] [--waiters N] [--procs N] [--rounds N]\n"
		"Time a restart of semvisord (under semvisor-keeper) with N sets and parked calls, "
		"and\n"
		"how soon the parked calls are answered when released after it. As root.\n"
		"  --bin DIR     where semvisord, semvisor-run and semvisor-keeper are (build)\n"
		"  --sets N      sets in the daemon's namespace (32000)\n"
		"  --waiters N   parked calls (10000), in --procs processes (100)\n"
		"  --rounds N    rounds of each kind (3); medians are reported\n");
	exit(code);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "bin", required_argument, NULL, 'b' },
					      { "sets", required_argument, NULL, 's' },
					      { "waiters", required_argument, NULL, 'w' },
					      { "procs", required_argument, NULL, 'p' },
					      { "rounds", required_argument, NULL, 'r' },
					      { "role", required_argument, NULL, 'R' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	double rs[MAX_ROUNDS], rf[MAX_ROUNDS], rl[MAX_ROUNDS], nf[MAX_ROUNDS], nl[MAX_ROUNDS];
	const char *role = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			bin = optarg;
			break;
		case 's':
			nsets = atoi(optarg);
			break;
		case 'w':
			nwaiters = atoi(optarg);
			break;
		case 'p':
			nprocs = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'R':
			role = optarg;
			break;
		case 'h':
			usage(0);
		default:
			usage(2);
		}
	}
	bu_prog = "restart";
	if (role) {
		int n = optind < argc ? atoi(argv[optind]) : 0;

		setvbuf(stdout, NULL, _IOLBF, 0);
		if (!strcmp(role, "sets"))
			return role_sets(n);
		if (!strcmp(role, "wait"))
			return role_wait(n);
		if (!strcmp(role, "ncnt"))
			return role_ncnt(n);
		if (!strcmp(role, "post"))
			return role_post(n);
		if (!strcmp(role, "zero"))
			return role_zero();
		bu_die("no role %s", role);
	}
	if (nsets < 1 || nwaiters < 1 || nprocs < 1 || nprocs > MAX_PROCS || nwaiters < nprocs ||
	    rounds < 1 || rounds > MAX_ROUNDS)
		usage(2);
	if (unshare(CLONE_NEWIPC))
		bu_die("unshare(CLONE_NEWIPC): %s (run as root)", strerror(errno));
	snprintf(dir, sizeof(dir), "/tmp/semvisor-restart.XXXXXX");
	if (!mkdtemp(dir))
		bu_die("mkdtemp: %s", strerror(errno));
	keeper_start();
	run_client("sets", nsets);
	printf("restart: %d sets, %d parked calls in %d processes, %d rounds\n", nsets,
	       nwaiters / nprocs * nprocs, nprocs, rounds);
	printf("%-11s %12s %16s %16s\n", "round", "restart ms", "first answer ms",
	       "last answer ms");
	for (int r = 0; r < rounds; r++) {
		struct sample a = round_once(true), b = round_once(false);

		rs[r] = a.restart_ms;
		rf[r] = a.first_ms;
		rl[r] = a.last_ms;
		nf[r] = b.first_ms;
		nl[r] = b.last_ms;
		printf("%-11s %12.1f %16.2f %16.2f\n", "restart", a.restart_ms, a.first_ms,
		       a.last_ms);
		printf("%-11s %12s %16.2f %16.2f\n", "no restart", "-", b.first_ms, b.last_ms);
	}
	printf("median: restart %.1f ms; after it, first answer %.2f ms, last %.2f ms; "
	       "without it, first %.2f ms, last %.2f ms\n",
	       bu_stats(rs, rounds).med, bu_stats(rf, rounds).med, bu_stats(rl, rounds).med,
	       bu_stats(nf, rounds).med, bu_stats(nl, rounds).med);
	fprintf(keeper_in, "stop\n");
	fclose(keeper_in);
	return 0;
}

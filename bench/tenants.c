/* SPDX-License-Identifier: MIT */
/*
 * bench/tenants - fairness between tenants: a victim's semop latency alone and while greedy
 * tenants hammer huge sets (issue 15).
 *
 * The victim is one target process with one set of one semaphore. It alternates semop(+1) and
 * semop(-1) (neither ever waits), pausing --pause-us between calls, so it is a latency probe and
 * not a load of its own; each call is timed with CLOCK_MONOTONIC and the target reports p50, p99
 * and the maximum over --calls calls.
 *
 * A greedy tenant is another target process with its own set of --sems semaphores (32000, the
 * kernel's SEMMSL), doing SETALL then GETALL, with values that change every round, until the
 * driver tells it to stop; it reports how many rounds it did. Under a supervisor a SETALL or
 * GETALL of 32000 semaphores is the heaviest call there is: the supervisor copies 64 KB from or
 * to the caller and walks the whole set.
 *
 * Per row and repetition the victim is measured twice, in turns: alone, then while --greedy
 * tenants (default 2) run. The greedy tenants run inside the row's command, like the victim
 * (for "semvisor-run --daemon=SOCKET --", as clients of that daemon beside it), but as hostile
 * tenants would: as another user (uid --tenant-uid, then one less for each further tenant, when
 * root) and each in a user and IPC namespace of its own (root in it, mapped to that uid), as
 * "setpriv --reuid=U --regid=U --clear-groups unshare -Ur --ipc CMD..." would run them. A daemon's
 * agent socket must let that uid connect (bench/tenants.sh starts one that does). The victim
 * starts once every greedy tenant has done its first round, and the tenants stop when it is done.
 *
 * Reported per row: the victim's p50, p99 and max alone and loaded (medians over the
 * repetitions), loaded over alone for p50 and p99, the greedy tenants' rounds per second, and,
 * for every row but native, whether the loaded p99 stays within --goal (3) times the unloaded
 * p99: issue 15's fairness goal, which is about the daemon.
 *
 * Checked, not only timed: every victim call returns 0 and its semaphore ends at 0; every GETALL
 * returns what the SETALL before it wrote; every greedy tenant did at least one round while the
 * victim ran; every set is removed again.
 *
 * Rows and method as the other workload programs (bench_util.h): native plus --run-under rows,
 * repetitions round-robin over rows and loads, medians. Nothing is left behind: the greedy
 * tenants run in process groups of their own and stop when the driver closes their stop pipe
 * (also when the driver dies); they are killed at the deadline (--timeout), on SIGINT, SIGTERM or
 * SIGHUP to the driver, and by PR_SET_PDEATHSIG.
 */
#include <getopt.h>
#include <grp.h>
#include <sys/ipc.h>
#include <sys/sem.h>

#include "bench_util.h"

#define MAX_REPS   31
#define MAX_GREEDY 8
#define MAX_CALLS  1000000
#define WARMUP	   20

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

enum role {
	ROLE_NONE,
	ROLE_VICTIM,
	ROLE_GREEDY,
};

struct opts {
	struct bu_opts common; /* --reps, --quick, --out, --timeout, --target, --result-fd */
	int greedy;	       /* --greedy N */
	int sems;	       /* --sems N */
	long calls;	       /* --calls N */
	long pause_us;	       /* --pause-us N */
	long tenant_uid;       /* --tenant-uid UID; -1: stay the driver's uid */
	double goal;	       /* --goal X */
	enum role role;	       /* target: --role */
	int stop_fd;	       /* target: --stop-fd N (greedy) */
};

/* ---- the victim ---------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int victim_main(const struct opts *o)
{
	struct sembuf op[2] = { { .sem_num = 0, .sem_op = 1, .sem_flg = 0 },
				{ .sem_num = 0, .sem_op = -1, .sem_flg = 0 } };
	union semun arg = { .val = 0 };
	uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)o->calls);
	uint64_t pause = (uint64_t)o->pause_us * 1000u, sum = 0;
	char buf[256];
	int id, v, rc = 0;
	long n = (long)o->calls, p99;

	if (lat == NULL) {
		bu_tmsg("out of memory");
		return 1;
	}
	id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (id < 0 || semctl(id, 0, SETVAL, arg) < 0) {
		bu_tmsg("semget/SETVAL: %s", strerror(errno));
		return 1;
	}
	/* A few untimed calls first: the first served call of a client may set things up. */
	for (long i = 0; i < WARMUP + n && rc == 0; i++) {
		uint64_t t0, t1;
		int r;

		t0 = bu_now_ns();
		r = semop(id, &op[i & 1], 1);
		t1 = bu_now_ns();
		if (r < 0) {
			bu_tmsg("call %ld: semop(%+d): %s", i, op[i & 1].sem_op, strerror(errno));
			rc = 1;
			break;
		}
		if (i >= WARMUP)
			lat[i - WARMUP] = t1 - t0;
		bu_sleep_ns(pause);
	}
	/* WARMUP is even and so is every pair: after an even number of calls the value is 0. An odd
	   --calls leaves one +1 to take back. */
	if (rc == 0 && ((WARMUP + n) & 1) && semop(id, &op[1], 1) < 0) {
		bu_tmsg("the last semop(-1): %s", strerror(errno));
		rc = 1;
	}
	v = semctl(id, 0, GETVAL);
	if (rc == 0 && v != 0) {
		bu_tmsg("the victim's semaphore ends at %d (expected 0)%s%s", v, v < 0 ? ": " : "",
			v < 0 ? strerror(errno) : "");
		rc = 1;
	}
	if (semctl(id, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		rc = 1;
	}
	if (rc) {
		free(lat);
		return rc;
	}
	qsort(lat, (size_t)n, sizeof(uint64_t), cmp_u64);
	for (long i = 0; i < n; i++)
		sum += lat[i];
	/* The nearest-rank percentile: the smallest value with at least 99% of the calls at or
	   below it. */
	p99 = (n * 99 + 99) / 100 - 1;
	snprintf(buf, sizeof(buf), "victim %ld %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
		 n, lat[(n - 1) / 2], lat[p99], lat[n - 1], sum / (uint64_t)n);
	free(lat);
	if (bu_target_report(o->common.result_fd, buf) < 0) {
		bu_tmsg("writing the report: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* ---- a greedy tenant ----------------------------------------------------------------------- */

static volatile sig_atomic_t greedy_stop_sig;

static void greedy_on_signal(int sig)
{
	greedy_stop_sig = sig;
}

/* Has the driver closed the stop pipe (EOF), or asked by signal? */
static bool greedy_stopped(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (greedy_stop_sig)
		return true;
	return poll(&p, 1, 0) != 0; /* EOF (POLLHUP), or an error: stop either way */
}

static int greedy_main(const struct opts *o)
{
	unsigned short *w = malloc(sizeof(unsigned short) * (size_t)o->sems);
	unsigned short *r = malloc(sizeof(unsigned short) * (size_t)o->sems);
	struct sigaction sa;
	uint64_t t0;
	long rounds = 0;
	int id, rc = 0;
	char buf[128];

	if (w == NULL || r == NULL) {
		bu_tmsg("out of memory");
		return 1;
	}
	if (o->stop_fd < 0 || fcntl(o->stop_fd, F_SETFD, FD_CLOEXEC) < 0) {
		bu_tmsg("--stop-fd %d is not an open fd", o->stop_fd);
		return 1;
	}
	/* SIGTERM (the driver's death, forwarded by a wrapper) stops the loop, so the set still
	   goes. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = greedy_on_signal;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0) {
		bu_tmsg("sigaction: %s", strerror(errno));
		return 1;
	}
	id = semget(IPC_PRIVATE, o->sems, IPC_CREAT | 0600);
	if (id < 0) {
		bu_tmsg("semget(IPC_PRIVATE, %d): %s", o->sems, strerror(errno));
		return 1;
	}
	t0 = bu_now_ns();
	while (!greedy_stopped(o->stop_fd)) {
		union semun set = { .array = w }, get = { .array = r };

		/* Values in [0, SEMVMX], different in every round and for every semaphore. */
		for (int i = 0; i < o->sems; i++)
			w[i] = (unsigned short)((rounds * 7919 + i) & 0x7fff);
		memset(r, 0xff, sizeof(unsigned short) * (size_t)o->sems);
		if (semctl(id, 0, SETALL, set) < 0 || semctl(id, 0, GETALL, get) < 0) {
			if (errno == EINTR)
				continue;
			bu_tmsg("round %ld: SETALL/GETALL: %s", rounds + 1, strerror(errno));
			rc = 1;
			break;
		}
		if (memcmp(w, r, sizeof(unsigned short) * (size_t)o->sems) != 0) {
			int i = 0;

			while (w[i] == r[i])
				i++;
			bu_tmsg("round %ld: GETALL gave semaphore %d the value %u, SETALL wrote %u",
				rounds + 1, i, r[i], w[i]);
			rc = 1;
			break;
		}
		/* The driver starts the victim once every tenant has done a round. */
		if (rounds++ == 0 && bu_write_all(o->common.result_fd, "ready\n", 6) < 0) {
			bu_tmsg("writing to the driver: %s", strerror(errno));
			rc = 1;
			break;
		}
	}
	if (semctl(id, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		rc = 1;
	}
	free(w);
	free(r);
	if (rc || greedy_stop_sig)
		return 1;
	snprintf(buf, sizeof(buf), "greedy %ld %" PRIu64 "\n", rounds, bu_now_ns() - t0);
	if (bu_target_report(o->common.result_fd, buf) < 0) {
		bu_tmsg("writing the report: %s", strerror(errno));
		return 1;
	}
	return 0;
}

static int target_main(const struct opts *o)
{
	bu_target_init("tenants", o->common.result_fd, o->common.timeout);
	switch (o->role) {
	case ROLE_VICTIM:
		return victim_main(o);
	case ROLE_GREEDY:
		return greedy_main(o);
	case ROLE_NONE:
		break;
	}
	bu_tmsg("--target needs --role victim or --role greedy");
	return 2;
}

/* ---- the driver: starting and stopping greedy tenants ---------------------------------------- */

/* The greedy tenants' process groups, for the signal handler. */
static volatile sig_atomic_t greedy_pgid[MAX_GREEDY];

static void tn_on_fatal(int sig)
{
	for (int i = 0; i < MAX_GREEDY; i++) {
		if (greedy_pgid[i] > 0)
			kill(-(pid_t)greedy_pgid[i], SIGKILL);
	}
	bu_on_fatal(sig); /* the victim, then the default action */
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = bu_write_all(fd, text, strlen(text));
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

/*
 * In the child, before exec: become uid (when >= 0; the driver is root then), in a user and an IPC
 * namespace of its own, root in it and mapped to that uid, as "setpriv --reuid=U --regid=U
 * --clear-groups unshare -Ur --ipc" would. Messages and _exit(126) on failure.
 */
static void become_tenant(long uid)
{
	char map[64];
	uid_t u = uid >= 0 ? (uid_t)uid : geteuid();
	gid_t g = uid >= 0 ? (gid_t)uid : getegid();

	if (uid >= 0) {
		if (setgroups(0, NULL) < 0 || setresgid(g, g, g) < 0 || setresuid(u, u, u) < 0) {
			bu_tmsg("greedy tenant: becoming uid %ld: %s", uid, strerror(errno));
			_exit(126);
		}
		/* A uid change makes the process non-dumpable, which gives its /proc files to root:
		   it could not write its own uid_map. */
		if (prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(126);
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWIPC) < 0) {
		bu_tmsg("greedy tenant: unshare(CLONE_NEWUSER | CLONE_NEWIPC) as uid %u: %s "
			"(are unprivileged user namespaces allowed?)",
			(unsigned)u, strerror(errno));
		_exit(126);
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)u);
	if (write_file("/proc/self/setgroups", "deny\n") < 0 ||
	    write_file("/proc/self/uid_map", map) < 0) {
		bu_tmsg("greedy tenant: mapping uid %u: %s", (unsigned)u, strerror(errno));
		_exit(126);
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)g);
	if (write_file("/proc/self/gid_map", map) < 0) {
		bu_tmsg("greedy tenant: mapping gid %u: %s", (unsigned)g, strerror(errno));
		_exit(126);
	}
}

struct tenant {
	pid_t pid;     /* also its process group */
	int res;       /* read end of its report pipe */
	char buf[512]; /* what it sent so far */
	size_t len;
	bool exited;
	int status;
};

/*
 * Starts greedy tenant i of row: "[CMD...] SELF --target --role greedy ... --stop-fd S
 * --result-fd R" in its own process group, as become_tenant() makes it. stop_rd is the read end
 * of the stop pipe (its write end, like every fd of the driver's, is close-on-exec).
 */
static void start_tenant(struct tenant *t, int i, const struct bu_row *row, const char *self,
			 const struct opts *o, int stop_rd)
{
	int res[2];

	memset(t, 0, sizeof(*t));
	if (pipe2(res, O_CLOEXEC) < 0)
		bu_die("pipe2: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	t->pid = fork();
	if (t->pid < 0)
		bu_die("fork: %s", strerror(errno));
	if (t->pid == 0) {
		char *argv[BU_MAX_CMD + 32], sems[16], tob[32], sfd[16], rfd[16];
		int n = 0;

		close(res[0]);
		if (setpgid(0, 0) < 0)
			_exit(127);
		become_tenant(o->tenant_uid >= 0 ? o->tenant_uid - i : -1);
		/* After the uid change, which clears it. SIGTERM: a wrapper forwards it. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != bu_driver_pid)
			_exit(127);
		if (fcntl(res[1], F_SETFD, 0) < 0 || fcntl(stop_rd, F_SETFD, 0) < 0)
			_exit(127);
		snprintf(sems, sizeof(sems), "%d", o->sems);
		snprintf(tob, sizeof(tob), "%.0f", o->common.timeout);
		snprintf(sfd, sizeof(sfd), "%d", stop_rd);
		snprintf(rfd, sizeof(rfd), "%d", res[1]);
		for (char **c = row->cmd; c && *c; c++) {
			if (n == BU_MAX_CMD)
				_exit(127);
			argv[n++] = *c;
		}
		argv[n++] = (char *)self;
		argv[n++] = (char *)"--target";
		argv[n++] = (char *)"--role";
		argv[n++] = (char *)"greedy";
		argv[n++] = (char *)"--sems";
		argv[n++] = sems;
		argv[n++] = (char *)"--timeout";
		argv[n++] = tob;
		argv[n++] = (char *)"--stop-fd";
		argv[n++] = sfd;
		argv[n++] = (char *)"--result-fd";
		argv[n++] = rfd;
		argv[n] = NULL;
		execvp(argv[0], argv);
		bu_tmsg("greedy tenant: exec %s: %s (can uid %u reach it?)", argv[0],
			strerror(errno), (unsigned)geteuid());
		_exit(127);
	}
	(void)setpgid(t->pid, t->pid); /* also in the child: whichever runs first wins */
	greedy_pgid[i] = t->pid;
	close(res[1]);
	t->res = res[0];
}

/*
 * Reads from every tenant until each one's text contains want (a whole line), one has closed
 * its pipe without it (-1, why filled), or the deadline passes (-1).
 */
static int tenants_wait_for(struct tenant *t, int n, const char *want, uint64_t deadline, char *why,
			    size_t whysz)
{
	for (;;) {
		struct pollfd p[MAX_GREEDY];
		int np = 0, idx[MAX_GREEDY], r;
		uint64_t now;

		for (int i = 0; i < n; i++) {
			if (strstr(t[i].buf, want) == NULL) {
				p[np] = (struct pollfd){ .fd = t[i].res, .events = POLLIN };
				idx[np++] = i;
			}
		}
		if (np == 0)
			return 0;
		now = bu_now_ns();
		if (now >= deadline) {
			snprintf(why, whysz, "greedy tenant %d: no \"%.*s\" before the deadline",
				 idx[0] + 1, (int)strcspn(want, "\n"), want);
			return -1;
		}
		r = poll(p, (nfds_t)np, (int)((deadline - now) / 1000000u) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			bu_die("poll: %s", strerror(errno));
		for (int k = 0; k < np; k++) {
			struct tenant *x = &t[idx[k]];
			ssize_t got;

			if (p[k].revents == 0)
				continue;
			if (x->len + 1 >= sizeof(x->buf)) {
				snprintf(why, whysz, "greedy tenant %d: report too long",
					 idx[k] + 1);
				return -1;
			}
			got = read(x->res, x->buf + x->len, sizeof(x->buf) - 1 - x->len);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				snprintf(why, whysz,
					 "greedy tenant %d ended without \"%.*s\" (see its message "
					 "above)",
					 idx[k] + 1, (int)strcspn(want, "\n"), want);
				return -1;
			}
			x->len += (size_t)got;
			x->buf[x->len] = '\0';
		}
	}
}

/*
 * Reaps every tenant, waiting until the deadline (at least a second from now), then kills what
 * is left of their process groups. -1 with why filled if one did not exit with status 0.
 */
static int tenants_reap(struct tenant *t, int n, uint64_t deadline, char *why, size_t whysz)
{
	int rc = 0, left = 0;

	if (deadline < bu_now_ns() + 1000000000u)
		deadline = bu_now_ns() + 1000000000u;
	for (int i = 0; i < n; i++)
		left += !t[i].exited;
	while (left > 0) {
		for (int i = 0; i < n; i++) {
			pid_t w;

			if (t[i].exited)
				continue;
			w = waitpid(t[i].pid, &t[i].status, WNOHANG);
			if (w < 0 && errno != EINTR)
				bu_die("waitpid: %s", strerror(errno));
			if (w == t[i].pid) {
				t[i].exited = true;
				left--;
			}
		}
		if (left == 0 || bu_now_ns() >= deadline)
			break;
		bu_sleep_ns(2000000);
	}
	for (int i = 0; i < n; i++) {
		if (!t[i].exited) {
			kill(-t[i].pid, SIGKILL);
			while (waitpid(t[i].pid, &t[i].status, 0) < 0 && errno == EINTR)
				;
			t[i].exited = true;
			if (rc == 0)
				snprintf(why, whysz, "greedy tenant %d did not exit in time",
					 i + 1);
			rc = -1;
		} else if (!WIFEXITED(t[i].status) || WEXITSTATUS(t[i].status) != 0) {
			char s[96];

			/* The group too: a wrapper's helpers must not outlive a failed tenant. */
			kill(-t[i].pid, SIGKILL);
			bu_describe_status(t[i].status, s, sizeof(s));
			if (rc == 0)
				snprintf(why, whysz, "greedy tenant %d: %s", i + 1, s);
			rc = -1;
		}
		greedy_pgid[i] = 0;
		close(t[i].res);
	}
	return rc;
}

/* ---- the driver: rows, loads, repetitions ------------------------------------------------------ */

enum {
	L_ALONE,
	L_LOADED,
	NLOADS
};

struct cell {
	double p50[MAX_REPS], p99[MAX_REPS], max[MAX_REPS], mean[MAX_REPS]; /* microseconds */
	double rps[MAX_REPS]; /* greedy rounds per second, all tenants together */
	int n;
	struct bu_stat s50, s99, smax, smean, srps;
};

static int parse_victim(char *rep, const struct opts *o, struct cell *c, char *why, size_t whysz)
{
	uint64_t p50, p99, max, mean;
	long n;

	if (sscanf(rep, "victim %ld %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &n, &p50, &p99,
		   &max, &mean) != 5 ||
	    n != o->calls || p50 == 0 || p50 > p99 || p99 > max) {
		snprintf(why, whysz, "unexpected victim report \"%.80s\"", rep);
		return -1;
	}
	c->p50[c->n] = (double)p50 / 1e3;
	c->p99[c->n] = (double)p99 / 1e3;
	c->max[c->n] = (double)max / 1e3;
	c->mean[c->n] = (double)mean / 1e3;
	c->rps[c->n] = NAN;
	return 0;
}

/*
 * One measurement: the victim of row, alone or with the greedy tenants. Fills the next
 * repetition of c. 0, or -1 with why filled.
 */
static int measure(const struct bu_row *row, const char *self, const struct opts *o,
		   char *const *vargs, bool loaded, struct cell *c, char *why, size_t whysz)
{
	struct tenant t[MAX_GREEDY];
	uint64_t deadline = bu_now_ns() + (uint64_t)(o->common.timeout * 1e9);
	double rps = 0;
	char *report = NULL, rwhy[256];
	int stop[2], rc;

	if (!loaded) {
		if (bu_run_target(row, vargs, o->common.timeout, &report, why, whysz) < 0)
			return -1;
		rc = parse_victim(report, o, c, why, whysz);
		free(report);
		if (rc == 0)
			c->n++;
		return rc;
	}

	if (pipe2(stop, O_CLOEXEC) < 0)
		bu_die("pipe2: %s", strerror(errno));
	for (int i = 0; i < o->greedy; i++)
		start_tenant(&t[i], i, row, self, o, stop[0]);
	close(stop[0]);
	rc = tenants_wait_for(t, o->greedy, "ready\n", deadline, why, whysz);
	if (rc == 0) {
		double left = (double)(deadline - bu_now_ns()) / 1e9;

		rc = bu_run_target(row, vargs, left > 1 ? left : 1, &report, why, whysz);
		if (rc == 0)
			rc = parse_victim(report, o, c, why, whysz);
		free(report);
	}
	/* Stop them: EOF on the stop pipe. */
	close(stop[1]);
	if (rc == 0)
		rc = tenants_wait_for(t, o->greedy, "\nend\n", deadline, why, whysz);
	for (int i = 0; i < o->greedy && rc == 0; i++) {
		char *g = strstr(t[i].buf, "greedy ");
		uint64_t ns;
		long rounds;

		/* Round 1 came before the victim started, so one more means it ran beside it. */
		if (g == NULL || sscanf(g, "greedy %ld %" SCNu64, &rounds, &ns) != 2 || ns == 0 ||
		    rounds < 2) {
			snprintf(why, whysz, "greedy tenant %d: unexpected report \"%.80s\"", i + 1,
				 t[i].buf);
			rc = -1;
			break;
		}
		rps += (double)rounds / ((double)ns / 1e9);
	}
	/* Always reaped, whatever went wrong before; the first failure is the one reported. */
	if (tenants_reap(t, o->greedy, deadline, rwhy, sizeof(rwhy)) < 0 && rc == 0) {
		snprintf(why, whysz, "%s", rwhy);
		rc = -1;
	}
	if (rc == 0) {
		c->rps[c->n] = rps;
		c->n++;
	}
	return rc;
}

/* clang-format off */
static void usage(FILE *f)
{
	fputs(
	"NAME\n"
	"    tenants - a victim's semop latency alone and beside greedy tenants\n"
	"\n"
	"SYNOPSIS\n"
	"    tenants [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    The victim alternates semop(+1) and semop(-1) on one semaphore of its\n"
	"    own set, pausing --pause-us between calls, and times every call; it\n"
	"    reports p50, p99 and max over --calls calls.  A greedy tenant loops\n"
	"    SETALL then GETALL (new values every round, checked) on its own set of\n"
	"    --sems semaphores until stopped.  Per row and repetition the victim is\n"
	"    measured alone, then while --greedy tenants run.\n"
	"\n"
	"    The greedy tenants run inside the row's command like the victim (for\n"
	"    semvisor-run --daemon=SOCKET --: as clients of the same daemon), as\n"
	"    hostile tenants: as another uid (when root: --tenant-uid, one less for\n"
	"    each further tenant), each in a user and IPC namespace of its own, root\n"
	"    in it and mapped to that uid (setpriv ... unshare -Ur --ipc).  A daemon's\n"
	"    agent socket and its directory must let that uid connect; see\n"
	"    bench/tenants.sh, which starts such a daemon and runs this program.\n"
	"\n"
	"    Rows: native, and one per --run-under.  Repetitions go round-robin over\n"
	"    rows and loads (alone, loaded, alone, loaded, ...); each figure is the\n"
	"    median over --reps.  For every row but native the goal is checked:\n"
	"    loaded p99 <= --goal times the p99 alone (issue 15).\n"
	"\n"
	"OPTIONS\n"
	"    --greedy N       greedy tenants in the loaded case (default 2, at most 8)\n"
	"    --sems N         semaphores in each greedy tenant's set (default 32000)\n"
	"    --calls N        timed victim calls per measurement (default 5000;\n"
	"                     --quick: 2000)\n"
	"    --pause-us N     pause after each victim call (default 150)\n"
	"    --tenant-uid U   the first greedy tenant's uid when root (default 65534;\n"
	"                     tenant i runs as U-i); not root: the greedy tenants keep\n"
	"                     the driver's uid, in namespaces of their own all the same\n"
	"    --goal X         loaded p99 / p99 alone to meet (default 3)\n"
	"    --reps N         repetitions (default 5; --quick: 3)\n"
	"    --quick          the short settings\n"
	"    --out FILE       tab-separated results (see OUTPUT)\n"
	"    --timeout SEC    deadline of one measurement (default 120): the victim\n"
	"                     and every greedy tenant are killed then\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row run inside CMD... (see semop_multi --help)\n"
	"\n"
	"OUTPUT\n"
	"    stdout: a markdown table and a goal line per row.  --out FILE: a '#'\n"
	"    header, then per row and load (alone, loaded): row, load, p50, p99, max,\n"
	"    mean (microseconds, medians), p50 and p99 over alone, greedy rounds/s\n"
	"    (all tenants together; NA alone), repetitions, goal (met, missed, or NA).\n"
	"\n"
	"EXIT STATUS\n"
	"    0 all rows measured (whether or not the goal is met); 1 a row failed;\n"
	"    2 usage or set-up error.\n"
	"\n"
	"EXAMPLE\n"
	"    bench/tenants.sh build --quick\n"
	"    tenants --quick --run-under=semvisord build/semvisor-run --daemon=SOCK --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_GREEDY = BU_OPT_OWN,
	OPT_SEMS,
	OPT_CALLS,
	OPT_PAUSE,
	OPT_TENANT_UID,
	OPT_GOAL,
	OPT_ROLE,
	OPT_STOP_FD,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "greedy", required_argument, NULL, OPT_GREEDY },
		{ "sems", required_argument, NULL, OPT_SEMS },
		{ "calls", required_argument, NULL, OPT_CALLS },
		{ "pause-us", required_argument, NULL, OPT_PAUSE },
		{ "tenant-uid", required_argument, NULL, OPT_TENANT_UID },
		{ "goal", required_argument, NULL, OPT_GOAL },
		{ "role", required_argument, NULL, OPT_ROLE },
		{ "stop-fd", required_argument, NULL, OPT_STOP_FD },
		BU_LONG_OPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	bu_opts_init(&o->common);
	o->greedy = 2;
	o->sems = 32000;
	o->pause_us = 150;
	o->tenant_uid = 65534;
	o->goal = 3;
	o->stop_fd = -1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_GREEDY:
			o->greedy = (int)bu_parse_long("--greedy", optarg, 1, MAX_GREEDY);
			break;
		case OPT_SEMS:
			o->sems = (int)bu_parse_long("--sems", optarg, 1, 65535);
			break;
		case OPT_CALLS:
			o->calls = bu_parse_long("--calls", optarg, 100, MAX_CALLS);
			break;
		case OPT_PAUSE:
			o->pause_us = bu_parse_long("--pause-us", optarg, 0, 1000000);
			break;
		case OPT_TENANT_UID:
			o->tenant_uid = bu_parse_long("--tenant-uid", optarg, 1, 4294967294L);
			break;
		case OPT_GOAL:
			o->goal = bu_parse_seconds("--goal", optarg);
			break;
		case OPT_ROLE:
			if (strcmp(optarg, "victim") == 0)
				o->role = ROLE_VICTIM;
			else if (strcmp(optarg, "greedy") == 0)
				o->role = ROLE_GREEDY;
			else
				bu_die("--role: expected victim or greedy, got \"%s\"", optarg);
			break;
		case OPT_STOP_FD:
			o->stop_fd = (int)bu_parse_long("--stop-fd", optarg, 0, INT_MAX);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (bu_opt(&o->common, c, optarg, MAX_REPS))
				break;
			fputs("Try 'tenants --help'.\n", stderr);
			exit(2);
		}
	}
	bu_opts_done(&o->common, argc, argv, 120);
	if (o->calls == 0)
		o->calls = o->common.quick ? 2000 : 5000;
	/* Only root can become another uid; everyone can have namespaces of their own. */
	if (geteuid() != 0)
		o->tenant_uid = -1;
}

static const char *const load_name[NLOADS] = { "alone", "loaded" };

static const char *fmt_us(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "NA");
	else
		snprintf(buf, size, "%.1f", v);
	return buf;
}

int main(int argc, char **argv)
{
	static struct cell cells[BU_MAX_ROWS][NLOADS];
	struct bu_rows rows;
	struct opts o;
	bool failed[BU_MAX_ROWS] = { false };
	char self[PATH_MAX], callsb[32], pauseb[32], tob[32], who[128], loaded[32];
	struct sigaction sa;
	int own, any_failed = 0;
	uint64_t t_start;
	ssize_t n;

	own = bu_split_rows(argc, argv, &rows);
	parse_opts(own, argv, &o);
	if (o.common.target) {
		bu_free_rows(&rows);
		return target_main(&o);
	}
	bu_init("tenants");
	/* The greedy tenants' groups go too, then bu_on_fatal()'s work. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = tn_on_fatal;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0)
		bu_die("sigaction: %s", strerror(errno));
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		bu_die("readlink(/proc/self/exe): %s", strerror(errno));
	self[n] = '\0';

	snprintf(loaded, sizeof(loaded), "%d greedy", o.greedy);
	snprintf(callsb, sizeof(callsb), "%ld", o.calls);
	snprintf(pauseb, sizeof(pauseb), "%ld", o.pause_us);
	snprintf(tob, sizeof(tob), "%.0f", o.common.timeout);
	char *vargs[] = { (char *)"--target",
			  (char *)"--role",
			  (char *)"victim",
			  (char *)"--calls",
			  callsb,
			  (char *)"--pause-us",
			  pauseb,
			  (char *)"--timeout",
			  tob,
			  NULL };

	if (o.tenant_uid >= 0 && o.greedy > 1)
		snprintf(who, sizeof(who), "uids %ld to %ld", o.tenant_uid - o.greedy + 1,
			 o.tenant_uid);
	else if (o.tenant_uid >= 0)
		snprintf(who, sizeof(who), "uid %ld", o.tenant_uid);
	else
		snprintf(who, sizeof(who), "the driver's uid %u (not root)", (unsigned)geteuid());
	printf("### tenants: a victim's semop latency alone and beside %d greedy tenants\n\n",
	       o.greedy);
	bu_print_conditions(stdout, "tenants");
	printf(
	    "\nThe victim: semop +1/-1 in turns on one semaphore of its own set, %ld timed calls "
	    "with a %ld us pause after each. Loaded: %d greedy tenants each loop SETALL+GETALL "
	    "on a set of %d semaphores of its own (every GETALL checked), inside the row's "
	    "command like the victim, as %s, each in a user+IPC namespace of its own. Medians "
	    "of %d repetitions taken round-robin over rows and loads (alone, loaded, ...); "
	    "\"x alone\" compares with the same row alone in this run; the goal: loaded p99 "
	    "<= %.1fx alone under a supervisor.\n\n",
	    o.calls, o.pause_us, o.greedy, o.sems, who, o.common.reps, o.goal);
	fflush(stdout);

	t_start = bu_now_ns();
	for (int rep = 0; rep < o.common.reps; rep++) {
		for (int r = 0; r < rows.n; r++) {
			for (int l = 0; l < NLOADS && !failed[r]; l++) {
				char why[256];

				if (measure(&rows.v[r], self, &o, vargs, l == L_LOADED,
					    &cells[r][l], why, sizeof(why)) < 0) {
					fprintf(stderr, "tenants: row %s %s, repetition %d: %s\n",
						rows.v[r].label, load_name[l], rep + 1, why);
					failed[r] = true;
					any_failed = 1;
				}
			}
		}
	}
	for (int r = 0; r < rows.n; r++) {
		for (int l = 0; l < NLOADS; l++) {
			struct cell *c = &cells[r][l];
			int k = failed[r] ? 0 : c->n;

			c->s50 = bu_stats(c->p50, k);
			c->s99 = bu_stats(c->p99, k);
			c->smax = bu_stats(c->max, k);
			c->smean = bu_stats(c->mean, k);
			c->srps = bu_stats(c->rps, l == L_LOADED ? k : 0);
		}
	}

	printf("| row | load | p50 us | p99 us | max us | p50 x alone | p99 x alone | greedy "
	       "rounds/s |\n");
	printf("|---|---|--:|--:|--:|--:|--:|--:|\n");
	for (int r = 0; r < rows.n; r++) {
		for (int l = 0; l < NLOADS; l++) {
			const struct cell *c = &cells[r][l], *a = &cells[r][L_ALONE];
			char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];

			if (failed[r]) {
				printf("| %s | %s | FAILED | NA | NA | NA | NA | NA |\n",
				       rows.v[r].label, load_name[l]);
				continue;
			}
			printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", rows.v[r].label,
			       l == L_ALONE ? "alone" : loaded, fmt_us(c->s50.med, b1, 32),
			       fmt_us(c->s99.med, b2, 32), fmt_us(c->smax.med, b3, 32),
			       bu_ratio(c->s50.med, a->s50.med, b4, 32),
			       bu_ratio(c->s99.med, a->s99.med, b5, 32),
			       l == L_ALONE ? "-" : fmt_us(c->srps.med, b6, 32));
		}
	}
	printf("\n");
	for (int r = 0; r < rows.n; r++) {
		double x = cells[r][L_LOADED].s99.med / cells[r][L_ALONE].s99.med;

		if (failed[r])
			printf("tenants: row %s FAILED (see stderr)\n", rows.v[r].label);
		else if (r == 0)
			printf("tenants: native: loaded p99 %.2fx alone (the kernel's own figure, "
			       "no goal)\n",
			       x);
		else
			printf("tenants: %s: loaded p99 %.2fx alone (goal <= %.1fx): goal %s\n",
			       rows.v[r].label, x, o.goal, x <= o.goal ? "met" : "missed");
	}
	printf("tenants: %.1f s in all; load average (1 min) %.2f at the end\n",
	       (double)(bu_now_ns() - t_start) / 1e9, bu_loadavg1());

	if (o.common.out) {
		FILE *f = fopen(o.common.out, "w");

		if (f == NULL)
			bu_die("%s: %s", o.common.out, strerror(errno));
		fprintf(f,
			"# tenants greedy=%d sems=%d calls=%ld pause_us=%ld reps=%d goal=%.2f "
			"cpus=%ld\n",
			o.greedy, o.sems, o.calls, o.pause_us, o.common.reps, o.goal,
			sysconf(_SC_NPROCESSORS_ONLN));
		fprintf(f,
			"# row\tload\tp50_us\tp99_us\tmax_us\tmean_us\tp50_x_alone\tp99_x_alone\t"
			"greedy_rounds_per_s\treps\tgoal\n");
		for (int r = 0; r < rows.n; r++) {
			for (int l = 0; l < NLOADS; l++) {
				const struct cell *c = &cells[r][l], *a = &cells[r][L_ALONE];
				double x99 = c->s99.med / a->s99.med;
				const char *goal = "NA";

				if (failed[r]) {
					fprintf(f, "%s\t%s\tNA\tNA\tNA\tNA\tNA\tNA\tNA\t0\tNA\n",
						rows.v[r].label, load_name[l]);
					continue;
				}
				if (r > 0 && l == L_LOADED)
					goal = x99 <= o.goal ? "met" : "missed";
				fprintf(f, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.4f\t%.4f\t",
					rows.v[r].label, load_name[l], c->s50.med, c->s99.med,
					c->smax.med, c->smean.med, c->s50.med / a->s50.med, x99);
				if (l == L_LOADED)
					fprintf(f, "%.1f", c->srps.med);
				else
					fprintf(f, "NA");
				fprintf(f, "\t%d\t%s\n", c->s50.n, goal);
			}
		}
		if (ferror(f) | (fclose(f) != 0))
			bu_die("writing %s failed", o.common.out);
	}
	bu_free_rows(&rows);
	return any_failed;
}

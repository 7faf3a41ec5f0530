/* SPDX-License-Identifier: MIT */
/*
 * The control socket live: a supervisor (nt_super) and its control server in the test process,
 * a confined child whose semaphore calls the supervisor serves (seccomp filter, listener fd sent
 * over a socketpair), and clients over the socket: the test's own requests, unprivileged peers
 * (children that become uid 65534, some with group 0, or the uid owning one set), and the real
 * build/semvisorctl ($O, default build).
 *
 * The child makes a known list of calls with raw system calls (glibc's semop() is semtimedop,
 * which would blur the per-call counts), so every counter can be checked for an exact value.
 * Criterion runs each test in its own process: each has its own supervisor and socket.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctl_frame.h"
#include "handoff/xfer.h"
#include "notify/notify.h"
#include "tests/lib/fixture.h"

static void live_cleanup(void);

TestSuite(live, .timeout = 60, .fini = live_cleanup);

/*
 * The supervisor keeps its namespaces, their sets and its own struct for the life of the process
 * (nt_super_free() leaves them: its callers exit next). Those are not this file's leaks; anything
 * the control server or the client code leaves behind is still reported (ASan builds).
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:nt_super_new\nleak:worker_main\nleak:nsreg_named\n";
}

#define KEY1   0x5e1001
#define KEY2   0x5e1002
#define KEY3   0x5e1003
#define KEY4   0x5e1004
#define NOBODY 65534
#define OWNER  1000 /* a uid that owns a set; no account needed */
/* values no counter or id of these tests reaches: seen in a reply, they can only be these */
#define SECRET_VAL 4242
#define PUBLIC_VAL 4243

/* ---- the confined child ---- */

union semun {
	int val;
	void *buf;
};

static long raw_semop(int id, unsigned short num, short op, short flg)
{
	struct sembuf sb = { .sem_num = num, .sem_op = op, .sem_flg = flg };

	return syscall(SYS_semop, id, &sb, 1);
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		_exit(90);
}

static void xread(int fd, void *p, size_t n)
{
	if (read(fd, p, n) != (ssize_t)n)
		_exit(91);
}

/*
 * Commands from the test over cmd, one byte each:
 *   'A'  the calls of phase A; answers the three set ids
 *   'B'  fork a grandchild that blocks in semop(id2, sem 1, -1); answers 'b'
 *   'C'  semop(id2, sem 1, +1) to release it, reap it; answers its exit status
 *   'D'  after 'A': SETVAL SECRET_VAL on id2 (0600) sem 0; a set of 1 with key KEY3 and mode
 *        0604 whose sem 0 gets PUBLIC_VAL; a set of 1 with key KEY4, mode 0400, given to
 *        uid OWNER by IPC_SET; answers the two ids
 *   'E'  after 'D': the KEY4 set given to uid NOBODY by IPC_SET; answers 'e'
 *   'Q'  exit
 * Phase A, in order: semget x3, semctl SETVAL x2, semctl GETVAL, semop +2 on id1 sem 0,
 * semtimedop -1 on id1 sem 2, semop -1 IPC_NOWAIT on id2 sem 0 (EAGAIN): 9 calls.
 */
static void child_main(int cmd) __attribute__((noreturn));
static void child_main(int cmd)
{
	char c;
	int ids[3] = { -1, -1, -1 };
	pid_t gc = -1;

	fx_confine(cmd);
	for (;;) {
		xread(cmd, &c, 1);
		switch (c) {
		case 'A': {
			struct sembuf dn = { .sem_num = 2, .sem_op = -1 };

			ids[0] = (int)syscall(SYS_semget, KEY1, 3, IPC_CREAT | 0640);
			ids[1] = (int)syscall(SYS_semget, KEY2, 2, IPC_CREAT | 0600);
			ids[2] = (int)syscall(SYS_semget, IPC_PRIVATE, 1, IPC_CREAT | 0666);
			syscall(SYS_semctl, ids[0], 1, SETVAL, 7);
			syscall(SYS_semctl, ids[0], 2, SETVAL, 3);
			if (syscall(SYS_semctl, ids[0], 1, GETVAL, 0) != 7)
				_exit(94);
			raw_semop(ids[0], 0, 2, 0);
			syscall(SYS_semtimedop, ids[0], &dn, 1, NULL);
			if (raw_semop(ids[1], 0, -1, IPC_NOWAIT) != -1 || errno != EAGAIN)
				_exit(95);
			xwrite(cmd, ids, sizeof(ids));
			break;
		}
		case 'B':
			gc = fork();
			if (gc == 0)
				_exit(raw_semop(ids[1], 1, -1, 0) == 0 ? 0 : 96);
			xwrite(cmd, "b", 1);
			break;
		case 'C': {
			int st = -1;

			raw_semop(ids[1], 1, 1, 0);
			waitpid(gc, &st, 0);
			xwrite(cmd, &st, sizeof(st));
			break;
		}
		case 'D': {
			int more[2] = { (int)syscall(SYS_semget, KEY3, 1, IPC_CREAT | 0604),
					(int)syscall(SYS_semget, KEY4, 1, IPC_CREAT | 0400) };
			struct semid_ds ds = { .sem_perm = {
						   .uid = OWNER, .gid = 0, .mode = 0400 } };

			if (syscall(SYS_semctl, ids[1], 0, SETVAL, SECRET_VAL) ||
			    syscall(SYS_semctl, more[0], 0, SETVAL, PUBLIC_VAL) ||
			    syscall(SYS_semctl, more[1], 0, IPC_SET, &ds))
				_exit(97);
			xwrite(cmd, more, sizeof(more));
			break;
		}
		case 'E': {
			struct semid_ds ds = { .sem_perm = {
						   .uid = NOBODY, .gid = 0, .mode = 0400 } };
			int id = (int)syscall(SYS_semget, KEY4, 0, 0);

			if (id < 0 || syscall(SYS_semctl, id, 0, IPC_SET, &ds))
				_exit(98);
			xwrite(cmd, "e", 1);
			break;
		}
		default:
			_exit(0);
		}
	}
}

/* ---- the supervisor and its control server ---- */

struct live {
	struct nt_super *s;
	struct ctl_server *srv;
	char dir[64], path[128];
	pid_t child, child2;
	int cmd, cmd2;
	int ids[3];
};

static struct live L = { .child = -1, .child2 = -1, .cmd = -1, .cmd2 = -1 };

/* Fork a confined child (before any thread exists, when possible); returns the command fd. */
static int spawn_child(pid_t *pid)
{
	int sp[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	fflush(NULL);
	*pid = fork();
	cr_assert_geq(*pid, 0);
	if (*pid == 0) {
		close(sp[0]);
		child_main(sp[1]);
	}
	close(sp[1]);
	return sp[0];
}

static void adopt_child(int cmd, const char *name, const char *ns_name)
{
	struct nt_listener_opts lo = { .name = name, .ns_name = ns_name };
	struct ho_info info;
	char err[256];
	int fd;

	cr_assert_eq(ho_recv(cmd, &fd, &info, 10000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(nt_super_add_listener(L.s, fd, &lo), 0);
}

static void start_server(const struct ctl_opts *given)
{
	struct ctl_opts o = CTL_OPTS_INIT;
	char err[256];

	if (given)
		o = *given;
	o.path = L.path;
	L.srv = ctl_server_start(L.s, &o, err, sizeof(err));
	cr_assert_not_null(L.srv, "ctl_server_start: %s", err);
}

/* A supervisor, a control server (opts, or defaults with mode 0666), one confined child. */
static void live_start(const struct ctl_opts *opts, const char *ns_name)
{
	struct nt_config cfg = { .nworkers = 2 };
	struct ctl_opts o = CTL_OPTS_INIT;
	char err[256];

	/* peers of other uids, chown, and a supervisor serving another process need root */
	if (geteuid() != 0)
		cr_skip_test("the live control tests run as root");
	signal(SIGPIPE, SIG_IGN);
	L.cmd = spawn_child(&L.child);
	snprintf(L.dir, sizeof(L.dir), "/tmp/semvisor-ctl-test.XXXXXX");
	cr_assert_not_null(mkdtemp(L.dir));
	/* unprivileged peers must be able to reach the socket: only its own mode decides */
	cr_assert_eq(chmod(L.dir, 0755), 0);
	snprintf(L.path, sizeof(L.path), "%s/control.sock", L.dir);
	L.s = nt_super_new(&cfg, err, sizeof(err));
	cr_assert_not_null(L.s, "%s", err);
	cr_assert_eq(nt_super_start(L.s), 0);
	o.mode = 0666;
	start_server(opts ? opts : &o);
	adopt_child(L.cmd, "live-child", ns_name);
}

static void child_do(int cmd, char c, void *answer, size_t len)
{
	struct pollfd pfd = { .fd = cmd, .events = POLLIN };

	cr_assert_eq(write(cmd, &c, 1), 1);
	if (!len)
		return;
	cr_assert_eq(poll(&pfd, 1, 10000), 1, "the child did not answer '%c'", c);
	cr_assert_eq(read(cmd, answer, len), (ssize_t)len, "the child died during '%c'", c);
}

static void phase_a(void)
{
	child_do(L.cmd, 'A', L.ids, sizeof(L.ids));
	for (int i = 0; i < 3; i++)
		cr_assert_geq(L.ids[i], 0, "semget %d failed in the child", i);
}

static void live_stop(void)
{
	if (L.cmd >= 0)
		child_do(L.cmd, 'Q', NULL, 0);
	if (L.cmd2 >= 0)
		child_do(L.cmd2, 'Q', NULL, 0);
	if (L.child > 0)
		waitpid(L.child, NULL, 0);
	if (L.child2 > 0)
		waitpid(L.child2, NULL, 0);
	if (L.cmd >= 0)
		close(L.cmd);
	if (L.cmd2 >= 0)
		close(L.cmd2);
	L.child = L.child2 = -1;
	L.cmd = L.cmd2 = -1;
	ctl_server_stop(L.srv);
	L.srv = NULL;
	if (L.s) {
		nt_super_stop(L.s);
		nt_super_wait(L.s);
		nt_super_free(L.s);
		L.s = NULL;
	}
	unlink(L.path);
	rmdir(L.dir);
}

/* After every test, passed or not: no temporary directory or child left behind. */
static void live_cleanup(void)
{
	static const char *const extra[] = { "stale.sock", "activated.sock" };
	char p[256];

	if (L.child > 0)
		kill(L.child, SIGKILL);
	if (L.child2 > 0)
		kill(L.child2, SIGKILL);
	if (!L.dir[0])
		return;
	unlink(L.path);
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", L.dir, extra[i]);
		unlink(p);
	}
	rmdir(L.dir);
}

/* ---- a client ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static bool send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		p = (const char *)p + k;
		n -= (size_t)k;
	}
	return true;
}

static bool send_req(int fd, Semvisor__Request *req)
{
	uint8_t buf[4096];
	size_t n = ctl_frame_size(&req->base);

	if (n > sizeof(buf))
		return false;
	return send_all(fd, buf, ctl_frame_pack(&req->base, buf));
}

/* The next reply, or NULL on EOF, timeout or an undecodable one. */
static Semvisor__Reply *recv_reply(int fd, int timeout_ms)
{
	static uint8_t *buf;
	static size_t cap;
	size_t len = 0, plen = 0;
	int64_t end = now_ms() + timeout_ms;
	Semvisor__Reply *r = NULL;
	char why[256];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int rc = ctl_frame_peek(buf, len, CTL_MAX_REPLY, &plen);
		ssize_t k;

		if (rc == 1)
			break;
		if (rc < 0)
			return NULL;
		if (cap < len + 65536 || cap < plen + 4) {
			cap = (len + 65536 > plen + 4 ? len + 65536 : plen + 4);
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
		if (poll(&pfd, 1, (int)(end - now_ms() > 0 ? end - now_ms() : 0)) != 1)
			return NULL;
		/* one frame at a time: what follows stays in the socket for the next call */
		k = read(fd, buf + len, rc == 0 && len >= 4 ? plen + 4 - len : 4 - len);
		if (k <= 0)
			return NULL;
		len += (size_t)k;
	}
	if (ctl_reply_decode(buf + 4, plen, &r, why, sizeof(why)))
		cr_log_error("reply: %s", why);
	return r;
}

static void req_init(Semvisor__Request *req, Semvisor__Request__BodyCase kind, void *body)
{
	semvisor__request__init(req);
	req->version = CTL_PROTO_VERSION;
	req->id = 42;
	req->body_case = kind;
	req->stats = body; /* a union of pointers */
}

/* One request on a connection of its own. */
static Semvisor__Reply *call_at(const char *path, Semvisor__Request *req)
{
	Semvisor__Reply *r;
	int fd = connect_to(path);

	cr_assert_geq(fd, 0, "connect %s: %s", path, strerror(errno));
	cr_assert(send_req(fd, req));
	r = recv_reply(fd, 10000);
	close(fd);
	cr_assert_not_null(r, "no reply");
	return r;
}

static Semvisor__Reply *call(Semvisor__Request *req)
{
	return call_at(L.path, req);
}

static Semvisor__Reply *get_stats(bool with_clients)
{
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;

	st.with_clients = with_clients;
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	r = call(&req);
	cr_assert_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	cr_assert_eq(r->body_case, SEMVISOR__REPLY__BODY_STATS);
	return r;
}

/* Stats once the answers of the last calls are counted (they are counted after being sent). */
static Semvisor__Reply *settled_stats(uint64_t service, uint64_t wait)
{
	int64_t end = now_ms() + 5000;

	for (;;) {
		Semvisor__Reply *r = get_stats(true);

		if ((r->stats->service->total >= service && r->stats->wait->total >= wait) ||
		    now_ms() > end)
			return r;
		ctl_reply_free(r);
		usleep(2000);
	}
}

static Semvisor__Reply *show(const char *ns, int id)
{
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__Request req;

	sh.ns = (char *)(ns ? ns : "");
	sh.id = id;
	req_init(&req, SEMVISOR__REQUEST__BODY_SHOW_SET, &sh);
	return call(&req);
}

static Semvisor__Reply *list_sets(const char *ns)
{
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	Semvisor__Request req;

	ls.ns = (char *)(ns ? ns : "");
	req_init(&req, SEMVISOR__REQUEST__BODY_LIST_SETS, &ls);
	return call(&req);
}

static uint64_t cmd_count(const Semvisor__Stats *s, int cmd)
{
	for (size_t i = 0; i < s->n_semctl_commands; i++)
		if (s->semctl_commands[i]->cmd == cmd)
			return s->semctl_commands[i]->count;
	return 0;
}

/*
 * Run fn in a child that has become uid with group gid and supplementary groups
 * groups[ngroups]; its exit status comes back.
 */
static int as_peer(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups, int (*fn)(void *),
		   void *arg)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (setgroups(ngroups, groups) || setgid(gid) || setuid(uid))
			_exit(100);
		_exit(fn(arg));
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "the unprivileged peer died: status %#x", st);
	return WEXITSTATUS(st);
}

/* Run fn in a child that has become uid/gid NOBODY; its exit status comes back. */
static int as_nobody(int (*fn)(void *), void *arg)
{
	return as_peer(NOBODY, NOBODY, NULL, 0, fn, arg);
}

/* One request on a connection of its own, for a forked peer: NULL instead of assertions. */
static Semvisor__Reply *peer_call(const char *path, Semvisor__Request *req)
{
	Semvisor__Reply *r = NULL;
	int fd = connect_to(path);

	if (fd < 0)
		return NULL;
	if (send_req(fd, req))
		r = recv_reply(fd, 10000);
	close(fd);
	return r;
}

/* A forked peer's failure: why on stderr, code as its exit status. */
static int peer_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int peer_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "peer failure %d: ", code);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

/* ---- counters, sets, semaphores ---- */

Test(live, counters_move_by_exactly_the_calls_made)
{
	Semvisor__Reply *r;
	const Semvisor__Stats *s;
	int gst;

	live_start(NULL, NULL);
	r = get_stats(false);
	s = r->stats;
	cr_expect_eq(s->calls->semget + s->calls->semop + s->calls->semtimedop + s->calls->semctl +
			 s->calls->other,
		     0, "nothing served yet");
	cr_expect_eq(s->listeners, 1);
	ctl_reply_free(r);

	phase_a();
	r = settled_stats(9, 0);
	s = r->stats;
	cr_expect_eq(s->calls->semget, 3);
	cr_expect_eq(s->calls->semop, 2);
	cr_expect_eq(s->calls->semtimedop, 1);
	cr_expect_eq(s->calls->semctl, 3);
	cr_expect_eq(s->calls->ns_changes, 0);
	cr_expect_eq(s->calls->other, 0);
	cr_expect_eq(s->n_semctl_commands, 2, "SETVAL and GETVAL only");
	cr_expect_eq(cmd_count(s, SETVAL), 2);
	cr_expect_eq(cmd_count(s, GETVAL), 1);
	cr_assert_eq(s->n_errors, 1);
	cr_expect_eq(s->errors[0]->code, EAGAIN);
	cr_expect_str_eq(s->errors[0]->name, "EAGAIN");
	cr_expect_eq(s->errors[0]->count, 1);
	cr_expect_eq(s->parked, 0);
	cr_expect_eq(s->woken, 0);
	cr_expect_eq(s->service->total, 9, "every call answered at once is timed");
	cr_expect_eq(s->wait->total, 0);
	cr_expect_eq(s->service->n_count, NT_NBUCKET);
	cr_expect_eq(s->service->bound_ns[NT_NBUCKET - 1], UINT64_MAX);
	cr_assert_eq(s->n_namespaces, 1);
	cr_expect_eq(s->namespaces[0]->nsets, 3);
	cr_expect_eq(s->namespaces[0]->nsems, 6);
	cr_expect_eq(s->namespaces[0]->nwaiters, 0);
	cr_assert_eq(s->n_clients, 1);
	cr_expect_str_eq(s->clients[0]->name, "live-child");
	cr_expect_eq(s->clients[0]->calls, 9);
	/* the lock the build put under the engine, named by the lock layer; only amutex counts */
	cr_assert_not_null(s->lock);
#ifdef SV_LOCK_PTHREAD
	cr_expect_str_eq(s->lock->kind, "pthread_mutex");
	cr_expect_eq(s->lock->acquired + s->lock->fast + s->lock->spun + s->lock->slept +
			 s->lock->spin_ns + s->lock->threads,
		     0, "pthread_mutex keeps no counters: all of them stay 0");
#else
	cr_expect_str_eq(s->lock->kind, "amutex");
	cr_expect_gt(s->lock->acquired, 0, "the calls served took engine locks");
#endif
	ctl_reply_free(r);

	/* a call that waits, seen while it waits, then released */
	child_do(L.cmd, 'B', &(char){ 0 }, 1);
	for (int64_t end = now_ms() + 5000;;) {
		r = show(NULL, L.ids[1]);
		cr_assert_eq(r->status, SEMVISOR__STATUS__OK);
		if (r->set->sems[1]->ncnt == 1 || now_ms() > end)
			break;
		ctl_reply_free(r);
		usleep(2000);
	}
	cr_expect_eq(r->set->sems[1]->ncnt, 1, "the grandchild waits for semaphore 1");
	cr_expect_eq(r->set->sems[1]->nwaits, 1);
	ctl_reply_free(r);
	/*
	 * The engine parks the call (ncnt above) before its worker counts it as parked: wait for
	 * the count too (the debug build's random yields open that window wide).
	 */
	for (int64_t end = now_ms() + 5000;;) {
		r = get_stats(true);
		if (r->stats->parked == 1 || now_ms() > end)
			break;
		ctl_reply_free(r);
		usleep(2000);
	}
	s = r->stats;
	cr_expect_eq(s->calls->semop, 3);
	cr_expect_eq(s->parked, 1);
	cr_expect_eq(s->namespaces[0]->nwaiters, 1);
	cr_expect_eq(s->clients[0]->parked, 1);
	ctl_reply_free(r);

	child_do(L.cmd, 'C', &gst, sizeof(gst));
	cr_expect(WIFEXITED(gst) && WEXITSTATUS(gst) == 0, "the waiter's semop failed: %#x", gst);
	r = settled_stats(10, 1);
	s = r->stats;
	cr_expect_eq(s->calls->semop, 4);
	cr_expect_eq(s->calls->semget + s->calls->semtimedop + s->calls->semctl, 7);
	cr_expect_eq(s->parked, 1);
	cr_expect_eq(s->woken, 1);
	cr_expect_eq(s->timeouts + s->interrupted + s->rolled_back + s->kept, 0);
	cr_expect_eq(s->service->total, 10);
	cr_expect_eq(s->wait->total, 1);
	cr_expect_eq(s->namespaces[0]->nwaiters, 0);
	cr_expect_eq(s->clients[0]->calls, 11);
	cr_expect_eq(s->clients[0]->parked, 0);
	cr_expect_eq(s->errors[0]->count, 1, "still one EAGAIN");
	ctl_reply_free(r);
	live_stop();
}

Test(live, ipcs_lists_exactly_the_sets_created)
{
	static const struct {
		int32_t key;
		uint32_t nsems, perms;
		bool operated;
	} want[3] = { { KEY1, 3, 0640, true }, { KEY2, 2, 0600, false }, { 0, 1, 0666, false } };
	Semvisor__Reply *r, *st;
	char ns[CTL_NS_NAME_MAX + 1];

	live_start(NULL, NULL);
	phase_a();
	st = get_stats(false);
	cr_assert_eq(st->stats->n_namespaces, 1);
	snprintf(ns, sizeof(ns), "%s", st->stats->namespaces[0]->name);
	cr_expect(!strncmp(ns, "ipc:[", 5), "named after the IPC namespace: %s", ns);
	ctl_reply_free(st);

	r = list_sets(NULL);
	cr_assert_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	cr_assert_eq(r->body_case, SEMVISOR__REPLY__BODY_SETS);
	cr_assert_eq(r->sets->n_sets, 3);
	for (int i = 0; i < 3; i++) {
		const Semvisor__SetInfo *si = r->sets->sets[i];

		/* sorted by id, and the child created them in this order */
		cr_expect_eq(si->id, L.ids[i]);
		cr_expect_eq(si->key, want[i].key, "set %d key %#x", i, si->key);
		cr_expect_eq(si->nsems, want[i].nsems);
		cr_expect_eq(si->mode & 0777, want[i].perms, "set %d perms %o", i, si->mode);
		cr_expect_eq(si->uid, 0);
		cr_expect_eq(si->gid, 0);
		cr_expect_eq(si->cuid, 0);
		cr_expect_eq(si->cgid, 0);
		cr_expect_str_eq(si->ns, ns);
		cr_expect_gt(si->ctime, 0);
		if (want[i].operated)
			cr_expect_gt(si->otime, 0);
		else
			cr_expect_eq(si->otime, 0, "no semop completed on set %d", i);
	}
	ctl_reply_free(r);

	r = list_sets(ns);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	cr_expect_eq(r->sets->n_sets, 3);
	ctl_reply_free(r);
	r = list_sets("no-such-namespace");
	cr_expect_eq(r->status, SEMVISOR__STATUS__NO_SUCH_NAMESPACE);
	cr_expect(strstr(r->message, "no-such-namespace"), "%s", r->message);
	ctl_reply_free(r);
	live_stop();
}

Test(live, show_gives_the_values_the_child_set)
{
	Semvisor__Reply *r;

	live_start(NULL, "fixed");
	phase_a();
	r = show("fixed", L.ids[0]);
	cr_assert_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	cr_assert_eq(r->body_case, SEMVISOR__REPLY__BODY_SET);
	cr_expect_str_eq(r->set->set->ns, "fixed");
	cr_expect_eq(r->set->set->key, KEY1);
	cr_assert_eq(r->set->n_sems, 3);
	/* +2 on 0; SETVAL 7 on 1; SETVAL 3 then -1 on 2 */
	cr_expect_eq(r->set->sems[0]->value, 2);
	cr_expect_eq(r->set->sems[1]->value, 7);
	cr_expect_eq(r->set->sems[2]->value, 2);
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(r->set->sems[i]->num, (uint32_t)i);
		cr_expect_eq(r->set->sems[i]->pid, L.child, "sem %d pid %d", i,
			     r->set->sems[i]->pid);
		cr_expect_eq(r->set->sems[i]->ncnt, 0);
		cr_expect_eq(r->set->sems[i]->zcnt, 0);
		cr_expect_eq(r->set->sems[i]->nwaits, 0);
	}
	cr_expect_eq(r->set->sems[0]->nops, 1);
	cr_expect_eq(r->set->sems[1]->nops, 0, "SETVAL is not a semop");
	cr_expect_eq(r->set->sems[2]->nops, 1);
	ctl_reply_free(r);

	/* the failed IPC_NOWAIT operation changed nothing */
	r = show(NULL, L.ids[1]);
	cr_assert_eq(r->status, SEMVISOR__STATUS__OK);
	cr_assert_eq(r->set->n_sems, 2);
	cr_expect_eq(r->set->sems[0]->value, 0);
	cr_expect_eq(r->set->sems[0]->pid, 0);
	cr_expect_eq(r->set->sems[0]->nops, 0);
	ctl_reply_free(r);

	r = show(NULL, 12345);
	cr_expect_eq(r->status, SEMVISOR__STATUS__NO_SUCH_SET);
	ctl_reply_free(r);
	r = show("elsewhere", L.ids[0]);
	cr_expect_eq(r->status, SEMVISOR__STATUS__NO_SUCH_NAMESPACE);
	ctl_reply_free(r);
	live_stop();
}

Test(live, set_ids_in_several_namespaces_must_be_named)
{
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	int ids2[3];

	/* forked before the supervisor's threads exist, as the first (live_start()) */
	L.cmd2 = spawn_child(&L.child2);
	live_start(NULL, "first");
	adopt_child(L.cmd2, "second-child", "second");
	phase_a();
	child_do(L.cmd2, 'A', ids2, sizeof(ids2));
	cr_assert_eq(ids2[0], L.ids[0], "both namespaces start their ids alike");

	r = show(NULL, L.ids[0]);
	cr_expect_eq(r->status, SEMVISOR__STATUS__AMBIGUOUS);
	cr_expect(strstr(r->message, "first") && strstr(r->message, "second"), "%s", r->message);
	ctl_reply_free(r);
	rm.id = L.ids[0];
	req_init(&req, SEMVISOR__REQUEST__BODY_REMOVE_SET, &rm);
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__AMBIGUOUS, "rm must not guess either");
	ctl_reply_free(r);
	r = show("second", L.ids[0]);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	cr_expect_str_eq(r->set->set->ns, "second");
	ctl_reply_free(r);
	r = list_sets(NULL);
	cr_expect_eq(r->sets->n_sets, 6);
	ctl_reply_free(r);
	live_stop();
}

/* ---- privileges ---- */

struct nobody_args {
	const char *path;
	int id;
};

/* As uid NOBODY: every privileged request refused, a read-only one answered. 0 when so. */
static int nobody_requests(void *arg)
{
	const struct nobody_args *a = arg;
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__ResetRequest rs = SEMVISOR__RESET_REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req[4];
	int fd = connect_to(a->path), bad = 0;

	if (fd < 0)
		return 101;
	rm.id = a->id;
	sl.semmsl = sl.semmns = sl.semopm = sl.semmni = 1;
	req_init(&req[0], SEMVISOR__REQUEST__BODY_REMOVE_SET, &rm);
	req_init(&req[1], SEMVISOR__REQUEST__BODY_RESET, &rs);
	req_init(&req[2], SEMVISOR__REQUEST__BODY_SET_LIMITS, &sl);
	req_init(&req[3], SEMVISOR__REQUEST__BODY_STATS, &st);
	/* one connection for all: a refusal does not end it */
	for (int i = 0; i < 4; i++) {
		Semvisor__Reply *r;

		if (!send_req(fd, &req[i]))
			return 102;
		r = recv_reply(fd, 10000);
		if (!r)
			return 103;
		if (i < 3 && (r->status != SEMVISOR__STATUS__PERMISSION_DENIED ||
			      !strstr(r->message, "owner")))
			bad |= 1 << i;
		if (i == 3 && r->status != SEMVISOR__STATUS__OK)
			bad |= 1 << i;
		ctl_reply_free(r);
	}
	close(fd);
	return bad;
}

Test(live, privileged_requests_from_unprivileged_peers_are_refused)
{
	struct nobody_args a;
	Semvisor__Reply *r;

	live_start(NULL, NULL);
	phase_a();
	a = (struct nobody_args){ .path = L.path, .id = L.ids[0] };
	cr_expect_eq(as_nobody(nobody_requests, &a), 0,
		     "bit i set: request i got the wrong answer (rm, reset, limits, stats)");

	/* nothing happened */
	r = list_sets(NULL);
	cr_expect_eq(r->sets->n_sets, 3, "the set was not removed");
	ctl_reply_free(r);
	r = settled_stats(9, 0);
	cr_expect_eq(r->stats->calls->semget, 3, "the counters were not reset");
	cr_expect_neq(r->stats->namespaces[0]->limits->semmsl, 1, "the limits were not changed");
	ctl_reply_free(r);
	live_stop();
}

/* ---- what an unprivileged peer may read ---- */

struct read_args {
	const char *path;
	int ids[5];	  /* phase A's three (0640, 0600, 0666), then 'D''s (0604, OWNER's 0400) */
	uid_t uid;	  /* the peer's */
	uint32_t owner4;  /* the 0400 set's owner */
	bool readable[5]; /* what the peer's ids let it read */
};

#define NREAD 5
static const uint32_t read_perms[NREAD] = { 0640, 0600, 0666, 0604, 0400 };
static const uint32_t read_nsems[NREAD] = { 3, 2, 1, 1, 1 };
static const uint32_t read_uid[NREAD] = { 0, 0, 0, 0, OWNER };

/* As an unprivileged peer: every set listed, values only of the readable ones. 0 when so. */
static int peer_reads(void *arg)
{
	const struct read_args *a = arg;
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	int rc = 0;

	ls.ns = sh.ns = (char *)"";
	req_init(&req, SEMVISOR__REQUEST__BODY_LIST_SETS, &ls);
	r = peer_call(a->path, &req);
	if (!r || r->status != SEMVISOR__STATUS__OK || r->body_case != SEMVISOR__REPLY__BODY_SETS)
		return peer_fail(10, "ipcs: %s", r ? r->message : "no reply");
	if (r->sets->n_sets != NREAD)
		rc = peer_fail(11, "%zu sets listed, not %d", r->sets->n_sets, NREAD);
	for (int i = 0; i < NREAD && !rc; i++) {
		const Semvisor__SetInfo *si = NULL;

		for (size_t k = 0; k < r->sets->n_sets; k++)
			if (r->sets->sets[k]->id == a->ids[i])
				si = r->sets->sets[k];
		/* the metadata is anyone's, as SEM_STAT_ANY gives it */
		if (!si || (si->mode & 0777) != read_perms[i] || si->nsems != read_nsems[i] ||
		    si->uid != (i == 4 ? a->owner4 : read_uid[i]) || si->cuid != 0 ||
		    si->gid != 0 || si->ctime <= 0)
			rc = peer_fail(12, "set %d: missing or wrong metadata", a->ids[i]);
		else if (si->withheld == a->readable[i])
			rc = peer_fail(13, "set %d: withheld %d", a->ids[i], si->withheld);
		else if (si->withheld && (si->lock_spun || si->lock_slept))
			rc = peer_fail(14, "set %d: lock counters of a withheld set", a->ids[i]);
	}
	ctl_reply_free(r);
	if (rc)
		return rc;

	req_init(&req, SEMVISOR__REQUEST__BODY_SHOW_SET, &sh);
	for (int i = 0; i < NREAD; i++) {
		char who[32];

		snprintf(who, sizeof(who), "not readable by uid %u", (unsigned)a->uid);
		sh.id = a->ids[i];
		r = peer_call(a->path, &req);
		if (!r)
			return peer_fail(20, "show %d: no reply", a->ids[i]);
		if (!a->readable[i]) {
			if (r->status != SEMVISOR__STATUS__PERMISSION_DENIED ||
			    r->body_case != SEMVISOR__REPLY__BODY__NOT_SET ||
			    !strstr(r->message, who))
				rc = peer_fail(21, "show %d of an unreadable set: status %d, %s",
					       a->ids[i], r->status, r->message);
		} else if (r->status != SEMVISOR__STATUS__OK ||
			   r->body_case != SEMVISOR__REPLY__BODY_SET ||
			   r->set->n_sems != read_nsems[i]) {
			rc = peer_fail(22, "show %d of a readable set: status %d, %s", a->ids[i],
				       r->status, r->message);
		} else {
			for (size_t k = 0; k < r->set->n_sems; k++)
				if (r->set->sems[k]->value == SECRET_VAL)
					rc = peer_fail(23, "the 0600 set's value in set %d",
						       a->ids[i]);
			/* the values the child set: SETVAL 7 on 0640's sem 1, 'D''s on 0604 */
			if (i == 0 && r->set->sems[1]->value != 7)
				rc = peer_fail(24, "0640 set sem 1 = %d", r->set->sems[1]->value);
			if (i == 3 && r->set->sems[0]->value != PUBLIC_VAL)
				rc = peer_fail(25, "0604 set sem 0 = %d", r->set->sems[0]->value);
		}
		ctl_reply_free(r);
		if (rc)
			return rc;
	}
	return 0;
}

static void phase_d(struct read_args *a)
{
	*a = (struct read_args){ .path = L.path, .owner4 = OWNER };
	phase_a();
	memcpy(a->ids, L.ids, sizeof(L.ids));
	child_do(L.cmd, 'D', &a->ids[3], 2 * sizeof(a->ids[3]));
	cr_assert(a->ids[3] >= 0 && a->ids[4] >= 0, "semget failed in the child");
}

Test(live, unprivileged_peers_read_values_only_where_the_mode_lets_them)
{
	static const gid_t root_group[] = { 0 };
	struct read_args a;
	Semvisor__Reply *r;

	live_start(NULL, NULL);
	phase_d(&a);

	/* root reads every set, the 0600 one whole */
	r = show(NULL, a.ids[1]);
	cr_assert_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	cr_expect_eq(r->set->sems[0]->value, SECRET_VAL);
	ctl_reply_free(r);
	r = list_sets(NULL);
	cr_assert_eq(r->sets->n_sets, NREAD);
	for (size_t k = 0; k < NREAD; k++)
		cr_expect(!r->sets->sets[k]->withheld, "nothing is withheld from root");
	ctl_reply_free(r);

	/* nobody: the other bits, so the 0666 and 0604 sets */
	a.uid = NOBODY;
	memcpy(a.readable, (bool[NREAD]){ false, false, true, true, false }, sizeof(a.readable));
	cr_expect_eq(as_peer(NOBODY, NOBODY, NULL, 0, peer_reads, &a), 0,
		     "as nobody (see the peer's failure above)");
	/*
	 * group 0 as a supplementary group: the group bits decide, so the 0640 set is readable,
	 * and the 0604 one no longer is (as natively: the other bits are not looked at)
	 */
	memcpy(a.readable, (bool[NREAD]){ true, false, true, false, false }, sizeof(a.readable));
	cr_expect_eq(as_peer(NOBODY, NOBODY, root_group, 1, peer_reads, &a), 0,
		     "as nobody with supplementary group 0");
	/* ... and as the effective gid */
	cr_expect_eq(as_peer(NOBODY, 0, NULL, 0, peer_reads, &a), 0, "as nobody with gid 0");
	/* the owner of the 0400 set reads it by its owner bits; the others as nobody does */
	a.uid = OWNER;
	memcpy(a.readable, (bool[NREAD]){ false, false, true, true, true }, sizeof(a.readable));
	cr_expect_eq(as_peer(OWNER, OWNER, NULL, 0, peer_reads, &a), 0, "as the 0400 set's owner");
	/* nobody is a user like any other: it reads a set it owns */
	child_do(L.cmd, 'E', &(char){ 0 }, 1);
	a.uid = NOBODY;
	a.owner4 = NOBODY;
	cr_expect_eq(as_peer(NOBODY, NOBODY, NULL, 0, peer_reads, &a), 0,
		     "as nobody, the 0400 set's owner now");
	live_stop();
}

static int nobody_connects(void *arg)
{
	int fd = connect_to(arg);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EACCES ? 13 : 1;
}

Test(live, the_socket_gets_its_mode_and_group)
{
	struct ctl_opts o = CTL_OPTS_INIT;
	struct stat sb;

	o.group = NOBODY;
	live_start(&o, NULL);
	cr_assert_eq(lstat(L.path, &sb), 0);
	cr_expect(S_ISSOCK(sb.st_mode));
	cr_expect_eq(sb.st_mode & 07777, CTL_DEFAULT_MODE, "mode %o", sb.st_mode & 07777);
	cr_expect_eq(sb.st_uid, 0);
	cr_expect_eq(sb.st_gid, NOBODY);
	/* group nobody may connect... */
	cr_expect_eq(as_nobody(nobody_connects, L.path), 0);
	live_stop();

	/* ...but with mode 0600 only the owner */
	o = (struct ctl_opts)CTL_OPTS_INIT;
	o.mode = 0600;
	live_start(&o, NULL);
	cr_assert_eq(lstat(L.path, &sb), 0);
	cr_expect_eq(sb.st_mode & 07777, 0600);
	cr_expect_eq(as_nobody(nobody_connects, L.path), 13, "EACCES for others");
	live_stop();
}

Test(live, administration_by_root)
{
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__ResetRequest rs = SEMVISOR__RESET_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	char ns[CTL_NS_NAME_MAX + 1];

	live_start(NULL, NULL);
	phase_a();
	r = settled_stats(9, 0);
	snprintf(ns, sizeof(ns), "%s", r->stats->namespaces[0]->name);
	ctl_reply_free(r);

	rm.id = L.ids[2];
	req_init(&req, SEMVISOR__REQUEST__BODY_REMOVE_SET, &rm);
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	ctl_reply_free(r);
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__NO_SUCH_SET, "gone the first time");
	ctl_reply_free(r);
	r = list_sets(NULL);
	cr_expect_eq(r->sets->n_sets, 2);
	ctl_reply_free(r);

	sl.ns = ns;
	sl.semmsl = 100, sl.semmns = 200, sl.semopm = 10, sl.semmni = 50;
	req_init(&req, SEMVISOR__REQUEST__BODY_SET_LIMITS, &sl);
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK, "%s", r->message);
	cr_assert_eq(r->body_case, SEMVISOR__REPLY__BODY_LIMITS);
	cr_expect(r->limits->semmsl == 100 && r->limits->semmns == 200 && r->limits->semopm == 10 &&
		  r->limits->semmni == 50);
	ctl_reply_free(r);
	sl.ns = (char *)"nowhere";
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__NO_SUCH_NAMESPACE);
	ctl_reply_free(r);
	sl.ns = ns;
	sl.semmni = 40000;
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE);
	ctl_reply_free(r);

	r = get_stats(false);
	cr_expect_eq(r->stats->namespaces[0]->limits->semmsl, 100, "refusals left the limits");
	cr_expect_eq(r->stats->namespaces[0]->limits->semmni, 50);
	ctl_reply_free(r);

	req_init(&req, SEMVISOR__REQUEST__BODY_RESET, &rs);
	r = call(&req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	ctl_reply_free(r);
	r = get_stats(true);
	cr_expect_eq(r->stats->calls->semget + r->stats->calls->semop +
			 r->stats->calls->semtimedop + r->stats->calls->semctl,
		     0);
	cr_expect_eq(r->stats->n_semctl_commands, 0);
	cr_expect_eq(r->stats->n_errors, 0);
	cr_expect_eq(r->stats->service->total, 0);
	cr_expect_lt(r->stats->since_reset_ms, 5000);
	cr_expect_eq(r->stats->namespaces[0]->nsets, 2, "a reset keeps the sets");
	ctl_reply_free(r);
	r = show(NULL, L.ids[0]);
	cr_expect_eq(r->set->sems[0]->nops, 0, "per-semaphore counters are zeroed");
	cr_expect_eq(r->set->sems[0]->value, 2, "values are not");
	ctl_reply_free(r);
	live_stop();
}

/* ---- protocol errors ---- */

Test(live, unknown_versions_get_a_clear_error_and_the_connection_stays)
{
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	int fd;

	live_start(NULL, NULL);
	fd = connect_to(L.path);
	cr_assert_geq(fd, 0);
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	req.version = 7;
	req.id = 1234;
	cr_assert(send_req(fd, &req));
	r = recv_reply(fd, 5000);
	cr_assert_not_null(r);
	cr_expect_eq(r->status, SEMVISOR__STATUS__VERSION_UNSUPPORTED);
	cr_expect_eq(r->version, CTL_PROTO_VERSION, "the reply says which version the server has");
	cr_expect_eq(r->id, 1234);
	cr_expect(strstr(r->message, "7") && strstr(r->message, "version 1"), "%s", r->message);
	cr_expect_eq(r->body_case, SEMVISOR__REPLY__BODY__NOT_SET);
	ctl_reply_free(r);

	req.version = 0;
	cr_assert(send_req(fd, &req));
	r = recv_reply(fd, 5000);
	cr_assert_not_null(r);
	cr_expect_eq(r->status, SEMVISOR__STATUS__VERSION_UNSUPPORTED);
	ctl_reply_free(r);

	req.version = CTL_PROTO_VERSION;
	cr_assert(send_req(fd, &req));
	r = recv_reply(fd, 5000);
	cr_assert_not_null(r, "the connection still works");
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	ctl_reply_free(r);
	close(fd);
	live_stop();
}

/* After an error reply the server hangs up: the next read is EOF. */
static void expect_error_then_eof(int fd, int status)
{
	Semvisor__Reply *r = recv_reply(fd, 5000);
	char c;

	cr_assert_not_null(r, "an error reply comes first");
	cr_expect_eq((int)r->status, (int)status, "status %d (%s)", r->status, r->message);
	cr_expect_eq(r->id, 0);
	ctl_reply_free(r);
	cr_expect_eq(read(fd, &c, 1), 0, "then the connection is closed");
}

Test(live, malformed_and_oversized_frames)
{
	static const uint8_t garbage[] = { 0, 0, 0, 4, 0x0f, 0xff, 0xff, 0xff };
	static const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff };
	Semvisor__Reply *r;
	int fd;

	live_start(NULL, NULL);
	fd = connect_to(L.path);
	cr_assert(send_all(fd, garbage, sizeof(garbage)));
	expect_error_then_eof(fd, SEMVISOR__STATUS__MALFORMED);
	close(fd);

	/* the length alone is enough to refuse: the payload is never waited for */
	fd = connect_to(L.path);
	cr_assert(send_all(fd, huge, sizeof(huge)));
	expect_error_then_eof(fd, SEMVISOR__STATUS__FRAME_TOO_LARGE);
	close(fd);

	r = get_stats(false);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK, "the server is fine");
	ctl_reply_free(r);
	live_stop();
}

Test(live, a_stuck_or_greedy_client_does_not_stall_the_others)
{
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	uint8_t frame[256], *many;
	int half, greedy, watcher;
	size_t n, total = 0;
	int64_t t0;

	live_start(NULL, NULL);
	phase_a();
	/* half a frame, then silence */
	half = connect_to(L.path);
	cr_assert(send_all(half, "\0\0", 2));
	/* a watcher that never reads */
	watcher = connect_to(L.path);
	w.interval_ms = CTL_WATCH_MIN_MS;
	req_init(&req, SEMVISOR__REQUEST__BODY_WATCH, &w);
	cr_assert(send_req(watcher, &req));
	/* 2000 requests in one go, replies never read */
	greedy = connect_to(L.path);
	cr_assert_eq(fcntl(greedy, F_SETFL, O_NONBLOCK), 0);
	st.with_clients = true;
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	n = ctl_frame_pack(&req.base, frame);
	many = malloc(n * 2000);
	for (int i = 0; i < 2000; i++)
		memcpy(many + n * (size_t)i, frame, n);
	while (total < n * 2000) {
		ssize_t k = send(greedy, many + total, n * 2000 - total, MSG_NOSIGNAL);

		if (k <= 0)
			break; /* the server stopped reading: that is the point */
		total += (size_t)k;
	}
	free(many);

	for (int i = 0; i < 20; i++) {
		t0 = now_ms();
		r = get_stats(false);
		cr_expect_lt(now_ms() - t0, 1000, "a stats call took %lld ms",
			     (long long)(now_ms() - t0));
		ctl_reply_free(r);
		usleep(20000);
	}
	close(half);
	close(watcher);
	close(greedy);
	live_stop();
}

Test(live, a_reader_that_lets_its_buffer_fill_is_dropped)
{
	struct ctl_opts o = CTL_OPTS_INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	uint8_t frame[256];
	size_t n, got = 0;
	int fd;
	char buf[65536];
	ssize_t k;

	o.mode = 0666;
	o.max_output = 16 * 1024;
	live_start(&o, NULL);
	/* more replies than the kernel's socket buffer takes: then the server's buffer fills */
	fd = connect_to(L.path);
	st.with_clients = true;
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	n = ctl_frame_pack(&req.base, frame);
	for (int i = 0; i < 600; i++)
		if (!send_all(fd, frame, n))
			break;
	/* give it time to answer what it read; then read everything: it must end in EOF */
	usleep(300000);
	for (int64_t end = now_ms() + 10000; now_ms() < end;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, 1000) != 1)
			break;
		k = read(fd, buf, sizeof(buf));
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	k = read(fd, buf, 1);
	cr_expect(k == 0 || (k < 0 && errno == ECONNRESET), "dropped: EOF after %zu bytes", got);
	cr_expect_lt(got, (size_t)600 * 1500, "not every reply was queued");
	close(fd);
	r = get_stats(false);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	ctl_reply_free(r);
	live_stop();
}

Test(live, watch_streams_snapshots_until_told_otherwise)
{
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	uint64_t last = 0;
	int fd;

	live_start(NULL, NULL);
	fd = connect_to(L.path);
	w.interval_ms = 100;
	w.count = 3;
	req_init(&req, SEMVISOR__REQUEST__BODY_WATCH, &w);
	req.id = 900;
	cr_assert(send_req(fd, &req));
	for (int i = 0; i < 3; i++) {
		r = recv_reply(fd, 2000);
		cr_assert_not_null(r, "snapshot %d", i);
		cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
		cr_expect_eq(r->id, 900);
		cr_assert_eq(r->body_case, SEMVISOR__REPLY__BODY_STATS);
		cr_expect_gt(r->stats->mono_ns, last);
		if (last)
			cr_expect_geq(r->stats->mono_ns - last, 80000000ull, "about 100 ms apart");
		last = r->stats->mono_ns;
		ctl_reply_free(r);
	}
	cr_expect_null(recv_reply(fd, 400), "count 3 means three");

	/* without a count it goes on, until another request */
	w.count = 0;
	req.id = 901;
	cr_assert(send_req(fd, &req));
	for (int i = 0; i < 2; i++) {
		r = recv_reply(fd, 2000);
		cr_assert_not_null(r);
		cr_expect_eq(r->id, 901);
		ctl_reply_free(r);
	}
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	req.id = 902;
	cr_assert(send_req(fd, &req));
	for (;;) {
		r = recv_reply(fd, 2000);
		cr_assert_not_null(r);
		if (r->id == 902)
			break;
		cr_expect_eq(r->id, 901, "a snapshot sent before the request arrived");
		ctl_reply_free(r);
	}
	ctl_reply_free(r);
	cr_expect_null(recv_reply(fd, 400), "the watch ended with the new request");
	close(fd);
	live_stop();
}

/* ---- connections ---- */

struct conn_args {
	const char *path;
	int n;
};

/* As NOBODY: open n connections; 0 if the first n-1 are served and the last gets BUSY. */
static int nobody_opens(void *arg)
{
	const struct conn_args *a = arg;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	int fd[16];

	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	for (int i = 0; i < a->n; i++) {
		Semvisor__Reply *r;

		fd[i] = connect_to(a->path);
		if (fd[i] < 0)
			return 110;
		if (i == a->n - 1) {
			r = recv_reply(fd[i], 5000);
			if (!r || r->status != SEMVISOR__STATUS__BUSY)
				return 111;
			ctl_reply_free(r);
			continue;
		}
		if (!send_req(fd[i], &req))
			return 112;
		r = recv_reply(fd[i], 5000);
		if (!r || r->status != SEMVISOR__STATUS__OK)
			return 113;
		ctl_reply_free(r);
	}
	return 0;
}

Test(live, connection_limits_per_uid_and_in_all)
{
	struct ctl_opts o = CTL_OPTS_INIT;
	struct conn_args a;
	Semvisor__Reply *r;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	int fd[3 + CTL_ADMIN_RESERVE + 1], total = 3 + CTL_ADMIN_RESERVE;

	o.mode = 0666;
	o.max_conns = 3;
	o.max_conns_per_uid = 2;
	live_start(&o, NULL);
	a = (struct conn_args){ .path = L.path, .n = 3 };
	cr_expect_eq(as_nobody(nobody_opens, &a), 0, "two connections for uid nobody, not three");

	/*
	 * Root is not held to the per-uid cap, and has CTL_ADMIN_RESERVE more in all. Each
	 * connection is shown to be served; until nobody's have been reaped, some may not be.
	 */
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	for (int attempt = 0;; attempt++) {
		int served = 0;

		for (int i = 0; i < total; i++) {
			fd[i] = connect_to(L.path);
			cr_assert_geq(fd[i], 0);
			r = send_req(fd[i], &req) ? recv_reply(fd[i], 5000) : NULL;
			served += r && r->status == SEMVISOR__STATUS__OK;
			ctl_reply_free(r);
		}
		if (served == total)
			break;
		for (int i = 0; i < total; i++)
			close(fd[i]);
		cr_assert_lt(attempt, 100, "only %d of %d connections served", served, total);
		usleep(20000);
	}
	fd[total] = connect_to(L.path);
	r = recv_reply(fd[total], 5000);
	cr_assert_not_null(r);
	cr_expect_eq(r->status, SEMVISOR__STATUS__BUSY);
	ctl_reply_free(r);
	/* the others still work */
	cr_assert(send_req(fd[total - 1], &req));
	r = recv_reply(fd[total - 1], 5000);
	cr_assert_not_null(r);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	ctl_reply_free(r);
	for (int i = 0; i <= o.max_conns + CTL_ADMIN_RESERVE; i++)
		close(fd[i]);
	live_stop();
}

/* ---- idle connections ---- */

#define IDLE_MS 500 /* the idle limit of these tests: long against a busy machine's delays */

/* Ms from t0 until the server hangs up on fd; -1 if it does not within timeout_ms. */
static int64_t hung_up_after(int fd, int64_t t0, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, timeout_ms) != 1 || recv(fd, &c, 1, MSG_DONTWAIT) != 0)
		return -1;
	return now_ms() - t0;
}

/* A Stats request on fd answered OK? */
static bool served(int fd)
{
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	bool ok;

	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	r = send_req(fd, &req) ? recv_reply(fd, 5000) : NULL;
	ok = r && r->status == SEMVISOR__STATUS__OK;
	ctl_reply_free(r);
	return ok;
}

/* A connection refused BUSY at once? */
static bool refused_busy(const char *path)
{
	int fd = connect_to(path);
	Semvisor__Reply *r = fd >= 0 ? recv_reply(fd, 5000) : NULL;
	bool busy = r && r->status == SEMVISOR__STATUS__BUSY;

	ctl_reply_free(r);
	if (fd >= 0)
		close(fd);
	return busy;
}

/*
 * As NOBODY, allowed 2 connections: two silent ones hold both slots, are closed after the idle
 * limit (not before), and the slots serve new connections; a busy connection stays open
 * however long it lasts, and is closed once it falls silent. 0 when so.
 */
static int nobody_idles(void *arg)
{
	const char *path = arg;
	int64_t t0 = now_ms(), t, after;
	int fd[2], busy, quiet;

	for (int i = 0; i < 2; i++)
		if ((fd[i] = connect_to(path)) < 0)
			return peer_fail(30, "connect: %s", strerror(errno));
	if (!refused_busy(path))
		return peer_fail(31, "a third connection was not refused: the slots are not held");
	for (int i = 0; i < 2; i++) {
		after = hung_up_after(fd[i], t0, IDLE_MS + 5000);
		if (after < 0)
			return peer_fail(32, "silent connection %d still open after %d ms", i,
					 IDLE_MS + 5000);
		if (after < IDLE_MS - 20)
			return peer_fail(33, "closed after %lld ms, before the idle limit",
					 (long long)after);
		close(fd[i]);
	}
	/* the slots are free again, and the bound still holds */
	busy = connect_to(path);
	quiet = connect_to(path);
	if (busy < 0 || quiet < 0 || !served(busy) || !served(quiet))
		return peer_fail(34, "the freed slots were not served");
	if (!refused_busy(path))
		return peer_fail(35, "the per-uid bound is gone");
	/* requests every IDLE_MS/5 for 3 idle limits: never idle, never closed */
	t = now_ms();
	for (int64_t end = t + 3 * IDLE_MS; now_ms() < end;) {
		usleep(IDLE_MS / 5 * 1000);
		if (!served(busy))
			return peer_fail(36, "a busy connection closed after %lld ms",
					 (long long)(now_ms() - t));
	}
	/* meanwhile the one served once and silent since was closed, and then the busy one */
	if (hung_up_after(quiet, t, 0) < 0)
		return peer_fail(37, "a connection silent after its reply is still open");
	t = now_ms();
	after = hung_up_after(busy, t, IDLE_MS + 5000);
	if (after < 0 || after < IDLE_MS - 20)
		return peer_fail(38, "the busy connection, now silent: closed after %lld ms",
				 (long long)after);
	close(busy);
	close(quiet);
	return 0;
}

Test(live, a_silent_connection_is_closed_and_frees_its_slot)
{
	struct ctl_opts o = CTL_OPTS_INIT;

	o.mode = 0666;
	o.max_conns_per_uid = 2;
	o.idle_ms = IDLE_MS;
	live_start(&o, NULL);
	cr_expect_eq(as_nobody(nobody_idles, L.path), 0, "see the peer's failure above");
	live_stop();
}

Test(live, a_watch_outlives_the_idle_limit)
{
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	struct ctl_opts o = CTL_OPTS_INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	int64_t t0, after;
	int fd;

	o.mode = 0666;
	o.idle_ms = 300;
	live_start(&o, NULL);
	fd = connect_to(L.path);
	cr_assert_geq(fd, 0);
	/* snapshots further apart than the idle limit: the connection waits for each */
	w.interval_ms = 1000;
	req_init(&req, SEMVISOR__REQUEST__BODY_WATCH, &w);
	req.id = 910;
	t0 = now_ms();
	cr_assert(send_req(fd, &req));
	for (int i = 0; i < 3; i++) {
		r = recv_reply(fd, 3000);
		cr_assert_not_null(r, "snapshot %d: the watch was closed after %lld ms", i,
				   (long long)(now_ms() - t0));
		cr_expect_eq(r->id, 910);
		ctl_reply_free(r);
	}
	cr_expect_geq(now_ms() - t0, 1900, "three snapshots take two intervals");
	/* another request ends the watch: then the connection is idle like any other */
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	req.id = 911;
	cr_assert(send_req(fd, &req));
	do {
		r = recv_reply(fd, 3000);
		cr_assert_not_null(r);
		after = (int64_t)r->id;
		ctl_reply_free(r);
	} while (after != 911);
	t0 = now_ms();
	after = hung_up_after(fd, t0, 5000);
	cr_expect_geq(after, 250, "closed %lld ms after the watch ended", (long long)after);
	close(fd);
	live_stop();
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* A client in a process of its own (its own fd table): the status of the first reply, or -1. */
static int remote_status(const char *path)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		Semvisor__StatsRequest sr = SEMVISOR__STATS_REQUEST__INIT;
		Semvisor__Request req;
		Semvisor__Reply *r;
		int fd;

		closefrom(3);
		fd = connect_to(path);
		if (fd < 0)
			_exit(200);
		req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &sr);
		send_req(fd, &req); /* may fail: the server may have hung up already */
		r = recv_reply(fd, 5000);
		_exit(r ? (int)r->status : 201);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(live, out_of_file_descriptors_refuses_without_spinning)
{
	struct rlimit rl, old;
	int fds[4096], n = 0;
	double cpu;

	live_start(NULL, NULL);
	getrlimit(RLIMIT_NOFILE, &old);
	rl = old;
	rl.rlim_cur = 256;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	while (n < 4096) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			break;
		fds[n++] = fd;
	}
	cr_assert_eq(errno, EMFILE);

	cr_expect_eq(remote_status(L.path), SEMVISOR__STATUS__BUSY,
		     "the reserve fd takes the connection and says why");
	/* nothing is left queued: the server must idle, not spin on accept() */
	cpu = cpu_seconds();
	usleep(500000);
	cr_expect_lt(cpu_seconds() - cpu, 0.1, "%.3f s of CPU in 0.5 s idle", cpu_seconds() - cpu);
	cr_expect_eq(remote_status(L.path), SEMVISOR__STATUS__BUSY, "and again");

	while (n)
		close(fds[--n]);
	setrlimit(RLIMIT_NOFILE, &old);
	cr_expect_eq(remote_status(L.path), SEMVISOR__STATUS__OK, "served again with fds to spare");
	live_stop();
}

/* ---- the socket file ---- */

Test(live, one_instance_per_path_and_stale_sockets_replaced)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_opts o = CTL_OPTS_INIT;
	struct ctl_server *second;
	Semvisor__Reply *r;
	char err[256], other[160], content[8] = { 0 };
	struct stat sb;
	int fd;

	live_start(NULL, NULL);
	o.path = L.path;
	second = ctl_server_start(L.s, &o, err, sizeof(err));
	cr_expect_null(second, "a second server on the same path");
	cr_expect(strstr(err, "already listening"), "%s", err);
	r = get_stats(false);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK, "the first one still serves");
	ctl_reply_free(r);

	/* a socket file nobody listens on is stale: replaced */
	snprintf(other, sizeof(other), "%s/stale.sock", L.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", other);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	o.path = other;
	second = ctl_server_start(L.s, &o, err, sizeof(err));
	cr_expect_not_null(second, "%s", err);
	{
		Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
		Semvisor__Request req;

		req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
		r = call_at(other, &req);
		cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
		ctl_reply_free(r);
	}
	ctl_server_stop(second);
	cr_expect_neq(lstat(other, &sb), 0, "stop removes the socket it made");

	/* anything else at the path is left alone */
	fd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_eq(write(fd, "keep", 4), 4);
	close(fd);
	second = ctl_server_start(L.s, &o, err, sizeof(err));
	cr_expect_null(second);
	cr_expect(strstr(err, "not a socket"), "%s", err);
	fd = open(other, O_RDONLY);
	cr_expect_eq(read(fd, content, 4), 4);
	cr_expect_str_eq(content, "keep");
	close(fd);
	unlink(other);
	live_stop();
}

Test(live, an_inherited_listening_socket_is_served_and_left_in_place)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_opts o = CTL_OPTS_INIT;
	struct ctl_server *srv;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__Request req;
	Semvisor__Reply *r;
	char err[256], path[160];
	struct stat sb;
	int fd, p[2];

	live_start(NULL, NULL);
	snprintf(path, sizeof(path), "%s/activated.sock", L.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 8), 0);
	o.listen_fd = fd;
	o.path = NULL;
	srv = ctl_server_start(L.s, &o, err, sizeof(err));
	cr_assert_not_null(srv, "%s", err);
	req_init(&req, SEMVISOR__REQUEST__BODY_STATS, &st);
	r = call_at(path, &req);
	cr_expect_eq(r->status, SEMVISOR__STATUS__OK);
	ctl_reply_free(r);
	ctl_server_stop(srv);
	cr_expect_eq(lstat(path, &sb), 0, "systemd's socket file is systemd's");
	unlink(path);

	/* a pipe is no listening socket */
	cr_assert_eq(pipe(p), 0);
	o.listen_fd = p[0];
	cr_expect_null(ctl_server_start(L.s, &o, err, sizeof(err)));
	cr_expect(strstr(err, "not a listening"), "%s", err);
	close(p[1]);
	live_stop();
}

/* ---- the real client ---- */

struct cli {
	int status;
	char out[1 << 18];
	char err[8192];
	size_t out_len, err_len;
};

static struct cli C;

static const char *bindir(void)
{
	const char *o = getenv("O");

	return o && *o ? o : "build";
}

/*
 * Run semvisorctl (or, when argv[0] contains a '/', that program) with argv, as root or (uid
 * NOBODY) as nobody, stdin from in (may be NULL); output into C.
 */
static void run_prog(bool nobody, const char *in, const char *const *argv)
{
	char prog[256];
	int op[2], ep[2], ip[2];
	pid_t pid;
	int64_t end = now_ms() + 20000;

	memset(&C, 0, sizeof(C));
	if (strchr(argv[0], '/'))
		snprintf(prog, sizeof(prog), "%s", argv[0]);
	else
		snprintf(prog, sizeof(prog), "%s/%s", bindir(), argv[0]);
	cr_assert_eq(pipe2(op, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(ep, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(ip, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (nobody && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
			_exit(120);
		dup2(ip[0], 0);
		dup2(op[1], 1);
		dup2(ep[1], 2);
		unsetenv("SEMVISOR_CONTROL");
		execv(prog, (char *const *)argv);
		dprintf(2, "exec %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(op[1]);
	close(ep[1]);
	close(ip[0]);
	if (in)
		cr_assert_eq(write(ip[1], in, strlen(in)), (ssize_t)strlen(in));
	close(ip[1]);
	for (int open_fds = 2; open_fds && now_ms() < end;) {
		struct pollfd pfd[2] = { { .fd = op[0], .events = POLLIN },
					 { .fd = ep[0], .events = POLLIN } };

		if (poll(pfd, 2, 1000) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			char *buf = i ? C.err : C.out;
			size_t *len = i ? &C.err_len : &C.out_len;
			size_t cap = (i ? sizeof(C.err) : sizeof(C.out)) - 1;
			ssize_t k;

			if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP)))
				continue;
			k = read(pfd[i].fd, buf + *len, cap - *len);
			if (k > 0) {
				*len += (size_t)k;
			} else {
				close(pfd[i].fd);
				if (i)
					ep[0] = -1;
				else
					op[0] = -1;
				open_fds--;
			}
			pfd[i].fd = i ? ep[0] : op[0];
		}
		if (op[0] < 0 && ep[0] < 0)
			break;
	}
	if (op[0] >= 0)
		close(op[0]);
	if (ep[0] >= 0)
		close(ep[0]);
	cr_assert_eq(waitpid(pid, &C.status, 0), pid);
	cr_assert(WIFEXITED(C.status), "%s died: %#x", argv[0], C.status);
	C.status = WEXITSTATUS(C.status);
}

/* semvisorctl --socket PATH ARGS... */
static void ctl(int nobody, ...)
{
	const char *argv[16] = { "semvisorctl", "--socket", L.path };
	int n = 3;
	va_list ap;

	va_start(ap, nobody);
	while (n < 15 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	run_prog(nobody, NULL, argv);
}

/* Is text valid JSON (one document, or one per line when lines)? Asks python3. */
static bool json_ok(const char *text, bool lines)
{
	const char *argv[] = { "/usr/bin/env", "python3", "-c",
			       lines ? "import json,sys\n"
				       "n=0\n"
				       "for l in sys.stdin:\n"
				       "    json.loads(l); n+=1\n"
				       "sys.exit(0 if n else 3)\n"
				     : "import json,sys; json.load(sys.stdin)",
			       NULL };
	static struct cli saved; /* run_prog() reuses C, where text usually is */
	bool ok;

	saved = C;
	run_prog(false, text == C.out ? saved.out : text, argv);
	if (C.status)
		cr_log_error("python3: %s", C.err);
	ok = C.status == 0;
	C = saved;
	return ok;
}

Test(live, cli_json_output_parses)
{
	char id[16];

	live_start(NULL, NULL);
	phase_a();
	snprintf(id, sizeof(id), "%d", L.ids[0]);

	ctl(false, "stats", "--json", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, false), "stats --json: %s", C.out);
	cr_expect(strstr(C.out, "\"semget\":3"), "%s", C.out);

	ctl(false, "--json", "ipcs", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, false), "ipcs --json: %s", C.out);
	cr_expect(strstr(C.out, "\"key_hex\":\"0x005e1001\"") &&
		      strstr(C.out, "\"key_hex\":\"0x005e1002\"") &&
		      strstr(C.out, "\"perms\":\"640\""),
		  "%s", C.out);

	ctl(false, "show", id, "--json", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, false), "show --json: %s", C.out);
	cr_expect(strstr(C.out, "\"value\":7"), "%s", C.out);

	ctl(false, "clients", "--json", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, false), "clients --json: %s", C.out);
	cr_expect(strstr(C.out, "\"name\":\"live-child\""), "%s", C.out);

	ctl(false, "top", "--json", "--count", "3", "--interval", "0.1", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, true), "top --json: %s", C.out);
	{
		int lines = 0;

		for (const char *p = C.out; (p = strchr(p, '\n')); p++)
			lines++;
		cr_expect_eq(lines, 3, "one object per snapshot");
	}

	ctl(false, "limits", "100,200,10,50", "--json", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(json_ok(C.out, false), "limits --json: %s", C.out);
	live_stop();
}

Test(live, cli_text_output)
{
	char id[16];

	live_start(NULL, NULL);
	phase_a();
	snprintf(id, sizeof(id), "%d", L.ids[0]);
	ctl(false, "ipcs", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(strstr(C.out, "KEY") && strstr(C.out, "SEMID") && strstr(C.out, "NSEMS"), "%s",
		  C.out);
	cr_expect(strstr(C.out, "0x005e1001") && strstr(C.out, "0x005e1002") &&
		      strstr(C.out, "0x00000000"),
		  "%s", C.out);
	ctl(false, "stats", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(strstr(C.out, "semget 3") && strstr(C.out, "EAGAIN 1"), "%s", C.out);
	ctl(false, "show", id, NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(strstr(C.out, "0x005e1001") && strstr(C.out, "SEMNUM"), "%s", C.out);
	ctl(false, "top", "--count", "2", "--interval", "0.1", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(strstr(C.out, "live-child") && !strchr(C.out, '\033'),
		  "no escape sequences off a terminal: %s", C.out);
	cr_expect(strstr(C.out, "service time") && strstr(C.out, "namespace changes") &&
		      strstr(C.out, " added, "),
		  "top does not use stats' words: %s", C.out);
	/* On a terminal 40 columns wide (script(1) makes one), no line of top is wider. */
	if (system("script --version >/dev/null 2>&1") == 0) {
		char cmd[1024];
		const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
		int lines = 0;

		snprintf(cmd, sizeof(cmd),
			 "script -qec 'stty cols 40 rows 60; %s/semvisorctl --socket %s top "
			 "--count 1' /dev/null",
			 bindir(), L.path);
		run_prog(false, NULL, argv);
		cr_expect_eq(C.status, 0, "%s%s", C.out, C.err);
		for (char *l = C.out, *e; *l; l = e + (*e ? 1 : 0)) {
			size_t n;

			e = l + strcspn(l, "\n");
			n = (size_t)(e - l);
			if (n && l[n - 1] == '\r')
				n--; /* the terminal's newline */
			if (!strncmp(l, "\033[H\033[2J", 7)) {
				l += 7;
				n -= 7;
			}
			cr_expect_leq(n, 40, "a line of %zu columns on a 40-column terminal: %.*s",
				      n, (int)n, l);
			lines++;
		}
		cr_expect_geq(lines, 10, "top on a terminal printed:\n%s", C.out);
	}
	live_stop();
}

/* ---- a Prometheus text format (0.0.4) checker ---- */

struct family {
	char name[128], type[16];
	bool help, ended;
};

struct series {
	char key[512];
};

static bool metric_name(const char **p, char *out, size_t cap)
{
	size_t n = 0;
	const char *s = *p;

	if (!(*s == '_' || *s == ':' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return false;
	while (*s == '_' || *s == ':' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	       (*s >= '0' && *s <= '9')) {
		if (n + 1 < cap)
			out[n++] = *s;
		s++;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static bool checker_quiet; /* the checker's own test expects complaints: no noise in the log */

static int complain(int lineno, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int complain(int lineno, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	if (checker_quiet)
		return 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cr_log_error("line %d: %s", lineno, msg);
	return 1;
}

/* Checks one exposition; complaints go to the test log; returns their number. */
static int check_prometheus(const char *text)
{
	static struct family fam[256];
	static struct series ser[4096];
	int nfam = 0, nser = 0, bad = 0, cur = -1, lineno = 1;
	/* per histogram series (labels without le): the last le and count */
	char hkey[512] = "";
	double last_le = -1, last_count = -1;
	bool saw_inf = false;
	double inf_count = -1;

#define BAD(...) bad += complain(lineno, __VA_ARGS__)

	memset(fam, 0, sizeof(fam));
	if (!*text || text[strlen(text) - 1] != '\n')
		BAD("the exposition must end with a newline");
	for (const char *line = text; *line; lineno++) {
		const char *end = strchr(line, '\n');
		char l[1024], name[128], labels[512] = "", le[256] = "";
		const char *p;
		size_t len = end ? (size_t)(end - line) : strlen(line);
		int f = -1;

		snprintf(l, sizeof(l), "%.*s", (int)len, line);
		line += len + (end ? 1 : 0);
		if (!*l)
			continue;
		if (l[0] == '#') {
			char kw[8], nm[128], rest[256];
			int k;

			if (sscanf(l, "# %7s %127s %255[^\n]", kw, nm, rest) < 2 ||
			    (strcmp(kw, "HELP") && strcmp(kw, "TYPE")))
				continue; /* a plain comment */
			p = nm;
			if (!metric_name(&p, name, sizeof(name)) || *p)
				BAD("bad metric name '%s'", nm);
			for (k = 0; k < nfam && strcmp(fam[k].name, nm); k++)
				;
			if (k == nfam) {
				cr_assert_lt(nfam, 256);
				snprintf(fam[nfam].name, sizeof(fam[nfam].name), "%s", nm);
				nfam++;
			}
			if (!strcmp(kw, "HELP")) {
				if (fam[k].help)
					BAD("second HELP for %s", nm);
				fam[k].help = true;
			} else {
				if (fam[k].type[0])
					BAD("second TYPE for %s", nm);
				if (strcmp(rest, "counter") && strcmp(rest, "gauge") &&
				    strcmp(rest, "histogram") && strcmp(rest, "summary") &&
				    strcmp(rest, "untyped"))
					BAD("unknown type '%s'", rest);
				snprintf(fam[k].type, sizeof(fam[k].type), "%.15s", rest);
			}
			if (fam[k].ended)
				BAD("%s comes back after other families", nm);
			continue;
		}

		/* a sample: name{labels} value [timestamp] */
		p = l;
		if (!metric_name(&p, name, sizeof(name))) {
			BAD("bad sample '%s'", l);
			continue;
		}
		if (*p == '{') {
			size_t o = 0;

			p++;
			while (*p && *p != '}') {
				char ln[64], lv[256];
				size_t v = 0;

				if (!metric_name(&p, ln, sizeof(ln)) || strchr(ln, ':') ||
				    *p != '=' || p[1] != '"') {
					BAD("bad label in '%s'", l);
					break;
				}
				p += 2;
				while (*p && *p != '"') {
					if (*p == '\\') {
						if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
							BAD("bad escape in '%s'", l);
						if (v + 1 < sizeof(lv))
							lv[v++] = *p++;
					}
					if (v + 1 < sizeof(lv))
						lv[v++] = *p;
					if (*p)
						p++;
				}
				lv[v] = '\0';
				if (*p != '"') {
					BAD("unterminated label value in '%s'", l);
					break;
				}
				p++;
				if (!strcmp(ln, "le"))
					snprintf(le, sizeof(le), "%s", lv);
				else
					o += (size_t)snprintf(labels + o, sizeof(labels) - o,
							      "%s=%s,", ln, lv);
				if (*p == ',')
					p++;
			}
			if (*p != '}')
				BAD("labels not closed in '%s'", l);
			else
				p++;
		}
		if (*p != ' ') {
			BAD("no value in '%s'", l);
			continue;
		}
		p++;
		{
			char *vend;
			double v = strtod(p, &vend);

			if (vend == p && strncmp(p, "+Inf", 4) && strncmp(p, "-Inf", 4) &&
			    strncmp(p, "NaN", 3))
				BAD("bad value in '%s'", l);
			if (*vend == ' ') {
				char *tend;

				strtoll(vend + 1, &tend, 10);
				if (*tend)
					BAD("bad timestamp in '%s'", l);
			} else if (*vend) {
				BAD("junk after the value in '%s'", l);
			}

			/* which family: the name itself, or a histogram's _bucket/_sum/_count */
			for (int k = 0; k < nfam && f < 0; k++) {
				if (!strcmp(fam[k].name, name)) {
					f = k;
				} else if (!strcmp(fam[k].type, "histogram")) {
					size_t fl = strlen(fam[k].name);

					if (!strncmp(name, fam[k].name, fl) &&
					    (!strcmp(name + fl, "_bucket") ||
					     !strcmp(name + fl, "_sum") ||
					     !strcmp(name + fl, "_count")))
						f = k;
				}
			}
			if (f < 0) {
				BAD("sample '%s' of no declared family", name);
				continue;
			}
			if (!fam[f].help || !fam[f].type[0])
				BAD("%s lacks HELP or TYPE", fam[f].name);
			if (cur != f) {
				if (cur >= 0)
					fam[cur].ended = true;
				if (fam[f].ended)
					BAD("samples of %s are not together", fam[f].name);
				cur = f;
			}
			if (!strcmp(fam[f].type, "counter")) {
				if (!ends_with(name, "_total"))
					BAD("counter %s does not end in _total", name);
				if (v < 0)
					BAD("negative counter %s", name);
			}
			if (!strcmp(fam[f].type, "histogram")) {
				char key[512];

				snprintf(key, sizeof(key), "%s{%s}", fam[f].name, labels);
				if (ends_with(name, "_bucket")) {
					double lev = !strcmp(le, "+Inf") ? 1e308 : strtod(le, NULL);

					if (!le[0])
						BAD("a bucket without le: '%s'", l);
					if (strcmp(key, hkey)) {
						snprintf(hkey, sizeof(hkey), "%s", key);
						last_le = -1;
						last_count = -1;
						saw_inf = false;
					}
					if (lev <= last_le)
						BAD("le not increasing in '%s'", l);
					if (v < last_count)
						BAD("bucket counts not cumulative in '%s'", l);
					last_le = lev;
					last_count = v;
					if (!strcmp(le, "+Inf")) {
						saw_inf = true;
						inf_count = v;
					}
				} else if (ends_with(name, "_count")) {
					if (strcmp(key, hkey) || !saw_inf)
						BAD("%s without a +Inf bucket before it", name);
					else if (v != inf_count)
						BAD("%s %g differs from the +Inf bucket %g", name,
						    v, inf_count);
				}
			}
		}
		/* no series twice */
		{
			char key[512];

			snprintf(key, sizeof(key), "%s{%sle=%s}", name, labels, le);
			for (int k = 0; k < nser; k++)
				if (!strcmp(ser[k].key, key))
					BAD("series %s appears twice", key);
			if (nser < 4096)
				snprintf(ser[nser++].key, sizeof(ser[0].key), "%s", key);
		}
	}
	for (int k = 0; k < nfam; k++)
		if (!fam[k].type[0] || !fam[k].help)
			BAD("family %s lacks HELP or TYPE", fam[k].name);
#undef BAD
	return bad;
}

Test(live, the_prometheus_checker_catches_mistakes)
{
	checker_quiet = true;
	cr_expect_eq(check_prometheus("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"), 0);
	cr_expect_gt(check_prometheus("# HELP a A.\n# TYPE a counter\na 1\n"), 0, "no _total");
	cr_expect_gt(check_prometheus("a_total 1\n"), 0, "no TYPE");
	cr_expect_gt(check_prometheus("# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
				      "h_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n"),
		     0, "not cumulative");
	cr_expect_gt(check_prometheus("# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
				      "h_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n"),
		     0, "_count is not +Inf");
	cr_expect_gt(check_prometheus("# HELP g G.\n# TYPE g gauge\ng{a=\"x} 1\n"), 0);
	cr_expect_gt(check_prometheus("# HELP g G.\n# TYPE g gauge\ng 1\ng 2\n"), 0, "twice");
	cr_expect_gt(check_prometheus("# HELP g G.\n# TYPE g gauge\ng 1"), 0, "no newline");
}

Test(live, cli_metrics_pass_the_prometheus_format_check)
{
	live_start(NULL, NULL);
	phase_a();
	ctl(false, "metrics", NULL);
	cr_assert_eq(C.status, 0, "%s", C.err);
	cr_expect_eq(check_prometheus(C.out), 0, "%s", C.out);
	cr_expect(strstr(C.out, "semvisor_calls_total{syscall=\"semget\"} 3\n"), "%s", C.out);
	cr_expect(strstr(C.out, "semvisor_errors_total{errno=\"EAGAIN\"} 1\n"), "%s", C.out);
	cr_expect(strstr(C.out, "semvisor_service_seconds_count 9\n"), "%s", C.out);
	cr_expect(strstr(C.out, "semvisor_service_seconds_bucket{le=\"+Inf\"} 9\n"), "%s", C.out);
	cr_expect(strstr(C.out, "semvisor_client_calls_total{client=\"live-child\""), "%s", C.out);
	cr_expect(strstr(C.out, "\nsemvisor_build_info{version=\"") &&
		      strstr(C.out, "\nsemvisor_start_time_seconds ") && !strstr(C.out, "uptime"),
		  "%s", C.out);
	{
		const char *at = strstr(C.out, "\nsemvisor_start_time_seconds ");
		double started =
		    at ? strtod(at + strlen("\nsemvisor_start_time_seconds "), NULL) : 0;
		double now = (double)time(NULL);

		cr_expect(started > now - 120 && started <= now + 1, "start time %.3f, now %.0f",
			  started, now);
	}

	/*
	 * A wait of 2.3 s: counted in a finite bucket (the histogram reaches 2^39 ns; it ended
	 * at 2^32 ns, 4.3 s, whose bucket was +Inf), and _sum is its length, not a bucket's middle.
	 */
	child_do(L.cmd, 'B', &(char){ 0 }, 1);
	for (int i = 0; i < 200; i++) { /* until the grandchild is parked */
		ctl(false, "stats", "--json", NULL);
		if (strstr(C.out, "\"parked\":1"))
			break;
		usleep(10000);
	}
	usleep(2300000);
	{
		int gst = -1;
		const char *at;
		double sum;

		child_do(L.cmd, 'C', &gst, sizeof(gst));
		cr_assert_eq(gst, 0, "the waiter did not complete");
		ctl(false, "metrics", NULL);
		cr_assert_eq(C.status, 0, "%s", C.err);
		cr_expect_eq(check_prometheus(C.out), 0, "%s", C.out);
		cr_expect(
		    strstr(C.out, "semvisor_wait_seconds_count 1\n") &&
			strstr(C.out, "semvisor_wait_seconds_bucket{le=\"4.294967295\"} 1\n") &&
			strstr(C.out, "semvisor_wait_seconds_bucket{le=\"2.147483647\"} 0\n"),
		    "the 2.3 s wait is not in the 2.1-4.3 s bucket:\n%s", C.out);
		at = strstr(C.out, "\nsemvisor_wait_seconds_sum ");
		sum = at ? strtod(at + strlen("\nsemvisor_wait_seconds_sum "), NULL) : 0;
		cr_expect(sum >= 2.3 && sum < 3.3, "wait _sum %.6f for a wait of 2.3 s", sum);
	}
	live_stop();
}

Test(live, cli_exit_codes)
{
	const char *missing[] = { "semvisorctl", "--socket", "/nonexistent/semvisor.sock", "stats",
				  NULL };
	struct ctl_opts o = CTL_OPTS_INIT;
	char id[16];

	/* 3: no socket */
	run_prog(false, NULL, missing);
	cr_expect_eq(C.status, 3, "%s", C.err);
	cr_expect(strstr(C.err, "no control socket"), "%s", C.err);

	live_start(NULL, NULL);
	phase_a();
	snprintf(id, sizeof(id), "%d", L.ids[0]);
	/* 1: refused */
	ctl(false, "show", "31999", NULL);
	cr_expect_eq(C.status, 1, "%s", C.err);
	cr_expect(strstr(C.err, "no set"), "%s", C.err);
	/* 2: usage */
	ctl(false, "frobnicate", NULL);
	cr_expect_eq(C.status, 2);
	ctl(false, "show", NULL);
	cr_expect_eq(C.status, 2);
	ctl(false, "show", "abc", NULL);
	cr_expect_eq(C.status, 2);
	ctl(false, "metrics", "--json", NULL);
	cr_expect_eq(C.status, 2);
	ctl(false, "ipcs", "--interval", "1", NULL);
	cr_expect_eq(C.status, 2);
	ctl(false, "limits", "1,2,3", NULL);
	cr_expect_eq(C.status, 2);
	/* 4: a privileged command from nobody */
	ctl(true, "rm", id, NULL);
	cr_expect_eq(C.status, 4, "%s", C.err);
	cr_expect(strstr(C.err, "permission denied"), "%s", C.err);
	ctl(true, "reset", NULL);
	cr_expect_eq(C.status, 4, "%s", C.err);
	ctl(true, "ipcs", NULL);
	cr_expect_eq(C.status, 0, "reading is for anyone who can connect: %s", C.err);
	/* 0: and root may */
	ctl(false, "rm", id, NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	ctl(false, "reset", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	live_stop();

	/* 4: a socket closed to nobody */
	o.mode = 0600;
	live_start(&o, NULL);
	ctl(true, "stats", NULL);
	cr_expect_eq(C.status, 4, "%s", C.err);
	cr_expect(strstr(C.err, "permission denied"), "%s", C.err);
	live_stop();

	/* 3: a stale socket */
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		const char *stale[] = { "semvisorctl", "--socket", "/tmp/semvisor-ctl-stale.sock",
					"stats", NULL };
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		unlink(stale[2]);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale[2]);
		cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
		run_prog(false, NULL, stale);
		cr_expect_eq(C.status, 3, "%s", C.err);
		unlink(stale[2]);
	}
}

/* Does text hold the number v, not as part of a longer one (timestamps hold any digits)? */
static bool has_number(const char *text, int v)
{
	char num[16];
	size_t n = (size_t)snprintf(num, sizeof(num), "%d", v);

	for (const char *p = text; (p = strstr(p, num)); p++) {
		bool before = p > text && (p[-1] >= '0' && p[-1] <= '9');
		bool after = p[n] >= '0' && p[n] <= '9';

		if (!before && !after)
			return true;
	}
	return false;
}

Test(live, cli_an_unreadable_set_is_refused_and_its_value_shown_nowhere)
{
	static const char *const reads[][3] = {
		{ "ipcs" },
		{ "ipcs", "--json" },
		{ "stats" },
		{ "stats", "--json" },
		{ "metrics" },
		{ "clients", "--json" },
		{ "top", "--json", "--count=1" },
	};
	struct read_args a;
	char id[16], id3[16];

	live_start(NULL, NULL);
	phase_d(&a);
	snprintf(id, sizeof(id), "%d", a.ids[1]);
	snprintf(id3, sizeof(id3), "%d", a.ids[3]);

	/* root sees the 0600 set's value */
	ctl(false, "show", id, NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(has_number(C.out, SECRET_VAL), "root's show: %s", C.out);

	/* nobody: refused with a sentence, the permission exit status, and no value */
	ctl(true, "show", id, NULL);
	cr_expect_eq(C.status, 4, "%s", C.err);
	cr_expect(strstr(C.err, "is not readable by uid 65534") &&
		      strstr(C.err, "permission denied"),
		  "%s", C.err);
	cr_expect(!has_number(C.out, SECRET_VAL) && !has_number(C.err, SECRET_VAL));
	ctl(true, "show", id, "--json", NULL);
	cr_expect_eq(C.status, 4, "%s", C.err);
	cr_expect_eq(C.out_len, 0, "%s", C.out);
	/* the set is listed, its value nowhere in what nobody may read */
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		ctl(true, reads[i][0], reads[i][1], reads[i][2], NULL);
		cr_expect_eq(C.status, 0, "%s: %s", reads[i][0], C.err);
		cr_expect(!has_number(C.out, SECRET_VAL), "%s %s: %s", reads[i][0],
			  reads[i][1] ? reads[i][1] : "", C.out);
	}
	ctl(true, "ipcs", "--json", NULL);
	cr_expect(strstr(C.out, "\"perms\":\"600\"") && strstr(C.out, "\"lock_spun\":null"),
		  "listed, its counters withheld: %s", C.out);
	/* mode 0604: the other bits let nobody read it */
	ctl(true, "show", id3, NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	cr_expect(has_number(C.out, PUBLIC_VAL), "%s", C.out);
	live_stop();
}

Test(live, cli_top_outlives_the_idle_limit)
{
	struct ctl_opts o = CTL_OPTS_INIT;
	int lines = 0;

	o.mode = 0666;
	o.idle_ms = 300;
	live_start(&o, NULL);
	/* one connection, refreshed more slowly than the idle limit */
	ctl(true, "top", "--json", "--count", "3", "--interval", "0.5", NULL);
	cr_expect_eq(C.status, 0, "%s", C.err);
	for (const char *p = C.out; (p = strchr(p, '\n')); p++)
		lines++;
	cr_expect_eq(lines, 3, "one object per snapshot: %s", C.out);
	live_stop();
}

Test(live, cli_help)
{
	const char *top[] = { "semvisorctl", "--help", NULL };
	const char *help_show[] = { "semvisorctl", "help", "show", NULL };
	const char *show_help[] = { "semvisorctl", "show", "--help", NULL };
	const char *help_bad[] = { "semvisorctl", "help", "nosuch", NULL };
	const char *none[] = { "semvisorctl", NULL };
	static char first[sizeof(C.out)];

	run_prog(false, NULL, top);
	cr_expect_eq(C.status, 0);
	cr_expect(strstr(C.out, "Exit status"), "%s", C.out);
	for (int code = 0; code <= 5; code++) {
		char want[8];

		snprintf(want, sizeof(want), "  %d  ", code);
		cr_expect(strstr(C.out, want), "exit status %d is documented", code);
	}
	cr_expect(strstr(C.out, "SEMVISOR_CONTROL") && strstr(C.out, "/run/semvisor/control.sock"));
	run_prog(false, NULL, help_show);
	cr_expect_eq(C.status, 0);
	cr_expect(strstr(C.out, "show ID"), "%s", C.out);
	snprintf(first, sizeof(first), "%s", C.out);
	run_prog(false, NULL, show_help);
	cr_expect_eq(C.status, 0);
	cr_expect_str_eq(C.out, first, "help show and show --help say the same");
	run_prog(false, NULL, help_bad);
	cr_expect_eq(C.status, 2);
	run_prog(false, NULL, none);
	cr_expect_eq(C.status, 2, "no command is a usage error");
	cr_expect(strstr(C.err, "Usage"), "and says how: %s", C.err);
}

/* SPDX-License-Identifier: MIT */
/*
 * The program inside the containers of tests/60-daemon-runc.c and tests/62-daemon-runtimes.c
 * (runc, crun, podman, ctr). It runs in a busybox rootfs, so the tests link it statically (cc
 * -static, tests/60-daemon-ct.h); the generic tests/prog rule also builds a dynamic copy, which
 * is never put in a container. A static glibc issues semop/semtimedop/semget/semctl
 * itself, as static and musl programs in containers do: the OCI profile traps all four.
 *
 *   ct-sem pingpong KEY N [SYNCDIR]
 *       Creates a keyed set (IPC_EXCL: the container's namespace starts empty), forks two
 *       processes that take turns N times through it (two processes of one container share the
 *       set), checks the counter, the values and GETPID, and that the kernel holds no set in this
 *       IPC namespace (/proc/sysvipc/sem: the calls went to semvisord). With SYNCDIR (a
 *       directory bind-mounted from the host) it then sets sem0 to 1234, creates SYNCDIR/ready
 *       and stays alive until SYNCDIR/release appears, so that the test can probe the key from
 *       another container meanwhile; then it checks its set is still there, unchanged, and
 *       removes it.
 *   ct-sem probe KEY absent|VALUE
 *       absent: semget(KEY, 0, 0) must fail ENOENT (another IPC namespace: another container's
 *       set is invisible), and creating a set with the same key must work and be our own.
 *       VALUE: the key must name a set whose sem0 reads VALUE (a namespace shared on purpose).
 *
 * Output is one line per fact, "FAIL: ..." for a broken expectation; exit 0 only if all held.
 */
#include <sys/stat.h>

#include "prog.h"

#define MARK 1234

static int kernel_sets(void)
{
	FILE *f = fopen("/proc/sysvipc/sem", "re");
	char line[512];
	int n = -1; /* the header line */

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

static bool timed(int id, unsigned short num, short op)
{
	struct sembuf b = { num, op, 0 };
	struct timespec ts = { 20, 0 };

	if (semtimedop(id, &b, 1, &ts) == 0)
		return true;
	printf("FAIL: semtimedop(sem%u, %+d): %s\n", num, op, errname(errno));
	return false;
}

/* One side of the ping-pong, in a child: exit 0 if every turn saw the expected counter. */
static void side(int id, bool ping, int n)
{
	int bad = 0;

	if (!ping && !timed(id, 0, 1))
		_exit(1);
	for (int i = 0; i < n; i++) {
		int want = ping ? 2 * i : 2 * i + 1, v;

		if (!timed(id, ping ? 0 : 1, -1))
			_exit(1);
		v = getval(id, 2);
		if (v != want) {
			printf("FAIL: %s turn %d: counter %d, expected %d\n",
			       ping ? "ping" : "pong", i, v, want);
			bad++;
		}
		if (!timed(id, 2, 1) || !timed(id, ping ? 1 : 0, 1))
			_exit(1);
	}
	if (ping && !timed(id, 0, -1))
		_exit(1);
	_exit(bad ? 1 : 0);
}

static bool exists(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

static int pingpong(key_t key, int n, const char *sync)
{
	int id = semget(key, 3, IPC_CREAT | IPC_EXCL | 0600);
	pid_t ping, pong;

	MUST(id >= 0);
	printf("created: yes\n");
	ping = xfork();
	if (ping == 0)
		side(id, true, n);
	pong = xfork();
	if (pong == 0)
		side(id, false, n);
	printf("ping: %s\n", reap(ping));
	printf("pong: %s\n", reap(pong));
	printf("counter: %d\n", getval(id, 2));
	EXPECT(getval(id, 2) == 2 * n, "counter %d, expected %d", getval(id, 2), 2 * n);
	printf("sem0 sem1: %d %d\n", getval(id, 0), getval(id, 1));
	/* the last operation on sem2 was pong's; GETPID answers in our pid namespace */
	printf("lastpid is pong: %s\n", semctl(id, 2, GETPID) == pong ? "yes" : "no");
	printf("kernel sets: %d\n", kernel_sets());
	if (!sync)
		return semctl(id, 0, IPC_RMID) == 0 ? prog_exit_status() : 1;

	CHECK("mark", 0, setval(id, 0, MARK));
	{
		char path[512];
		int fd;

		snprintf(path, sizeof(path), "%s/ready", sync);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		MUST(fd >= 0);
		close(fd);
	}
	for (int i = 0; !exists(sync, "release"); i++) {
		if (i > 60 * 50) {
			printf("FAIL: never released\n");
			return 1;
		}
		sleep_ms(20);
	}
	/* the other container's set with the same key did not replace or touch ours */
	printf("after probe: same id %s, sem0 %d\n", semget(key, 0, 0) == id ? "yes" : "no",
	       getval(id, 0));
	CHECK("rmid", 0, semctl(id, 0, IPC_RMID));
	return prog_exit_status();
}

static int probe(key_t key, const char *want)
{
	if (!strcmp(want, "absent")) {
		int id;

		CHECK("probe semget", -ENOENT, semget(key, 0, 0));
		/* the key is free here: a set of our own, which must not be the other one */
		id = semget(key, 1, IPC_CREAT | IPC_EXCL | 0600);
		printf("probe own set: %s\n", id >= 0 ? "created" : errname(errno));
		EXPECT(id >= 0, "semget(IPC_CREAT|IPC_EXCL) failed");
		if (id >= 0) {
			CHECK("probe own setval", 0, setval(id, 0, 7));
			CHECK("probe own getval", 7, getval(id, 0));
			/* while it exists: the kernel must not hold it */
			printf("kernel sets: %d\n", kernel_sets());
			CHECK("probe own rmid", 0, semctl(id, 0, IPC_RMID));
		}
	} else {
		int id = (int)SHOW("probe semget", semget(key, 0, 0));

		CHECK("probe sem0", atoi(want), id >= 0 ? getval(id, 0) : -1);
		printf("kernel sets: %d\n", kernel_sets());
	}
	return prog_exit_status();
}

int main(int argc, char **argv)
{
	prog_init();
	if (argc >= 4 && !strcmp(argv[1], "pingpong"))
		return pingpong((key_t)strtol(argv[2], NULL, 0), atoi(argv[3]),
				argc > 4 ? argv[4] : NULL);
	if (argc == 4 && !strcmp(argv[1], "probe"))
		return probe((key_t)strtol(argv[2], NULL, 0), argv[3]);
	fprintf(stderr, "usage: ct-sem pingpong KEY N [SYNCDIR] | probe KEY absent|VALUE\n");
	return 2;
}

/* SPDX-License-Identifier: MIT */
/*
 * A tiny Type=notify service for tests/64-daemon-restart.c, run under semvisor-keeper: it keeps a
 * counter in a memfd in the fd store, so that each start sees the value the last one left.
 *
 *   fdstore-svc OUT [MANY]
 *
 * At each start it appends to OUT: "names LISTEN_FDNAMES", "fds ok" (or "fd leak: N", an fd
 * it was not given), "count V" (the counter read back from the fd named "counter" and
 * incremented, or 1 on the first start, when it creates the memfd). It stores the counter
 * again every time (the keeper must not keep it twice). On the first start only it also stores
 * one end of a socket pair as "peer", one as "quiet" with FDPOLL=0, and two memfds as "extra"
 * (one message), and MANY memfds as "many", eight a message (as a daemon holding many
 * listeners stores them). If it was handed an fd named "state" (what the last one stored on its way
 * out, below), it checks that the state holds the counter it read, says "state V", and removes
 * it from the store, as a daemon does once it took its state back. Then READY=1, and it waits
 * for signals, each answered by a line in OUT:
 *   SIGUSR1  closes its ends of both socket pairs ("hung up"): "peer" must leave the store,
 *            "quiet" must stay
 *   SIGUSR2  FDSTOREREMOVE=1 FDNAME=extra ("removed")
 *   SIGHUP   a child (not the main pid) stores a memfd as "intruder" and says READY=1, and
 *            after it exited, the service stores one as "marker" ("intruded")
 *   SIGTERM  stores a memfd holding the counter as "state", says "term", exits 0 at once:
 *            the keeper must take that last message although its sender is gone
 * Exit status 2 when something it needs fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *out_path;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	FILE *f = fopen(out_path, "ae");
	va_list ap;

	if (!f)
		exit(2);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

#define MUST(cond)                                                                                 \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			out("FATAL %s: %s", #cond, strerror(errno));                               \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

/* sd_pid_notify_with_fds(), without libsystemd: text plus fds to NOTIFY_SOCKET. */
static void notify(const char *text, const int *fds, int nfds)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 8)];
	} ctl;
	struct iovec iov = { (void *)text, strlen(text) };
	struct msghdr mh = {
		.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1
	};
	int fd;

	MUST(path && strlen(path) < sizeof(sa.sun_path) && nfds <= 8);
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	if (nfds > 0) {
		struct cmsghdr *c;

		mh.msg_control = &ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	MUST(fd >= 0);
	MUST(sendmsg(fd, &mh, 0) == (ssize_t)iov.iov_len);
	close(fd);
}

static int memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	MUST(fd >= 0);
	return fd;
}

/* Every open fd is 0..2, one it was given (3 .. 3+n-1), or the directory being read. */
static void check_fds(int n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	bool ok = true;

	MUST(d);
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d) || fd < 3 + n)
			continue;
		out("fd leak: %d", fd);
		ok = false;
	}
	closedir(d);
	if (ok)
		out("fds ok");
}

int main(int argc, char **argv)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS"),
		   *names = getenv("LISTEN_FDNAMES");
	int n = 0, counter = -1, state = -1, held[2] = { -1, -1 }, sp[2];
	long value = 0;
	char text[256];
	sigset_t sigs;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: fdstore-svc OUT [MANY]\n");
		return 2;
	}
	out_path = argv[1];
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);

	if (fds_s) {
		MUST(pid_s && atoi(pid_s) == (int)getpid() && names);
		n = atoi(fds_s);
	}
	out("names %s", n ? names : "");
	check_fds(n);
	/* the counter and the state: the first fds of those names */
	for (int i = 0, at = 0; i < n; i++) {
		size_t len = strcspn(names + at, ":");

		if (len == 7 && !strncmp(names + at, "counter", 7) && counter < 0)
			counter = 3 + i;
		if (len == 5 && !strncmp(names + at, "state", 5) && state < 0)
			state = 3 + i;
		at += (int)len + (names[at + len] == ':');
	}
	if (counter >= 0) {
		MUST(pread(counter, &value, sizeof(value), 0) == sizeof(value));
		fcntl(counter, F_SETFD, FD_CLOEXEC);
	} else {
		counter = memfd("counter");
	}
	if (state >= 0) {
		long saved = -1;

		MUST(pread(state, &saved, sizeof(saved), 0) == sizeof(saved));
		if (saved == value)
			out("state %ld", saved);
		else
			out("state %ld, but the counter says %ld", saved, value);
		notify("FDSTOREREMOVE=1\nFDNAME=state", NULL, 0);
		close(state);
	}
	value++;
	MUST(pwrite(counter, &value, sizeof(value), 0) == sizeof(value));
	out("count %ld", value);
	notify("FDSTORE=1\nFDNAME=counter", &counter, 1);

	if (value == 1) {
		int extra[2] = { memfd("extra"), memfd("extra") };

		MUST(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
		notify("FDSTORE=1\nFDNAME=peer", &sp[0], 1);
		close(sp[0]);
		held[0] = sp[1];
		MUST(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
		notify("FDSTORE=1\nFDNAME=quiet\nFDPOLL=0", &sp[0], 1);
		close(sp[0]);
		held[1] = sp[1];
		notify("FDSTORE=1\nFDNAME=extra", extra, 2);
		close(extra[0]);
		close(extra[1]);
		for (int left = argc == 3 ? atoi(argv[2]) : 0; left > 0; left -= 8) {
			int many[8], m = left < 8 ? left : 8;

			for (int i = 0; i < m; i++)
				many[i] = memfd("many");
			notify("FDSTORE=1\nFDNAME=many", many, m);
			for (int i = 0; i < m; i++)
				close(many[i]);
		}
	}
	snprintf(text, sizeof(text), "READY=1\nSTATUS=count %ld", value);
	notify(text, NULL, 0);

	for (;;) {
		int sig = sigwaitinfo(&sigs, NULL);

		if (sig == SIGUSR1) {
			close(held[0]);
			close(held[1]);
			held[0] = held[1] = -1;
			out("hung up");
		} else if (sig == SIGUSR2) {
			notify("FDSTOREREMOVE=1\nFDNAME=extra", NULL, 0);
			out("removed");
		} else if (sig == SIGHUP) {
			pid_t pid = fork();
			int fd;

			MUST(pid >= 0);
			if (pid == 0) {
				fd = memfd("intruder");
				notify("FDSTORE=1\nFDNAME=intruder", &fd, 1);
				notify("READY=1", NULL, 0);
				_exit(0);
			}
			MUST(waitpid(pid, NULL, 0) == pid);
			fd = memfd("marker");
			notify("FDSTORE=1\nFDNAME=marker", &fd, 1);
			close(fd);
			out("intruded");
		} else if (sig == SIGTERM) {
			int fd = memfd("state");

			MUST(pwrite(fd, &value, sizeof(value), 0) == sizeof(value));
			notify("FDSTORE=1\nFDNAME=state", &fd, 1);
			out("term");
			return 0;
		}
	}
}

/* SPDX-License-Identifier: MIT */
/*
 * semvisor-lxc: hand a running LXC container's seccomp listener to semvisord.
 *
 * LXC's own lxc.seccomp.notify.proxy sends every notification to a proxy over a seqpacket
 * socket and waits for that one answer before it reads the next: a semop that has to wait
 * would hold up every other call of the container, so it cannot serve System V semaphores.
 * Instead the container's profile traps the semaphore calls with "notify" and no proxy, LXC's
 * monitor keeps the listener without reading it, and this program takes a copy of it from the
 * monitor and gives it to semvisord's agent socket in the message runc sends (handoff/msg.h):
 * from then on semvisord alone reads it, as it reads a runc container's.
 *
 * The copy comes from liblxc's seccomp_notify_fd_active(), which asks the running container's
 * monitor over its command socket (LXC 4.0 and later; Debian 12 has 5.0). No fallback is
 * needed there, and the usual other route, pidfd_getfd() on an fd of the monitor that looks
 * like a listener, would take whatever the monitor holds on a guess. What comes back is
 * checked to be a seccomp listener all the same before it is handed on.
 *
 * Until the listener is handed over nobody reads it, so a semaphore call made before then
 * waits (examples/lxc/README.md). The monitor's copy stays open as long as the container runs:
 * a container that semvisord refuses, or loses, waits in its semaphore calls rather than see
 * ENOSYS.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <lxc/lxccontainer.h>

#include "handoff/xfer.h"
#include "util/version.h"

#define PROG "semvisor-lxc"

/* The exit statuses --help lists. */
enum {
	EX_HANDED = 0,
	EX_USAGE = 1,
	EX_CONTAINER = 2, /* not found, not running, or without a listener */
	EX_DAEMON = 3,	  /* semvisord unreachable, or it refused the container */
};

#define DEFAULT_AGENT "/run/semvisor/agent.sock"
/* How long semvisord may take to say it serves the container. */
#define ACK_MS 10000

struct options {
	const char *socket;
	const char *lxcpath; /* NULL: liblxc's default (lxc.lxcpath) */
	const char *ns;	     /* NULL: the container's own IPC namespace */
	const char *name;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [OPTION]... NAME\n"
		"Hand the seccomp listener of the running LXC container NAME to semvisord, which\n"
		"then serves the container's System V semaphore calls. The container's\n"
		"lxc.seccomp.profile must send semget, semop, semtimedop, semctl and ipc to a\n"
		"listener (\"notify\") without lxc.seccomp.notify.proxy; see examples/lxc/.\n"
		"Run it once per start of the container, before it makes its first semaphore\n"
		"call: until then such a call waits.\n"
		"\n"
		"Options:\n"
		"  -s, --socket=PATH    semvisord's agent socket (default " DEFAULT_AGENT ")\n"
		"  -P, --lxcpath=PATH   where the container is (default: LXC's lxc.lxcpath)\n"
		"      --ns=NAME        serve it from semvisord's namespace NAME, shared with\n"
		"                       every client naming it (1 to 63 printable characters,\n"
		"                       no space, comma or semicolon; honoured from root only)\n"
		"  -h, --help           this text\n"
		"  -V, --version        the version\n"
		"\n"
		"Exit status:\n"
		"  0  semvisord serves the container\n"
		"  1  usage error\n"
		"  2  no such container, it is not running, or it has no seccomp listener\n"
		"  3  semvisord cannot be reached, or it refused the container (see its log)\n");
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help' for more information.\n");
	return EX_USAGE;
}

/* The daemon's rule for ns=NAME (handoff/meta.h), checked here so that a typo is ours to say. */
static bool ns_name_ok(const char *ns)
{
	size_t n = strlen(ns);

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)ns[i]) || ns[i] == ',' || ns[i] == ';')
			return false;
	return true;
}

static int parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "lxcpath", required_argument, NULL, 'P' },
		/* no -n: lxc-start -n NAME names the container, a habit this must not catch */
		{ "ns", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	*o = (struct options){ .socket = DEFAULT_AGENT };
	while ((opt = getopt_long(argc, argv, ":s:P:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			o->socket = optarg;
			break;
		case 'P':
			o->lxcpath = optarg;
			break;
		case 'N':
			if (!ns_name_ok(optarg))
				return bad_usage("--ns wants 1 to 63 printable characters without "
						 "space, comma or semicolon, not '%s'",
						 optarg);
			o->ns = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(EX_HANDED);
		case 'V':
			printf(PROG " %s\n", SEMVISOR_VERSION);
			exit(EX_HANDED);
		case ':':
			return bad_usage("option '%s' needs an argument", argv[optind - 1]);
		default:
			return bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return bad_usage(optind == argc ? "no container named" : "one container at a time");
	o->name = argv[optind];
	if (!*o->name)
		return bad_usage("an empty container name");
	if (strlen(o->name) >= sizeof(((struct ho_info *)0)->id))
		return bad_usage("container name too long for semvisord: %s", o->name);
	if (strlen(o->socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return bad_usage("agent socket path too long: %s", o->socket);
	return -1;
}

/* The container's listener and init pid: 0, or EX_CONTAINER having said why. */
static int take_listener(const struct options *o, int *listener, pid_t *pid)
{
	struct lxc_container *c = lxc_container_new(o->name, o->lxcpath);
	int rc = EX_CONTAINER, fd;
	char what[64];

	if (!c) {
		fprintf(stderr, PROG ": no container %s%s%s\n", o->name, o->lxcpath ? " in " : "",
			o->lxcpath ? o->lxcpath : "");
		return EX_CONTAINER;
	}
	if (!c->is_running(c)) {
		fprintf(stderr, PROG ": container %s is %s\n", o->name,
			c->is_defined(c) ? "not running" : "not defined");
		goto out;
	}
	*pid = c->init_pid(c);
	if (*pid <= 0) {
		fprintf(stderr, PROG ": container %s has no init process\n", o->name);
		goto out;
	}
	fd = c->seccomp_notify_fd_active(c);
	if (fd < 0) {
		fprintf(stderr,
			PROG ": container %s has no seccomp listener: its lxc.seccomp.profile "
			     "has no \"notify\" rule, or it is not running under it\n",
			o->name);
		goto out;
	}
	if (!ho_is_listener(fd, what, sizeof(what))) {
		fprintf(stderr,
			PROG ": the monitor of container %s gave an fd that is not a "
			     "seccomp listener (%s)\n",
			o->name, what);
		close(fd);
		goto out;
	}
	*listener = fd;
	rc = 0;
out:
	lxc_container_put(c);
	return rc;
}

/* Send the listener as runc would, and wait for semvisord's word that it serves it. */
static int hand_over(const struct options *o, int listener, pid_t pid)
{
	struct ho_info info = { .pid = pid };
	char ok = 0, err[PATH_MAX + 64];
	struct pollfd pfd;
	int sock, rc;
	ssize_t n;

	snprintf(info.id, sizeof(info.id), "%s", o->name);
	if (o->ns)
		snprintf(info.metadata, sizeof(info.metadata), "ns=%s", o->ns);
	/* where runc names the bundle: the container's directory, its config inside */
	snprintf(info.bundle, sizeof(info.bundle), "%s/%s",
		 o->lxcpath ? o->lxcpath : lxc_get_global_config_item("lxc.lxcpath"), o->name);

	sock = ho_connect(o->socket, err, sizeof(err));
	if (sock < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return EX_DAEMON;
	}
	rc = ho_send(sock, listener, &info);
	if (rc) {
		fprintf(stderr, PROG ": handing container %s to semvisord at %s: %s\n", o->name,
			o->socket, strerror(-rc));
		close(sock);
		return EX_DAEMON;
	}
	/* semvisord answers one byte once it serves the listener; it closes on a refusal */
	pfd = (struct pollfd){ .fd = sock, .events = POLLIN };
	while ((rc = poll(&pfd, 1, ACK_MS)) < 0 && errno == EINTR)
		;
	n = rc == 1 ? read(sock, &ok, 1) : -1;
	close(sock);
	if (rc == 0) {
		fprintf(stderr, PROG ": semvisord at %s did not confirm container %s within %d s\n",
			o->socket, o->name, ACK_MS / 1000);
		return EX_DAEMON;
	}
	if (n != 1 || ok != 1) {
		fprintf(stderr, PROG ": semvisord at %s refused container %s (its log says why)\n",
			o->socket, o->name);
		return EX_DAEMON;
	}
	return EX_HANDED;
}

int main(int argc, char **argv)
{
	struct options o;
	int listener = -1, rc;
	pid_t pid = 0;

	rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = take_listener(&o, &listener, &pid);
	if (rc)
		return rc;
	rc = hand_over(&o, listener, pid);
	close(listener);
	return rc;
}

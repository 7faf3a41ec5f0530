/* SPDX-License-Identifier: MIT */
/*
 * semvisord: one supervisor for separately started programs and containers.
 *
 * The main thread runs a libev loop for the agent socket, signals and systemd status; the
 * notify layer's workers serve every client's semaphore calls; the control socket has its own
 * thread. Clients share semaphores by key exactly as they would on one kernel, each IPC
 * namespace isolated from the others (or, by configuration, all in one namespace).
 *
 * Lifetimes. A client (listener) lasts while any process of its tree does. The sets of a
 * container's IPC namespace end when its last client is gone, as the namespace would die; the
 * sets of the daemon's own IPC namespace, where separately started host programs meet, last as
 * long as the daemon (as the host's last until reboot).
 *
 * Stopping (SIGTERM). The daemon stops taking clients and exits; the kernel then fails every
 * trapped call of every confined process with ENOSYS: semaphore calls, and for programs started
 * with semvisor-run --daemon also the credential-changing calls and execve its filter traps.
 * Parked calls return ENOSYS at once. Their semaphores are gone. Programs we trace (semvisor-run
 * --daemon --backend=ptrace) are killed with us: no other tracer could take them on, and a
 * traced call left without one would sleep for ever.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "daemon/daemon.h"
#include "lock/xpthread.h"
#include "util/killpoint.h"
#include "util/usock.h"
#include "util/version.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void dlog(struct daemon *d, const char *fmt, ...)
{
	va_list ap;

	(void)d;
	xlock(&log_lock);
	fputs("semvisord: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	xunlock(&log_lock);
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: semvisord [OPTION]...\n"
		"Serve the System V semaphores of programs started with 'semvisor-run --daemon'\n"
		"and of containers whose runtime hands over their seccomp listener (OCI\n"
		"linux.seccomp.listenerPath), with the semantics of the Linux kernel.\n"
		"\n"
		"  -c, --config=FILE          read FILE instead of " CFG_DEFAULT_PATH "\n"
		"                             (a missing default file is not an error)\n"
		"      --agent-socket=PATH    where clients hand over their listener\n"
		"                             (default " CFG_DEFAULT_AGENT ")\n"
		"      --control-socket=PATH  the control socket for semvisorctl\n"
		"                             (default " CFG_DEFAULT_CONTROL "; empty: none)\n"
		"      --metrics-listen=HOST:PORT\n"
		"                             serve GET /metrics (Prometheus text format) over\n"
		"                             HTTP there, read-only ([IPV6]:PORT; :PORT for\n"
		"                             every address; default: none)\n"
		"      --workers=N            worker threads (default: one per 4 CPUs the\n"
		"                             daemon may run on, 1 to 8)\n"
		"      --limits=MSL,MNS,OPM,MNI\n"
		"                             semaphore limits of every namespace, in\n"
		"                             /proc/sys/kernel/sem order (default: the host's)\n"
		"      --namespaces=POLICY    per-ipc-namespace (default): clients share sets\n"
		"                             only within one IPC namespace, as on one kernel;\n"
		"                             shared: all clients share one namespace\n"
		"      --trace                one line per served call on standard error\n"
		"      --set KEY=VALUE        any configuration file setting\n"
		"      --check                check the configuration and exit\n"
		"  -h, --help                 show this help and exit\n"
		"  -V, --version              show the version and exit\n"
		"\n"
		"Under systemd (semvisord.service, Type=notify) the sockets may come from\n"
		"semvisord.socket (named 'agent' and 'control') and semvisord-metrics.socket\n"
		"('metrics'). Signals: SIGHUP re-reads the\n"
		"configuration and applies the limits and the budget; SIGTERM stops (confined\n"
		"programs' trapped calls then fail with ENOSYS).\n"
		"\n"
		"The budget bounds what every namespace holds together, in all and per uid\n"
		"(0: no bound): semaphores and sets, per creating uid (max_semaphores,\n"
		"max_sets and their _per_uid keys; a semget past it fails with ENOSPC); SEM_UNDO\n"
		"entries and parked semops, per calling uid (max_undos, max_waiters and their\n"
		"_per_uid keys; the semop fails with ENOMEM); IPC namespaces, per owner of their\n"
		"user namespace (max_namespaces, max_namespaces_per_uid; a namespace past it is\n"
		"served as a full, empty one: semget fails with ENOSPC).\n"
		"\n"
		"A client's metadata (OCI listenerMetadata: entries one a line, or separated by\n"
		"spaces or commas; other agents' KEY=VALUE entries are ignored) may say 'ns=NAME'\n"
		"to be served from a named namespace shared with other clients naming it\n"
		"(honoured from root only), and 'ns-traps' when its filter traps unshare and\n"
		"setns, which lets the daemon\n"
		"keep its threads' namespaces between calls instead of reading them each time.\n"
		"\n"
		"Exit status: 0 after SIGTERM or --check; 1 on a configuration or setup error.\n");
}

/* The file, then the command line over it: at start and at every reload. */
static int load_config(struct daemon *d, struct cfg *c)
{
	char err[512];
	int rc;

	cfg_defaults(c);
	rc = cfg_load(c, d->config_path, err, sizeof(err));
	if (rc && !(rc == -ENOENT && !d->explicit_config)) {
		dlog(d, "%s", err);
		return -1;
	}
	for (int i = 0; i < d->noverrides; i++) {
		if (cfg_set(c, d->overrides[i].key, d->overrides[i].value, err, sizeof(err))) {
			dlog(d, "%s", err);
			return -1;
		}
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct daemon *d, bool *check)
{
	enum {
		O_AGENT = 256,
		O_CONTROL,
		O_METRICS,
		O_WORKERS,
		O_LIMITS,
		O_NS,
		O_TRACE,
		O_SET,
		O_CHECK
	};
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "agent-socket", required_argument, NULL, O_AGENT },
		{ "control-socket", required_argument, NULL, O_CONTROL },
		{ "metrics-listen", required_argument, NULL, O_METRICS },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "limits", required_argument, NULL, O_LIMITS },
		{ "namespaces", required_argument, NULL, O_NS },
		{ "trace", no_argument, NULL, O_TRACE },
		{ "set", required_argument, NULL, O_SET },
		{ "check", no_argument, NULL, O_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* Options override the file: collect them, load the file, then apply them in order. */
	struct cfg_override *sets = d->overrides;
	int nsets = 0, c;

	d->config_path = CFG_DEFAULT_PATH;
	opterr = 0; /* our messages name the program, not the path it was run by */
	while ((c = getopt_long(argc, argv, ":c:hV", opts, NULL)) != -1) {
		const char *key = NULL;

		switch (c) {
		case 'c':
			d->config_path = optarg;
			d->explicit_config = true;
			continue;
		case O_AGENT:
			key = "agent_socket";
			break;
		case O_CONTROL:
			key = "control_socket";
			break;
		case O_METRICS:
			key = "metrics_listen";
			break;
		case O_WORKERS:
			key = "workers";
			break;
		case O_LIMITS:
			key = "limits";
			break;
		case O_NS:
			key = "namespaces";
			break;
		case O_TRACE:
			key = "trace";
			optarg = (char *)"yes";
			break;
		case O_SET: {
			char *eq = strchr(optarg, '=');

			if (!eq) {
				fprintf(stderr, "semvisord: --set wants KEY=VALUE, not '%s'\n",
					optarg);
				return -1;
			}
			*eq = '\0';
			key = optarg;
			optarg = eq + 1;
			break;
		}
		case O_CHECK:
			*check = true;
			continue;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("semvisord %s\n", SEMVISOR_VERSION);
			exit(0);
		case ':':
			fprintf(stderr, "semvisord: option '%s' needs a value\n", argv[optind - 1]);
			fprintf(stderr, "Try 'semvisord --help' for more information.\n");
			return -1;
		default:
			if (optopt)
				fprintf(stderr, "semvisord: unknown option '-%c'\n", optopt);
			else
				fprintf(stderr, "semvisord: unknown option '%s'\n",
					argv[optind - 1]);
			fprintf(stderr, "Try 'semvisord --help' for more information.\n");
			return -1;
		}
		if (nsets == (int)(sizeof(d->overrides) / sizeof(d->overrides[0]))) {
			fprintf(stderr, "semvisord: too many options\n");
			return -1;
		}
		sets[nsets].key = key;
		sets[nsets++].value = optarg;
	}
	if (optind < argc) {
		fprintf(stderr, "semvisord: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}

	d->noverrides = nsets;
	return load_config(d, &d->cfg);
}

static int lock_instance(struct daemon *d, char *err, size_t errlen)
{
	char path[sizeof(d->cfg.agent_path) + 8], dir[sizeof(path)];

	snprintf(path, sizeof(path), "%s.lock", d->cfg.agent_path);
	memcpy(dir, path, sizeof(dir));
	mkdir(dirname(dir), 0755);
	d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (d->lock_fd < 0) {
		snprintf(err, errlen, "%.200s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB)) {
		snprintf(err, errlen, "another semvisord is already serving %.107s (%s is locked)",
			 d->cfg.agent_path, path);
		return -1;
	}
	return 0;
}

/* Sockets passed by systemd (semvisord.socket), by name. */
int systemd_socket(const char *want)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(0, &names), fd = -1;

	for (int i = 0; i < n; i++) {
		if ((names && names[i] && !strcmp(names[i], want)) ||
		    (n == 1 && !strcmp(want, "agent") &&
		     (!names || !names[i] || !strcmp(names[i], "unknown"))))
			fd = SD_LISTEN_FDS_START + i;
	}
	if (names) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	return fd;
}

/* ---- the loop ---- */

/*
 * Workers when none are asked for. On 2 CPUs one worker serves calls fastest (nt_super_new()
 * says why): its receiver and the bulk lane's worker already make three threads. Listeners,
 * unlike one program's calls, are served in parallel by the kernel, so where CPUs are many,
 * more workers serve more tenants at once; a CPU in four leaves the rest to the tenants.
 */
static int default_workers(void)
{
	cpu_set_t cpus;
	int n;

	if (sched_getaffinity(0, sizeof(cpus), &cpus))
		return 1;
	n = CPU_COUNT(&cpus) / 4;
	return n < 1 ? 1 : n > 8 ? 8 : n;
}

static struct daemon the_daemon;

static ev_io agent_w;
static ev_async resume_w;

static void on_agent(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	/* full: leave the backlog alone until a receive finishes (agent_resume) */
	if (!agent_accept(&the_daemon, w->fd))
		ev_io_stop(loop, w);
}

static void on_resume(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	if (!ev_is_active(&agent_w))
		ev_io_start(loop, &agent_w);
}

void agent_resume(struct daemon *d)
{
	ev_async_send((struct ev_loop *)d->loop, &resume_w);
}

static void status(struct daemon *d)
{
	struct nt_stats st;
	uint64_t calls = 0;

	nt_super_stats(d->super, &st);
	for (int i = 0; i < NT_NCALLS; i++)
		calls += st.calls[i];
	sd_notifyf(0, "STATUS=serving %d clients; %llu calls served", nt_super_nlisteners(d->super),
		   (unsigned long long)calls);
}

static void on_status(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	status(&the_daemon);
}

/* The journal grown past checkpoint_bytes: a checkpoint takes its place. */
static void on_journal(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = &the_daemon;
	size_t size = nt_super_journal_size(d->super);
	ev_tstamp t0;
	int rc;

	(void)loop;
	(void)w;
	(void)revents;
	if (size < (size_t)d->cfg.checkpoint_bytes)
		return;
	t0 = ev_time();
	rc = nt_super_checkpoint(d->super);
	if (rc)
		dlog(d, "journal: checkpoint failed: %s (the journal grows on)", strerror(-rc));
	else
		dlog(d, "journal: checkpoint after %zu bytes (%.1f ms)", size,
		     (ev_time() - t0) * 1e3);
}

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	dlog(&the_daemon, "signal %d: stopping", w->signum);
	sd_notify(0, "STOPPING=1");
	ev_break(loop, EVBREAK_ALL);
}

/* SIGHUP: re-read the configuration; apply what can change live. */
static void on_reload(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = &the_daemon;
	struct cfg fresh;
	char line[512];

	(void)loop;
	(void)w;
	(void)revents;
	sd_notify(0, "RELOADING=1");
	if (load_config(d, &fresh)) {
		dlog(d, "reload: keeping the running configuration");
	} else {
		struct sv_limits lim;
		int rc;

		/* Limits no longer given anywhere go back to the host's, as at a start. */
		if (fresh.have_limits)
			lim = fresh.limits;
		else
			sv_limits_host(&lim);
		rc = nt_super_set_limits(d->super, NULL, &lim);
		if (rc)
			dlog(d, "reload: limits: %s", strerror(-rc));
		else
			dlog(d, "reload: limits now %d %d %d %d", lim.semmsl, lim.semmns,
			     lim.semopm, lim.semmni);
		d->cfg.max_clients = fresh.max_clients;
		/* existing sets stay; only new ones are held to the new maxima */
		d->cfg.budget = fresh.budget;
		sv_budget_set_limits(d->budget, &fresh.budget);
		cfg_budget_str(&fresh.budget, line, sizeof(line));
		dlog(d, "reload: budget now %s", line);
		if (strcmp(fresh.agent_path, d->cfg.agent_path) ||
		    strcmp(fresh.control_path, d->cfg.control_path) ||
		    strcmp(fresh.metrics_listen, d->cfg.metrics_listen) ||
		    fresh.workers != d->cfg.workers || fresh.ns_policy != d->cfg.ns_policy ||
		    fresh.trace != d->cfg.trace || fresh.fast_path != d->cfg.fast_path)
			dlog(d, "reload: sockets, workers, namespaces, trace and fast_path change "
				"only at a restart");
	}
	sd_notify(0, "READY=1");
	status(d);
}

int main(int argc, char **argv)
{
	struct daemon *d = &the_daemon;
	struct nt_config nc = { 0 };
	struct ev_loop *loop;
	ev_signal sig_term, sig_int, sig_hup;
	sigset_t chld;
	ev_timer status_w, journal_w;
	struct rlimit rl;
	bool check = false;
	char err[512];
	int rc;

	if (parse_args(argc, argv, d, &check))
		return 1;
	if (check) {
		printf("semvisord: configuration OK: agent %s, control %s, namespaces %s\n",
		       d->cfg.agent_path, d->cfg.control_path[0] ? d->cfg.control_path : "(none)",
		       cfg_ns_policy_name(d->cfg.ns_policy));
		cfg_budget_str(&d->cfg.budget, err, sizeof(err));
		printf("semvisord: budget: %s; 0: no bound\n", err);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	/* SIGCHLD is for the tracers' threads alone, so blocked in every thread (ptrace.h) */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	/*
	 * A tenant's big sets are mapped on their own and unmapped when freed. glibc would raise
	 * its mmap threshold after the first such free and serve later ones from a worker's arena,
	 * whose top chunk (up to twice the threshold) no trim hands back: set, it stays fixed.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* a pidfd per confined thread and process: take every fd we may */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	setvbuf(stderr, NULL, _IOLBF, 0);

	sv_thread_register(); /* this thread saves and restores the engine's state (fdstore.c) */
	nc.nworkers = d->cfg.workers ? d->cfg.workers : default_workers();
	nc.bulk_lane = true; /* tenants: a heavy one must not hold up the others */
	nc.limits = d->cfg.have_limits ? &d->cfg.limits : NULL;
	nc.trace = d->cfg.trace ? stderr : NULL;
	nc.no_fast_path = !d->cfg.fast_path;
	d->budget = sv_budget_new(&d->cfg.budget);
	if (!d->budget) {
		dlog(d, "out of memory");
		return 1;
	}
	nc.budget = d->budget;
	d->super = nt_super_new(&nc, err, sizeof(err));
	if (!d->super) {
		dlog(d, "%s", err);
		return 1;
	}

	/*
	 * One daemon per agent socket, decided by a lock, not by a connect() probe that two
	 * daemons starting at once could both pass.
	 */
	if (lock_instance(d, err, sizeof(err))) {
		dlog(d, "%s", err);
		return 1;
	}
	d->agent_fd = systemd_socket("agent");
	if (d->agent_fd >= 0) {
		/* systemd passes it blocking; accepting until EAGAIN needs it non-blocking */
		int fl = fcntl(d->agent_fd, F_GETFL);

		if (fl < 0 || fcntl(d->agent_fd, F_SETFL, fl | O_NONBLOCK)) {
			dlog(d, "agent socket: %s", strerror(errno));
			return 1;
		}
	} else {
		gid_t group = (gid_t)-1;

		if (d->cfg.agent_group[0]) {
			struct group *g = getgrnam(d->cfg.agent_group);

			if (!g) {
				dlog(d, "agent socket: no group named '%s'", d->cfg.agent_group);
				return 1;
			}
			group = g->gr_gid;
		}
		if (usock_listen(&d->agent_sock, d->cfg.agent_path, d->cfg.agent_mode, group, 128,
				 "agent socket", err, sizeof(err))) {
			dlog(d, "agent socket: %s", err);
			return 1;
		}
		d->agent_fd = d->agent_sock.fd;
		d->agent_bound = true;
	}
	if (ctlsock_attach(d, err, sizeof(err))) {
		dlog(d, "control socket: %s", err);
		return 1;
	}
	if (metrics_attach(d, err, sizeof(err))) {
		dlog(d, "metrics: %s", err);
		return 1;
	}
	/* the previous process's clients and state, before anything is served */
	fdstore_take(d);
	rc = nt_super_start(d->super);
	if (rc) {
		dlog(d, "starting workers: %s", strerror(-rc));
		return 1;
	}

	/*
	 * Not the default loop: its child watcher would unblock SIGCHLD in this thread and reap
	 * with waitpid(-1), taking the stops of the programs we trace (ptrace.h).
	 */
	loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!loop) {
		dlog(d, "cannot make an event loop");
		return 1;
	}
	d->loop = loop;
	ev_io_init(&agent_w, on_agent, d->agent_fd, EV_READ);
	ev_io_start(loop, &agent_w);
	ev_async_init(&resume_w, on_resume);
	ev_async_start(loop, &resume_w);
	ev_signal_init(&sig_term, on_stop, SIGTERM);
	ev_signal_init(&sig_int, on_stop, SIGINT);
	ev_signal_init(&sig_hup, on_reload, SIGHUP);
	ev_signal_start(loop, &sig_term);
	ev_signal_start(loop, &sig_int);
	ev_signal_start(loop, &sig_hup);
	ev_timer_init(&status_w, on_status, 10., 10.);
	ev_timer_start(loop, &status_w);
	ev_timer_init(&journal_w, on_journal, 0.5, 0.5);
	ev_timer_start(loop, &journal_w);

	/* before "serving:", which says the daemon is up: whoever waits for it may scrape */
	if (d->metrics)
		dlog(d, "metrics: http://%s/metrics", ctl_http_where(d->metrics));
	dlog(d, "serving: agent %s%s, control %s, namespaces %s",
	     d->agent_bound ? d->cfg.agent_path : "from systemd",
	     d->agent_bound ? "" : " (socket activation)",
	     d->cfg.control_path[0] ? d->cfg.control_path : "(none)",
	     cfg_ns_policy_name(d->cfg.ns_policy));
	sd_notify(0, "READY=1");
	status(d);
	/* tests of crash safety only (util/killpoint.h): die at a chosen point, from here on */
	if (getenv("SEMVISORD_TEST_DIE_AT") && sv_kp_arm(getenv("SEMVISORD_TEST_DIE_AT")))
		dlog(d, "SEMVISORD_TEST_DIE_AT: no such kill point");

	ev_run(loop, 0);

	/*
	 * Stop: no new clients (those being received are served first, so each is in the fd
	 * store), then the workers; what is parked stays unanswered in the kernel, and the
	 * state, saved, lets the next process answer it.
	 */
	ev_io_stop(loop, &agent_w);
	if (d->agent_bound)
		usock_close(&d->agent_sock); /* (its file only if it is still ours) */
	else
		close(d->agent_fd);
	agent_drain(d);
	ctlsock_detach(d);
	metrics_detach(d);
	nt_super_stop(d->super);
	nt_super_wait(d->super);
	fdstore_save(d);
	dlog(d, "stopped");
	return 0;
}

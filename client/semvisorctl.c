/* SPDX-License-Identifier: MIT */
/*
 * semvisorctl: the command-line client of semvisor's control socket (proto/semvisor.proto).
 *
 * One connection, one request (top: one Watch), output as text for people, --json for programs,
 * or the Prometheus text format (metrics). Arguments are checked here, before connecting, so a
 * typo is a usage error (2) and never reaches the server; what the server refuses maps to the
 * exit statuses of ctl.h, which --help documents.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "util/version.h"

enum {
	O_JSON = 1 << 0,
	O_NS = 1 << 1,
	O_INTERVAL = 1 << 2,
	O_COUNT = 1 << 3,
};

struct ctx {
	struct rpc rpc;
	const char *socket;
	int timeout_ms;
	bool json;
	const char *ns;
	uint32_t interval_ms;
	uint32_t count;
	char **args;
	int nargs;
};

struct cmd {
	const char *name;
	int (*run)(struct ctx *);
	int nargs;     /* exactly this many arguments */
	unsigned opts; /* options that apply besides --socket, --timeout, --help */
	const char *synopsis;
	const char *help;
};

#define COMMON_OPTS                                                                                \
	"  -s, --socket=PATH    the control socket (default: $SEMVISOR_CONTROL, else\n"            \
	"                       " DEFAULT_SOCKET ")\n"                                             \
	"  -t, --timeout=SEC    give up when a reply takes longer (default 10)\n"

#define EXIT_TEXT                                                                                  \
	"Exit status:\n"                                                                           \
	"  0  success\n"                                                                           \
	"  1  the server refused the request or could not carry it out (no such set or\n"          \
	"     namespace, several namespaces have that id, limits out of range, server busy)\n"     \
	"  2  usage error: unknown command or option, bad argument\n"                              \
	"  3  cannot connect: no socket at the path, nobody listening, or no reply in time\n"      \
	"  4  permission denied: the socket is closed to you, the command is privileged, or\n"     \
	"     the set's permissions do not let you read it (show)\n"                               \
	"  5  protocol error: a reply that cannot be read, or another protocol version\n"

/* ---- commands ---- */

static int with_reply(struct ctx *c, Semvisor__Request *req, Semvisor__Reply__BodyCase want,
		      Semvisor__Reply **out)
{
	int rc = rpc_call(&c->rpc, req, out);

	if (rc)
		return rc;
	if ((*out)->body_case != want) {
		fprintf(stderr, "semvisorctl: protocol error: the reply lacks its body\n");
		ctl_reply_free(*out);
		*out = NULL;
		return EX_PROTO;
	}
	return 0;
}

static int get_stats(struct ctx *c, bool with_clients, Semvisor__Reply **out)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;

	st.with_clients = with_clients;
	req.body_case = SEMVISOR__REQUEST__BODY_STATS;
	req.stats = &st;
	return with_reply(c, &req, SEMVISOR__REPLY__BODY_STATS, out);
}

static int cmd_stats(struct ctx *c)
{
	Semvisor__Reply *rep;
	int rc = get_stats(c, false, &rep);

	if (rc)
		return rc;
	if (c->json)
		json_stats(stdout, rep->stats);
	else
		text_stats(stdout, rep->stats);
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_metrics(struct ctx *c)
{
	Semvisor__Reply *rep;
	int rc = get_stats(c, true, &rep);

	if (rc)
		return rc;
	ctl_metrics_print(stdout, rep->stats);
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_ipcs(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	Semvisor__Reply *rep;
	int rc;

	if (c->ns)
		ls.ns = (char *)c->ns;
	req.body_case = SEMVISOR__REQUEST__BODY_LIST_SETS;
	req.list_sets = &ls;
	rc = with_reply(c, &req, SEMVISOR__REPLY__BODY_SETS, &rep);
	if (rc)
		return rc;
	if (c->json)
		json_sets(stdout, rep->sets);
	else
		text_sets(stdout, rep->sets);
	ctl_reply_free(rep);
	return EX_OK;
}

static int parse_id(const char *s, int32_t *id)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX) {
		fprintf(stderr, "semvisorctl: '%s' is not a set id (a number from 0 to %d)\n", s,
			INT32_MAX);
		return -1;
	}
	*id = (int32_t)v;
	return 0;
}

static int cmd_show(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__Reply *rep;
	int rc;

	if (parse_id(c->args[0], &sh.id))
		return EX_USAGE;
	if (c->ns)
		sh.ns = (char *)c->ns;
	req.body_case = SEMVISOR__REQUEST__BODY_SHOW_SET;
	req.show_set = &sh;
	rc = with_reply(c, &req, SEMVISOR__REPLY__BODY_SET, &rep);
	if (rc)
		return rc;
	if (c->json)
		json_set(stdout, rep->set);
	else
		text_set(stdout, rep->set);
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_clients(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__ListClientsRequest lc = SEMVISOR__LIST_CLIENTS_REQUEST__INIT;
	Semvisor__Reply *rep;
	int rc;

	req.body_case = SEMVISOR__REQUEST__BODY_LIST_CLIENTS;
	req.list_clients = &lc;
	rc = with_reply(c, &req, SEMVISOR__REPLY__BODY_CLIENTS, &rep);
	if (rc)
		return rc;
	if (c->json)
		json_clients(stdout, rep->clients->clients, rep->clients->n_clients);
	else
		text_clients(stdout, rep->clients->clients, rep->clients->n_clients);
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_top(struct ctx *c)
{
	struct top_opts o = { .interval_ms = c->interval_ms, .count = c->count, .json = c->json };

	return top_run(&c->rpc, &o);
}

static int cmd_rm(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__Reply *rep;
	int rc;

	if (parse_id(c->args[0], &rm.id))
		return EX_USAGE;
	if (c->ns)
		rm.ns = (char *)c->ns;
	req.body_case = SEMVISOR__REQUEST__BODY_REMOVE_SET;
	req.remove_set = &rm;
	rc = rpc_call(&c->rpc, &req, &rep);
	if (rc)
		return rc;
	if (c->json) {
		json_print(stdout, json_pack("{s:I}", "removed", (json_int_t)rm.id));
	}
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_reset(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__ResetRequest rs = SEMVISOR__RESET_REQUEST__INIT;
	Semvisor__Reply *rep;
	int rc;

	req.body_case = SEMVISOR__REQUEST__BODY_RESET;
	req.reset = &rs;
	rc = rpc_call(&c->rpc, &req, &rep);
	if (rc)
		return rc;
	if (c->json)
		printf("{\"reset\":true}\n");
	ctl_reply_free(rep);
	return EX_OK;
}

static int cmd_limits(struct ctx *c)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__Reply *rep;
	char extra;
	int rc;

	if (sscanf(c->args[0], "%d,%d,%d,%d%c", &sl.semmsl, &sl.semmns, &sl.semopm, &sl.semmni,
		   &extra) != 4 ||
	    sl.semmsl < 1 || sl.semmns < 1 || sl.semopm < 1 || sl.semmni < 0 || sl.semmni > 32768) {
		fprintf(
		    stderr,
		    "semvisorctl: limits wants MSL,MNS,OPM,MNI: three numbers of at least 1 and "
		    "MNI from 0 to 32768, not '%s'\n",
		    c->args[0]);
		return EX_USAGE;
	}
	if (c->ns)
		sl.ns = (char *)c->ns;
	req.body_case = SEMVISOR__REQUEST__BODY_SET_LIMITS;
	req.set_limits = &sl;
	rc = rpc_call(&c->rpc, &req, &rep);
	if (rc)
		return rc;
	if (rep->body_case == SEMVISOR__REPLY__BODY_LIMITS) {
		const Semvisor__Limits *l = rep->limits;

		if (c->json) {
			json_limits(stdout, l);
		} else {
			char name[128];

			printf("limits of %s: %d %d %d %d\n",
			       *l->ns ? text_safe(l->ns, name, sizeof(name))
				      : "every namespace (and new ones)",
			       l->semmsl, l->semmns, l->semopm, l->semmni);
		}
	}
	ctl_reply_free(rep);
	return EX_OK;
}

static const struct cmd cmds[] = {
	{ "stats", cmd_stats, 0, O_JSON, "stats [--json]",
	  "Print the supervisor's counters since it started (or since the last reset):\n"
	  "calls by system call and by semctl command, errors by errno, operations that\n"
	  "waited and how their waits ended (woken, timed out, interrupted, rolled back\n"
	  "because the answer could not be delivered, kept), service time (notification\n"
	  "received to answered) and wait time as quantiles of log2 histograms (\"<= X\":\n"
	  "the bucket's upper bound), clients, lock contention (spins, sleeps, cancels),\n"
	  "and each namespace's sets, semaphores, waiters and limits.\n"
	  "\n"
	  "With --json: one object with the members server, calls, semctl_commands,\n"
	  "errors, waits, service_time, wait_time (count, median_le_ns, p99_le_ns,\n"
	  "buckets[{le_ns, count}], le_ns null for the open-ended last bucket), listeners,\n"
	  "processes_exited, namespaces_ended, budget_refused (calls the memory budget\n"
	  "refused) and budget_refused_kind (semaphores, sets, undos, waiters, namespaces:\n"
	  "by the bound that refused), bulk_calls, fast_ops (semops programs did in their\n"
	  "own memory with semvisor-run --fast, every one made before the request),\n"
	  "busy_probes (of the semtimedop calls and EAGAIN errors: tries of --fast semops\n"
	  "waiting in the program that found the semaphore still short), lock and\n"
	  "namespaces.\n" },
	{ "ipcs", cmd_ipcs, 0, O_JSON | O_NS, "ipcs [--ns NAME] [--json]",
	  "List the semaphore sets, as ipcs -s does, in every namespace (or only NAME):\n"
	  "NAMESPACE, KEY (hex), SEMID, OWNER, PERMS (octal), NSEMS, LAST-SEMOP and\n"
	  "LAST-CHANGE (local time; \"never\"). Namespaces are named ipc:[INODE] after the\n"
	  "IPC namespace of the programs served, or by the name semvisord was given; one\n"
	  "where a Kubernetes pod's containers are served is shown as NAMESPACE/POD, the\n"
	  "pod's names, and --ns takes either name.\n"
	  "\n"
	  "With --json: {\"sets\": [{namespace, id, key, key_hex, uid, owner, gid, group,\n"
	  "cuid, cgid, mode, perms, nsems, otime, ctime, lock_spun, lock_slept,\n"
	  "pod_namespace, pod}]} (the pod's names \"\" where there is none),\n"
	  "times in seconds since the epoch (0: never). Every set is listed, as ipcs -s\n"
	  "lists them to anyone; the lock counters of a set you may not read are null.\n" },
	{ "show", cmd_show, 1, O_JSON | O_NS, "show ID [--ns NAME] [--json]",
	  "Show set ID: its key, owner, creator, permissions and times, then one line per\n"
	  "semaphore: SEMNUM, VALUE, NCNT (waiting for it to grow), ZCNT (waiting for\n"
	  "zero), PID (the last process to operate on it, in the server's pid namespace),\n"
	  "OPS (completed operations on it, those programs did in their own memory under\n"
	  "semvisor-run --fast included, as they counted them), WAITS (operations that\n"
	  "waited on it), and its lock's contention; and the set's semops done in the\n"
	  "programs' own memory, as they counted them. Ids are per\n"
	  "namespace: when several namespaces have a set ID, name one with --ns (the\n"
	  "error lists them). Only for a set whose permissions let you read it, as semctl\n"
	  "checks them (root and the server's user read every set); another is refused\n"
	  "with exit status 4.\n"
	  "\n"
	  "With --json: {\"set\": {as in ipcs, and fast_ops}, \"semaphores\": [{num,\n"
	  "value, pid, ncnt, zcnt, ops, waits, lock_spun, lock_slept}]}.\n" },
	{ "clients", cmd_clients, 0, O_JSON, "clients [--json]",
	  "List the clients served: each program tree started with semvisor-run and each\n"
	  "container, with its namespace (the fixed one, else the IPC namespace it was\n"
	  "last seen in), the calls received from it, its calls waiting now, and whether\n"
	  "its filter reports namespace changes. A container is named\n"
	  "NAMESPACE/POD/CONTAINER where its runtime gave Kubernetes' names, else by its\n"
	  "id and pid.\n"
	  "\n"
	  "With --json: {\"clients\": [{name, namespace, ns_traps, calls, parked,\n"
	  "pod_namespace, pod, container}]}.\n" },
	{ "top", cmd_top, 0, O_JSON | O_INTERVAL | O_COUNT,
	  "top [--interval SEC] [--count N] [--json]",
	  "A live view: totals and per-second rates of calls, waits, errors and lock\n"
	  "contention, service and wait time quantiles over everything and over the last\n"
	  "interval, namespaces, and the clients busiest over the last interval. On a\n"
	  "terminal the screen is redrawn every --interval seconds (default 2, from 0.1\n"
	  "to 3600) until q, Ctrl-C, or --count refreshes. When standard output is not a\n"
	  "terminal, --count snapshots (default 1) are printed one after another.\n"
	  "\n"
	  "  -i, --interval=SEC   seconds between snapshots\n"
	  "  -c, --count=N        stop after N snapshots\n"
	  "\n"
	  "With --json: one stats object (as stats --json) per line, per snapshot.\n" },
	{ "metrics", cmd_metrics, 0, 0, "metrics",
	  "Print every counter in the Prometheus text exposition format (version 0.0.4),\n"
	  "for node_exporter's textfile collector or any scraper: # HELP and # TYPE for\n"
	  "each family, counters ending in _total, durations in seconds, and the service\n"
	  "and wait time histograms as _bucket{le}, _sum (exact) and _count. An IPC\n"
	  "namespace is the label ipc_namespace; namespace, pod and container are\n"
	  "Kubernetes' names, where a container's runtime gave them.\n"
	  "\n"
	  "For node_exporter's textfile collector, write a temporary file and rename it,\n"
	  "so that a scrape never reads half a file (semvisor-metrics.timer does this\n"
	  "every 15 s):\n"
	  "  semvisorctl metrics > /var/lib/node_exporter/semvisor.prom.$$ &&\n"
	  "  mv /var/lib/node_exporter/semvisor.prom.$$ /var/lib/node_exporter/semvisor.prom\n" },
	{ "rm", cmd_rm, 1, O_JSON | O_NS, "rm ID [--ns NAME] [--json]",
	  "Remove set ID as ipcrm -s ID (semctl IPC_RMID) would, whoever owns it: every\n"
	  "operation waiting on it fails with EIDRM. When several namespaces have a set\n"
	  "ID, name one with --ns. Privileged: only root and the user the server runs as\n"
	  "(the socket's owner) may do this.\n" },
	{ "reset", cmd_reset, 0, O_JSON, "reset [--json]",
	  "Zero every counter: calls, errors, waits, histograms, and the per-set and\n"
	  "per-semaphore counters (stats then counts from now; uptime does not change).\n"
	  "Privileged: only root and the user the server runs as may do this.\n" },
	{ "limits", cmd_limits, 1, O_JSON | O_NS, "limits MSL,MNS,OPM,MNI [--ns NAME] [--json]",
	  "Set the semaphore limits, as writing /proc/sys/kernel/sem does: semaphores per\n"
	  "set (MSL), semaphores in all (MNS), operations per semop call (OPM), sets (MNI,\n"
	  "at most 32768). The first three must be at least 1. Without --ns they apply to\n"
	  "every namespace and to those created later. Sets that already exist are not\n"
	  "changed. Privileged: only root and the user the server runs as may do this.\n"
	  "\n"
	  "Example: semvisorctl limits 250,32000,32,128\n" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: semvisorctl [OPTION]... COMMAND [ARGUMENT]...\n"
	       "Look at and administer a semvisor supervisor (semvisord, or semvisor-run\n"
	       "--control) through its control socket: the System V semaphores it serves and\n"
	       "what serving them costs.\n"
	       "\n"
	       "Commands:\n"
	       "  stats                  counters: calls, errors, waits, times, locks, namespaces\n"
	       "  ipcs                   the semaphore sets, as ipcs -s lists them\n"
	       "  show ID                one set: each semaphore's value, waiters, pid, counters\n"
	       "  clients                the programs and containers served\n"
	       "  top                    a live view, refreshed every --interval seconds\n"
	       "  metrics                every counter, in the Prometheus text format\n"
	       "  rm ID                  remove a set, as ipcrm -s does            (privileged)\n"
	       "  reset                  zero every counter                        (privileged)\n"
	       "  limits MSL,MNS,OPM,MNI the limits of /proc/sys/kernel/sem       (privileged)\n"
	       "  help [COMMAND]         this text, or a command's\n"
	       "\n"
	       "Options:\n" COMMON_OPTS
	       "  -j, --json           JSON instead of text (every command but metrics)\n"
	       "  -n, --ns=NAME        the namespace (ipcs, show, rm, limits)\n"
	       "  -i, --interval=SEC   top: seconds between refreshes (default 2)\n"
	       "  -c, --count=N        top: stop after N refreshes\n"
	       "  -h, --help           this text; after a command, that command's\n"
	       "  -V, --version        the version\n"
	       "\n"
	       "Who may do what: the socket's file permissions decide who can connect (by\n"
	       "default its owner and group); anyone who can connect may read; rm, reset and\n"
	       "limits are refused unless you are root or the user the server runs as.\n"
	       "\n" EXIT_TEXT "\n"
	       "Environment:\n"
	       "  SEMVISOR_CONTROL     the control socket, unless --socket is given\n"
	       "\n"
	       "Examples:\n"
	       "  semvisorctl ipcs\n"
	       "  semvisorctl show 3 --ns 'ipc:[4026531839]'\n"
	       "  semvisorctl --socket /tmp/app.sock top --interval 0.5\n"
	       "  semvisorctl stats --json | jq .calls\n");
}

static void cmd_usage(FILE *f, const struct cmd *c)
{
	fprintf(f,
		"Usage: semvisorctl [OPTION]... %s\n\n%s\nOptions:\n" COMMON_OPTS "%s%s"
		"  -h, --help           this text\n\n" EXIT_TEXT,
		c->synopsis, c->help,
		c->opts & O_JSON ? "  -j, --json           JSON instead of text\n" : "",
		c->opts & O_NS ? "  -n, --ns=NAME        the namespace, as stats and ipcs name it\n"
			       : "");
}

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

static int bad_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("semvisorctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'semvisorctl %s--help' for more information.\n", cmd ? cmd : "");
	return EX_USAGE;
}

/* Seconds as "2", "0.5": into ms within [lo_ms, hi_ms]. */
static int parse_seconds(const char *s, uint32_t lo_ms, uint32_t hi_ms, uint32_t *ms)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v * 1000 >= lo_ms) || !(v * 1000 <= hi_ms))
		return -1;
	*ms = (uint32_t)(v * 1000 + 0.5);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "ns", required_argument, NULL, 'n' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctx c = { .timeout_ms = 10000, .interval_ms = 2000 };
	unsigned given = 0;
	bool help = false;
	const struct cmd *cmd;
	const char *name;
	char prefix[32];
	int opt, rc;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":s:t:jn:i:c:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			c.socket = optarg;
			break;
		case 't': {
			uint32_t ms;

			if (parse_seconds(optarg, 100, 3600000, &ms))
				return bad_usage(NULL,
						 "--timeout wants seconds from 0.1 to 3600, "
						 "not '%s'",
						 optarg);
			c.timeout_ms = (int)ms;
			break;
		}
		case 'j':
			c.json = true;
			given |= O_JSON;
			break;
		case 'n':
			if (!*optarg || strlen(optarg) > CTL_NS_NAME_MAX)
				return bad_usage(NULL,
						 "--ns wants a namespace name of 1 to %d bytes",
						 CTL_NS_NAME_MAX);
			c.ns = optarg;
			given |= O_NS;
			break;
		case 'i':
			if (parse_seconds(optarg, CTL_WATCH_MIN_MS, CTL_WATCH_MAX_MS,
					  &c.interval_ms))
				return bad_usage(NULL,
						 "--interval wants seconds from 0.1 to 3600, "
						 "not '%s'",
						 optarg);
			given |= O_INTERVAL;
			break;
		case 'c': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' || v < 1 ||
			    v > UINT32_MAX)
				return bad_usage(NULL, "--count wants a positive number, not '%s'",
						 optarg);
			c.count = (uint32_t)v;
			given |= O_COUNT;
			break;
		}
		case 'h':
			help = true;
			break;
		case 'V':
			printf("semvisorctl %s (control protocol version %d)\n", SEMVISOR_VERSION,
			       CTL_PROTO_VERSION);
			return EX_OK;
		case ':':
			return bad_usage(NULL, "option '%s' needs an argument", argv[optind - 1]);
		default:
			return bad_usage(NULL, "unknown option '%s'", argv[optind - 1]);
		}
	}

	if (optind >= argc) {
		if (help) {
			usage(stdout);
			return EX_OK;
		}
		usage(stderr);
		return EX_USAGE;
	}
	name = argv[optind];
	c.args = argv + optind + 1;
	c.nargs = argc - optind - 1;
	if (!strcmp(name, "help")) {
		if (c.nargs == 0) {
			usage(stdout);
			return EX_OK;
		}
		cmd = find_cmd(c.args[0]);
		if (!cmd || c.nargs > 1)
			return bad_usage(NULL, "no command '%s'", c.args[0]);
		cmd_usage(stdout, cmd);
		return EX_OK;
	}
	cmd = find_cmd(name);
	if (!cmd)
		return bad_usage(NULL, "no command '%s'", name);
	if (help) {
		cmd_usage(stdout, cmd);
		return EX_OK;
	}
	snprintf(prefix, sizeof(prefix), "%s ", cmd->name);
	if (given & ~cmd->opts) {
		const char *what = given & ~cmd->opts & O_JSON	     ? "--json"
				   : given & ~cmd->opts & O_NS	     ? "--ns"
				   : given & ~cmd->opts & O_INTERVAL ? "--interval"
								     : "--count";

		return bad_usage(prefix, "%s does not apply to %s", what, cmd->name);
	}
	if (c.nargs != cmd->nargs)
		return bad_usage(prefix, "%s wants %s", cmd->name,
				 cmd->nargs ? "one argument" : "no arguments");

	if (!c.socket)
		c.socket = getenv("SEMVISOR_CONTROL");
	if (!c.socket || !*c.socket)
		c.socket = DEFAULT_SOCKET;
	rc = rpc_connect(&c.rpc, c.socket, c.timeout_ms);
	if (rc)
		return rc;
	rc = cmd->run(&c);
	rpc_close(&c.rpc);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "semvisorctl: writing the output: %s\n", strerror(errno));
		return rc ? rc : EX_REFUSED;
	}
	return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * semvisord's metrics over HTTP (--metrics-listen, semvisord-metrics.socket), as Prometheus and
 * a hostile network peer see them: the scrape is the text `semvisorctl metrics` prints and
 * passes `promtool check metrics`; only GET and HEAD of /metrics are answered; a dead IPC
 * namespace's series go; peers that connect and say nothing, or say too much, neither hold the
 * endpoint nor crash it; under socket activation the first scrape starts the daemon.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "tests/60-daemon-harness.h"

TestSuite(daemon_metrics, .timeout = 90, .fini = dh_cleanup);

#define KEY "0x5e3a0e01"

/* A connected TCP socket to 127.0.0.1:port. */
static int tcp_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect to port %d: %s",
		     port, strerror(errno));
	return fd;
}

/* Everything fd sends until it closes, within timeout_ms (NULL if it did not close by then). */
static char *read_all(int fd, int timeout_ms)
{
	int64_t end = dh_now_ms() + timeout_ms;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);

	cr_assert(buf);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = end - dh_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) != 1) {
			free(buf);
			return NULL;
		}
		if (len + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == ECONNRESET)
			n = 0;
		cr_assert(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

/* Send request whole to 127.0.0.1:port and return the answer (the connection is closed). */
static char *http(int port, const char *request)
{
	int fd = tcp_connect(port);
	size_t len = strlen(request);
	char *answer;

	cr_assert_eq(write(fd, request, len), (ssize_t)len, "write: %s", strerror(errno));
	answer = read_all(fd, 10000);
	close(fd);
	cr_assert(answer, "no answer in 10 s to:\n%s", request);
	return answer;
}

/* The answer's body, after the blank line that ends its head. */
static const char *body_of(const char *answer)
{
	const char *p = strstr(answer, "\r\n\r\n");

	cr_assert(p, "no end of the head in:\n%.400s", answer);
	return p + 4;
}

/* A header's value (up to its CRLF) into buf; NULL if the head has none. */
static const char *header(const char *answer, const char *name, char *buf, size_t len)
{
	const char *end = strstr(answer, "\r\n\r\n"), *p = answer;
	size_t nl = strlen(name);

	while ((p = strstr(p, "\r\n")) && p < end) {
		p += 2;
		if (!strncasecmp(p, name, nl) && p[nl] == ':') {
			p += nl + 1;
			p += strspn(p, " ");
			snprintf(buf, len, "%.*s", (int)strcspn(p, "\r\n"), p);
			return buf;
		}
	}
	return NULL;
}

/* The port in the daemon's "metrics: http://127.0.0.1:PORT/metrics" line. */
static int logged_port(const struct dh_daemon *d)
{
	char *log = dh_slurp(d->log);
	const char *p = strstr(log, "semvisord: metrics: http://127.0.0.1:");
	int port;

	cr_assert(p, "no metrics line in the log:\n%s", log);
	port = atoi(p + strlen("semvisord: metrics: http://127.0.0.1:"));
	cr_assert(port > 0, "%s", log);
	free(log);
	return port;
}

/* The "# TYPE" lines of a metrics text, in order: its families. */
static char *families(const char *text)
{
	size_t cap = strlen(text) + 1, len = 0;
	char *out = malloc(cap);

	cr_assert(out);
	for (const char *p = text; (p = strstr(p, "# TYPE ")); p++) {
		size_t n = strcspn(p, "\n") + 1;

		memcpy(out + len, p, n);
		len += n;
	}
	out[len] = '\0';
	return out;
}

/* promtool check metrics on text: its exit status and what it said. */
static int promtool(const char *text, char **said)
{
	char in[PATH_MAX], cmd[2 * PATH_MAX + 64];
	int rc;

	snprintf(in, sizeof(in), "%s", dh_path("scrape.txt"));
	dh_write_file(in, "%s", text);
	snprintf(cmd, sizeof(cmd), "promtool check metrics <%s >%s 2>&1", in,
		 dh_path("promtool.log"));
	rc = system(cmd);
	*said = dh_slurp(dh_path("promtool.log"));
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void start_with_http(struct dh_daemon *d, char *ctlpath, size_t len, const char *extra)
{
	static char ctl[PATH_MAX + 32];

	snprintf(ctlpath, len, "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(d, "d",
			(const char *const[]){ ctl, "--metrics-listen=127.0.0.1:0", extra, NULL });
}

/*
 * A scrape: 200 with Prometheus' content type and an exact Content-Length; the same families
 * as `semvisorctl metrics`, counting what the daemon served; promtool finds nothing to say.
 */
Test(daemon_metrics, scrape)
{
	char ctlpath[PATH_MAX], buf[128], *ans, *text, *said, *fa, *fb;
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctlpath, "metrics", NULL };
	struct dh_daemon d;
	const char *body;
	int port, rc;

	dh_setup();
	if (system("promtool --version >/dev/null 2>&1") != 0)
		cr_assert_fail("promtool is not installed (Debian package prometheus; make deps)");
	start_with_http(&d, ctlpath, sizeof(ctlpath), NULL);
	port = logged_port(&d);
	rc = DH_SEM(d.sock, &text, "post", KEY, "3");
	cr_assert_eq(rc, 0, "%s", text);
	free(text);

	ans = http(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
	cr_assert(!strncmp(ans, "HTTP/1.1 200 OK\r\n", 17), "%.300s", ans);
	cr_assert_str_eq(header(ans, "Content-Type", buf, sizeof(buf)),
			 "text/plain; version=0.0.4; charset=utf-8");
	body = body_of(ans);
	cr_assert(header(ans, "Content-Length", buf, sizeof(buf)));
	cr_assert_eq(strtoul(buf, NULL, 10), strlen(body), "Content-Length %s, body %zu bytes", buf,
		     strlen(body));
	cr_assert(strstr(body, "\nsemvisor_calls_total{syscall=\"semget\"} 1\n"),
		  "the scrape does not count the program's semget:\n%s", body);
	cr_assert(strstr(body, "\nsemvisor_build_info{version="), "%s", body);
	cr_assert(strstr(body, "\nsemvisor_start_time_seconds "), "%s", body);
	rc = promtool(body, &said);
	cr_assert_eq(rc, 0, "promtool check metrics: exit %d:\n%s", rc, said);
	cr_assert_str_eq(said, "", "promtool check metrics has remarks:\n%s", said);
	free(said);

	cr_assert_eq(dh_run(argv, 10000, &text), 0, "%s", text);
	fa = families(body);
	fb = families(text);
	cr_assert_str_eq(fa, fb, "the scrape and semvisorctl metrics differ in families");
	free(fa);
	free(fb);
	free(text);
	free(ans);

	/* HEAD: the same head, no body; a query string changes nothing */
	ans = http(port, "HEAD /metrics?x=1 HTTP/1.0\r\n\r\n");
	cr_assert(!strncmp(ans, "HTTP/1.1 200 OK\r\n", 17), "%.300s", ans);
	cr_assert(header(ans, "Content-Length", buf, sizeof(buf)) && atoi(buf) > 1000, "%s", ans);
	cr_assert_str_eq(body_of(ans), "", "HEAD has a body");
	free(ans);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
}

/* What is not a scrape gets the status that says why, and changes nothing. */
Test(daemon_metrics, not_a_scrape)
{
	static const struct {
		const char *request, *status;
	} cases[] = {
		{ "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nreset", "405 " },
		{ "DELETE /metrics HTTP/1.1\r\n\r\n", "405 " },
		{ "GET / HTTP/1.1\r\n\r\n", "404 " },
		{ "GET /metrics/../debug HTTP/1.1\r\n\r\n", "404 " },
		{ "GET /metrics\r\n\r\n", "400 " },
		{ "GET /metrics SPDY/3\r\n\r\n", "400 " },
		{ "\r\n\r\n", "400 " },
		{ "GET /metrics HTTP/1.1\n\n", "200 " }, /* bare LFs, as old tools send */
	};
	char ctlpath[PATH_MAX], buf[128], *ans, *big;
	struct dh_daemon d;
	int port;

	dh_setup();
	start_with_http(&d, ctlpath, sizeof(ctlpath), NULL);
	port = logged_port(&d);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ans = http(port, cases[i].request);
		cr_assert(!strncmp(ans + 9, cases[i].status, 4), "'%s' got:\n%.300s",
			  cases[i].request, ans);
		if (!strcmp(cases[i].status, "405 "))
			cr_assert_str_eq(header(ans, "Allow", buf, sizeof(buf)), "GET, HEAD");
		free(ans);
	}

	/* a head past 8 KiB: refused whole, not read on for ever */
	big = malloc(20000);
	cr_assert(big);
	strcpy(big, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	memset(big + strlen(big), 'a', 12000);
	big[31 + 12000] = '\0';
	strcat(big, "\r\n\r\n");
	ans = http(port, big);
	cr_assert(!strncmp(ans, "HTTP/1.1 431 ", 13), "%.300s", ans);
	free(ans);
	free(big);
	dh_daemon_alive(&d);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
}

/*
 * Peers that connect and say nothing, or half a request: more of them than the endpoint keeps
 * do not lock a scraper out (the oldest go at once), and the rest are closed, unanswered, once
 * their time (3 s here) is up.
 */
Test(daemon_metrics, silent_peers)
{
	char ctlpath[PATH_MAX], *ans;
	int fds[40], port;
	struct dh_daemon d;
	struct pollfd last;

	dh_setup();
	start_with_http(&d, ctlpath, sizeof(ctlpath), "--set=metrics_timeout_ms=3000");
	port = logged_port(&d);
	for (int i = 0; i < 40; i++) {
		fds[i] = tcp_connect(port);
		if (i % 2)
			cr_assert_eq(write(fds[i], "GET /metr", 9), 9);
	}
	ans = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	cr_assert(!strncmp(ans, "HTTP/1.1 200 OK\r\n", 17), "%.300s", ans);
	free(ans);
	/* answered while the newest silent peer is still connected: no wait for time-outs */
	last = (struct pollfd){ .fd = fds[39], .events = POLLIN };
	cr_assert_eq(poll(&last, 1, 0), 0, "the scrape was answered only once peers timed out");
	for (int i = 0; i < 40; i++) {
		char *got = read_all(fds[i], 6000);

		cr_assert(got, "silent connection %d is still open after 6 s", i);
		cr_assert_str_eq(got, "", "silent connection %d got an answer: %.200s", i, got);
		free(got);
		close(fds[i]);
	}
	dh_daemon_alive(&d);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
}

/*
 * A container's IPC namespace has series while it lives; once it is gone its series go, so
 * that Prometheus marks them stale instead of carrying dead namespaces for ever.
 */
Test(daemon_metrics, dead_namespace_series_go)
{
	char ctlpath[PATH_MAX], name[64], mine[64], want[160], *ans, *out;
	struct dh_daemon d;
	pid_t holder;
	int port, st;

	dh_setup();
	start_with_http(&d, ctlpath, sizeof(ctlpath), NULL);
	port = logged_port(&d);
	holder = dh_spawn((const char *const[]){ "unshare", "--ipc", "sleep", "60", NULL },
			  dh_path("holder.log"));
	dh_ns_name(getpid(), mine, sizeof(mine));
	for (int i = 0; i < 200; i++) {
		dh_ns_name(holder, name, sizeof(name));
		if (strcmp(name, mine))
			break;
		dh_sleep_ms(5);
	}
	cr_assert_str_neq(name, mine, "unshare --ipc made no namespace");
	cr_assert_eq(
	    dh_sem_in_ns(holder, d.sock, &out, (const char *const[]){ "post", KEY, "5", NULL }), 0,
	    "%s", out);
	free(out);

	snprintf(want, sizeof(want), "\nsemvisor_namespace_sets{ipc_namespace=\"%s\"} 1\n", name);
	ans = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	cr_assert(strstr(ans, want), "no '%s' while the namespace lives:\n%s", want + 1, ans);
	free(ans);

	kill(holder, SIGKILL);
	cr_assert(dh_wait(holder, 5000, &st));
	snprintf(want, sizeof(want), "ipc_namespace=\"%s\"", name);
	for (int i = 0;; i++) {
		ans = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
		if (!strstr(ans, want))
			break;
		cr_assert(i < 100, "%s still has series 5 s after it ended:\n%s", name, ans);
		free(ans);
		dh_sleep_ms(50);
	}
	cr_assert(strstr(ans, "\nsemvisor_namespaces_ended_total 1\n"), "%s", ans);
	free(ans);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
}

/* A free TCP port on 127.0.0.1, for a listener the test does not make itself. */
static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/*
 * semvisord-metrics.socket's way: systemd listens on the port and hands it over named
 * "metrics" with the agent socket; the first scrape starts the daemon and is answered.
 */
Test(daemon_metrics, socket_activation)
{
	char agent[PATH_MAX], log[PATH_MAX], l1[PATH_MAX + 16], l2[64], conf[PATH_MAX + 16];
	char *ans, *text;
	int port, st;
	pid_t pid;

	dh_setup();
	if (system("systemd-socket-activate --version >/dev/null 2>&1") != 0)
		cr_skip_test("systemd-socket-activate is not installed (Debian package systemd)");
	snprintf(agent, sizeof(agent), "%s", dh_path("agent.sock"));
	snprintf(log, sizeof(log), "%s", dh_path("d.log"));
	snprintf(l1, sizeof(l1), "--listen=%s", agent);
	port = free_port();
	snprintf(l2, sizeof(l2), "--listen=127.0.0.1:%d", port);
	snprintf(conf, sizeof(conf), "--config=%s", dh_empty_config());
	pid = dh_spawn((const char *const[]){ "systemd-socket-activate", l1, l2,
					      "--fdname=agent:metrics", "--", dh_daemon_bin(), conf,
					      "--control-socket=", NULL },
		       log);
	cr_assert(dh_wait_file(log, "Listening on", 2, 10000), "no sockets:\n%s", dh_slurp(log));

	ans = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	cr_assert(!strncmp(ans, "HTTP/1.1 200 OK\r\n", 17), "%.300s\nlog:\n%s", ans, dh_slurp(log));
	cr_assert(strstr(ans, "\nsemvisor_clients 0\n"), "%s", ans);
	free(ans);
	/* and the agent socket it got with it serves programs */
	cr_assert_eq(DH_SEM(agent, &text, "post", KEY, "2"), 0, "%s\nlog:\n%s", text,
		     dh_slurp(log));
	free(text);
	ans = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	cr_assert(strstr(ans, "\nsemvisor_calls_total{syscall=\"semget\"} 1\n"), "%s", ans);
	free(ans);

	text = dh_slurp(log);
	snprintf(l2, sizeof(l2), "semvisord: metrics: http://127.0.0.1:%d/metrics", port);
	cr_assert(strstr(text, l2), "no '%s' in:\n%s", l2, text);
	free(text);
	kill(pid, SIGTERM);
	cr_assert(dh_wait(pid, 5000, &st), "SIGTERM did not stop it");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", dh_status_text(st));
}

/* SPDX-License-Identifier: MIT */
/*
 * `semvisorctl top`: a Watch request, and a screen redrawn from each snapshot: totals, rates over
 * the last interval (from the difference of two snapshots, timed by the server's monotonic clock)
 * and the busiest clients. On a terminal it runs until q, Ctrl-C, or --count snapshots; stdin is
 * put in non-canonical mode (signals stay on, so Ctrl-C works) and restored on every way out.
 * Elsewhere it prints --count snapshots (default 1) without escape sequences.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

static volatile sig_atomic_t got_stop, got_winch;
static struct termios saved_tio;
static bool raw_on;

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		got_winch = 1;
	else
		got_stop = 1;
}

static void raw_off(void)
{
	if (raw_on)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	raw_on = false;
}

static void raw_enter(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio))
		return;
	t = saved_tio;
	/* keys without Enter, no echo; ISIG stays, so Ctrl-C still raises SIGINT */
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0)
		raw_on = true;
}

static uint64_t delta(uint64_t cur, uint64_t prev)
{
	/* counters only fall when someone resets them: count from zero then */
	return cur >= prev ? cur - prev : cur;
}

static double rate(uint64_t cur, uint64_t prev, double dt)
{
	return dt > 0 ? (double)delta(cur, prev) / dt : 0;
}

/* A rate for the screen: "-" before there are two snapshots to take it from. */
static const char *rs(uint64_t cur, uint64_t prev, double dt)
{
	static char ring[24][24];
	static int next;
	char *b = ring[next++ % 24];

	if (dt <= 0)
		return "-";
	snprintf(b, sizeof(ring[0]), "%.1f", rate(cur, prev, dt));
	return b;
}

static uint64_t errors_total(const Semvisor__Stats *s)
{
	uint64_t t = 0;

	for (size_t i = 0; i < s->n_errors; i++)
		t += s->errors[i]->count;
	return t;
}

static uint64_t error_count(const Semvisor__Stats *s, uint32_t code)
{
	for (size_t i = 0; s && i < s->n_errors; i++)
		if (s->errors[i]->code == code)
			return s->errors[i]->count;
	return 0;
}

static uint64_t calls_sum(const Semvisor__CallCounts *c)
{
	return c ? c->semget + c->semop + c->semtimedop + c->semctl + c->ns_changes + c->other : 0;
}

static void hist_row(FILE *f, const char *what, const Semvisor__Histogram *h,
		     const Semvisor__Histogram *ph)
{
	size_t n = h ? (h->n_count < h->n_bound_ns ? h->n_count : h->n_bound_ns) : 0;
	uint64_t d[64];
	char a[32], b[32];

	if (!n || n > 64) {
		fprintf(f, "%-13s none\n", what);
		return;
	}
	fprintf(
	    f, "%-13s %10llu  all: median <= %-8s p99 <= %-8s", what, (unsigned long long)h->total,
	    h->total ? text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 0.5), a, sizeof(a))
		     : "-",
	    h->total ? text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 0.99), b, sizeof(b))
		     : "-");
	if (ph && ph->n_count == h->n_count) {
		uint64_t t = 0;

		for (size_t i = 0; i < n; i++)
			t += d[i] = delta(h->count[i], ph->count[i]);
		if (t)
			fprintf(
			    f, "  last: %llu, median <= %-8s p99 <= %s", (unsigned long long)t,
			    text_fmt_ns(text_hist_quantile(d, h->bound_ns, n, 0.5), a, sizeof(a)),
			    text_fmt_ns(text_hist_quantile(d, h->bound_ns, n, 0.99), b, sizeof(b)));
	}
	fputc('\n', f);
}

#define CLEAR_SCREEN "\033[H\033[2J" /* cursor home, clear */

struct crow {
	const Semvisor__Client *c;
	double rate;
};

static int by_rate(const void *x, const void *y)
{
	const struct crow *a = x, *b = y;

	if (a->rate != b->rate)
		return a->rate < b->rate ? 1 : -1;
	return a->c->calls < b->c->calls ? 1 : a->c->calls > b->c->calls ? -1 : 0;
}

static const Semvisor__Client *find_client(const Semvisor__Stats *s, const Semvisor__Client *c)
{
	for (size_t i = 0; s && i < s->n_clients; i++)
		if (!strcmp(s->clients[i]->name, c->name) && !strcmp(s->clients[i]->ns, c->ns))
			return s->clients[i];
	return NULL;
}

/* One snapshot; on a terminal (tty) of rows lines (0: unknown), cleared first and kept to it. */
static void render_screen(FILE *f, const Semvisor__Stats *s, const Semvisor__Stats *p, bool tty,
			  int rows, uint32_t interval_ms)
{
	static const Semvisor__CallCounts none = SEMVISOR__CALL_COUNTS__INIT;
	const Semvisor__CallCounts *c = s->calls ? s->calls : &none;
	const Semvisor__CallCounts *pc = p && p->calls ? p->calls : &none;
	double dt = p && s->mono_ns > p->mono_ns ? (double)(s->mono_ns - p->mono_ns) / 1e9 : 0;
	char when[32], name[128], ns[128];
	int used = 0;
	struct crow *cr;

	if (tty)
		fputs(CLEAR_SCREEN, f);
	text_fmt_time(s->unix_ms / 1000, when, sizeof(when));
	fprintf(f, "semvisor top: server pid %u, every %.1fs, %s%s\n", s->server_pid,
		interval_ms / 1000.0, when, tty ? "   (q to quit)" : "");
	fprintf(f, "%-13s %10s %10s\n", "", "TOTAL", dt > 0 ? "PER SEC" : "");
	fprintf(f,
		"%-13s %10llu %10s  semget %s, semop %s, semtimedop %s, semctl %s, "
		"namespace changes %s, other %s\n",
		"calls", (unsigned long long)calls_sum(c), rs(calls_sum(c), calls_sum(pc), dt),
		rs(c->semget, pc->semget, dt), rs(c->semop, pc->semop, dt),
		rs(c->semtimedop, pc->semtimedop, dt), rs(c->semctl, pc->semctl, dt),
		rs(c->ns_changes, pc->ns_changes, dt), rs(c->other, pc->other, dt));
	fprintf(f,
		"%-13s %10llu %10s  parked: woken %s, timed out %s, interrupted %s; "
		"rolled back %s\n",
		"waits", (unsigned long long)s->parked, rs(s->parked, p ? p->parked : 0, dt),
		rs(s->woken, p ? p->woken : 0, dt), rs(s->timeouts, p ? p->timeouts : 0, dt),
		rs(s->interrupted, p ? p->interrupted : 0, dt),
		rs(s->rolled_back, p ? p->rolled_back : 0, dt));
	fprintf(f, "%-13s %10llu %10s ", "errors", (unsigned long long)errors_total(s),
		rs(errors_total(s), p ? errors_total(p) : 0, dt));
	for (size_t i = 0; i < s->n_errors && i < 6; i++)
		fprintf(f, "%s %s %s", i ? "," : "",
			text_safe(s->errors[i]->name, name, sizeof(name)),
			rs(s->errors[i]->count, error_count(p, s->errors[i]->code), dt));
	fputc('\n', f);
	hist_row(f, "service time", s->service, p ? p->service : NULL);
	hist_row(f, "wait time", s->wait, p ? p->wait : NULL);
	if (s->lock && !strcmp(s->lock->kind, "amutex")) {
		const Semvisor__LockStats *l = s->lock, *pl = p ? p->lock : NULL;

		fprintf(
		    f, "%-13s %10llu %10s  %s: spun %s, slept %s, cancels %s\n", "locks",
		    (unsigned long long)l->acquired, rs(l->acquired, pl ? pl->acquired : 0, dt),
		    text_safe(l->kind, name, sizeof(name)), rs(l->spun, pl ? pl->spun : 0, dt),
		    rs(l->slept, pl ? pl->slept : 0, dt),
		    rs(l->unqueues + l->head_quits, pl ? pl->unqueues + pl->head_quits : 0, dt));
	}
	fprintf(f, "%-13s %10u  now (%llu added, %llu gone; %llu processes exited)\n", "clients",
		s->listeners, (unsigned long long)s->listeners_added,
		(unsigned long long)s->listeners_gone, (unsigned long long)s->processes_exited);
	used = 11;

	fprintf(f, "\n%-32s %8s %10s %8s\n", "NAMESPACE", "SETS", "SEMS", "WAITERS");
	used += 2;
	for (size_t i = 0; i < s->n_namespaces; i++) {
		if (rows && used >= rows - 4) {
			fprintf(f, "... %zu more\n", s->n_namespaces - i);
			used++;
			break;
		}
		fprintf(f, "%-32s %8u %10u %8u\n",
			text_safe(s->namespaces[i]->name, name, sizeof(name)),
			s->namespaces[i]->nsets, s->namespaces[i]->nsems,
			s->namespaces[i]->nwaiters);
		used++;
	}

	fprintf(f, "\n%-32s %-24s %10s %12s %7s\n", "CLIENT", "NAMESPACE", "CALLS/S", "CALLS",
		"PARKED");
	used += 2;
	cr = calloc(s->n_clients ? s->n_clients : 1, sizeof(*cr));
	if (!cr)
		return;
	for (size_t i = 0; i < s->n_clients; i++) {
		const Semvisor__Client *pcl = find_client(p, s->clients[i]);

		cr[i].c = s->clients[i];
		cr[i].rate = rate(s->clients[i]->calls, pcl ? pcl->calls : 0, dt);
	}
	qsort(cr, s->n_clients, sizeof(*cr), by_rate);
	for (size_t i = 0; i < s->n_clients; i++) {
		if (rows && used >= rows - 1) {
			fprintf(f, "... %zu more", s->n_clients - i);
			break;
		}
		const Semvisor__Client *pcl = find_client(p, cr[i].c);

		fprintf(f, "%-32s %-24s %10s %12llu %7u\n",
			text_safe(cr[i].c->name, name, sizeof(name)),
			*cr[i].c->ns ? text_safe(cr[i].c->ns, ns, sizeof(ns))
				     : "(per IPC namespace)",
			rs(cr[i].c->calls, pcl ? pcl->calls : 0, dt),
			(unsigned long long)cr[i].c->calls, cr[i].c->parked);
		used++;
	}
	free(cr);
	fflush(f);
}

/*
 * On a terminal, every line is cut at its width, as top(1) does: a wrapped line would push the
 * screen down and scroll the header away. Elsewhere lines stay whole (a pipe has no width).
 */
static void render(FILE *out, const Semvisor__Stats *s, const Semvisor__Stats *p, bool tty,
		   uint32_t interval_ms)
{
	struct winsize ws = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (!tty || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) || !ws.ws_col ||
	    !(f = open_memstream(&text, &len))) {
		render_screen(out, s, p, tty, ws.ws_row, interval_ms);
		return;
	}
	render_screen(f, s, p, tty, ws.ws_row, interval_ms);
	fclose(f);
	for (char *l = text; l < text + len;) {
		char *nl = memchr(l, '\n', (size_t)(text + len - l));
		size_t n = nl ? (size_t)(nl - l) : (size_t)(text + len - l);
		/* the clear at the top takes no columns */
		size_t esc =
		    strncmp(l, CLEAR_SCREEN, strlen(CLEAR_SCREEN)) ? 0 : strlen(CLEAR_SCREEN);

		fwrite(l, 1, n - esc < ws.ws_col ? n : esc + ws.ws_col, out);
		if (nl)
			fputc('\n', out);
		l += n + (nl ? 1 : 0);
	}
	fflush(out);
	free(text);
}

int top_run(struct rpc *r, const struct top_opts *o)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	Semvisor__Reply *prev = NULL, *older = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	bool term = isatty(STDOUT_FILENO);
	bool tty = term && !o->json; /* a screen to redraw */
	uint32_t want = o->count ? o->count : (term ? 0 : 1), got = 0;
	int rc;

	w.interval_ms = o->interval_ms;
	w.count = want;
	w.with_clients = true;
	req.body_case = SEMVISOR__REQUEST__BODY_WATCH;
	req.watch = &w;
	rc = rpc_send(r, &req);
	if (rc)
		return rc;

	/* no SA_RESTART: poll() must return so the loop sees the flag */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	if (term)
		raw_enter();

	while (!got_stop && (!want || got < want)) {
		struct pollfd pfd[2] = { { .fd = r->fd, .events = POLLIN },
					 { .fd = STDIN_FILENO, .events = POLLIN } };
		/* a snapshot is due every interval: silence for long means the server is stuck */
		int limit = (int)o->interval_ms * 3 + r->timeout_ms;
		int n = poll(pfd, raw_on ? 2 : 1, limit);

		if (n < 0 && errno == EINTR) {
			if (got_winch && prev && tty)
				render(stdout, prev->stats, older ? older->stats : NULL, tty,
				       o->interval_ms);
			got_winch = 0;
			continue;
		}
		if (n == 0) {
			fprintf(stderr, "semvisorctl: no snapshot from %s for %d ms\n", r->path,
				limit);
			rc = EX_CONNECT;
			break;
		}
		if (n < 0) {
			fprintf(stderr, "semvisorctl: poll: %s\n", strerror(errno));
			rc = EX_CONNECT;
			break;
		}
		if (raw_on && pfd[1].revents) {
			char ch;

			if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
				break;
		}
		if (!pfd[0].revents)
			continue;
		for (;;) {
			Semvisor__Reply *rep;

			rc = rpc_recv(r, &rep, 0);
			if (rc == RPC_AGAIN) {
				rc = 0;
				break;
			}
			if (rc)
				goto out;
			rc = rpc_check(rep);
			if (!rc && rep->body_case != SEMVISOR__REPLY__BODY_STATS) {
				fprintf(stderr,
					"semvisorctl: protocol error: a watch reply without "
					"statistics\n");
				rc = EX_PROTO;
			}
			if (rc) {
				ctl_reply_free(rep);
				goto out;
			}
			if (o->json) {
				json_stats(stdout, rep->stats);
				fflush(stdout);
			} else {
				if (!tty && got)
					putchar('\n');
				render(stdout, rep->stats, prev ? prev->stats : NULL, tty,
				       o->interval_ms);
			}
			ctl_reply_free(older);
			older = prev;
			prev = rep;
			if (want && ++got >= want)
				break;
		}
	}
out:
	raw_off();
	if (tty)
		putchar('\n');
	ctl_reply_free(older);
	ctl_reply_free(prev);
	return rc;
}

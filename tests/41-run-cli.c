/* SPDX-License-Identifier: MIT */
/*
 * semvisor-run as a command: its options, its exit statuses (its own 125/126/127 and the
 * program's, death by signal included), signals sent to it reaching the program, --stats and -v
 * reporting exactly the calls the program made, --limits against the same limits set natively,
 * --workers, standard input passing through, and the refusal to nest under another listener.
 * The program is tests/prog/cli (see there), run in a fresh IPC namespace each time.
 */
#include <criterion/criterion.h>
#include <sys/stat.h>

#include "tests/run-harness.h"

TestSuite(run_cli, .fini = run_cleanup, .timeout = 60);

#define SPEC(...) ((struct run_spec){ .confined = true, .split = true, __VA_ARGS__ })

static void log_run(const struct run_result *r)
{
	char st[96];

	fprintf(stderr, "==== %s: %s\n---- stdout\n%s---- stderr\n%s====\n", r->cmd,
		run_status_text(r, st, sizeof(st)), r->out, r->err);
}

static int exit_code(const struct run_result *r)
{
	if (r->timed_out)
		log_run(r);
	cr_assert(!r->timed_out, "%s timed out", r->cmd);
	if (!WIFEXITED(r->status))
		log_run(r);
	cr_assert(WIFEXITED(r->status), "%s did not exit (status %#x)", r->cmd, r->status);
	return WEXITSTATUS(r->status);
}

Test(run_cli, help)
{
	static const char *const opts[] = { "-v",	 "--verbose", "--stats", "--limits",
					    "--workers", "--daemon",  "-h",	 "--help",
					    "-V",	 "--version" };
	const char *const which[] = { "--help", "-h" };

	for (int w = 0; w < 2; w++) {
		struct run_result r;

		run(&SPEC(.prog = NULL, .opts = { which[w] }), &r);
		cr_assert_eq(exit_code(&r), 0, "%s: exit %d", which[w], exit_code(&r));
		cr_assert(strstr(r.out, "Usage: semvisor-run"), "%s: no usage line:\n%s", which[w],
			  r.out);
		for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
			/* the option as a word: followed by a space, ',' '=' '[' or end of line */
			const char *p = r.out;
			bool found = false;

			while (!found && (p = strstr(p, opts[i]))) {
				char after = p[strlen(opts[i])];
				bool starts = p == r.out || p[-1] == ' ' || p[-1] == '\n';

				found = starts && (after == ' ' || after == ',' || after == '=' ||
						   after == '[' || after == '\n');
				p++;
			}
			cr_assert(found, "%s does not mention %s:\n%s", which[w], opts[i], r.out);
		}
		cr_assert_str_empty(r.err, "%s wrote to stderr: %s", which[w], r.err);
		run_free(&r);
	}
}

Test(run_cli, version)
{
	struct run_result r;

	run(&SPEC(.prog = NULL, .opts = { "--version" }), &r);
	cr_assert_eq(exit_code(&r), 0);
	cr_assert(!strncmp(r.out, "semvisor-run ", 13) && strpbrk(r.out, "0123456789"),
		  "--version printed: %s", r.out);
	run_free(&r);
	run(&SPEC(.prog = NULL, .opts = { "-V" }), &r);
	cr_assert_eq(exit_code(&r), 0);
	cr_assert(!strncmp(r.out, "semvisor-run ", 13), "-V printed: %s", r.out);
	run_free(&r);
}

/*
 * semvisor-run's own failures: 125 and a message on stderr (naming the option, where the third
 * column gives it); the program never runs.
 */
Test(run_cli, bad_options)
{
	static const char *const bad[][3] = {
		{ "--bogus", NULL },
		{ "-x", NULL },
		{ "--limits=1,2", NULL },
		{ "--limits=a,b,c,d", NULL },
		{ "--limits=10,20,5,3,9", NULL },
		{ "--limits=10,20,5,99999", NULL },
		{ "--workers=0", NULL },
		{ "--workers=abc", NULL },
		{ "--limits", NULL },
		{ "-o", NULL },
		{ "-o/dev/null", NULL },		/* without -v */
		{ "-v", "-o/nonexistent/dir/x" },	/* cannot be written */
		{ "--backend=ptrace", "--crash-safe" }, /* notification's alone */
		{ "--backend=ptrace", "--proc-view" },
		{ "--backend=other", NULL },
		{ "--fast", "--fast-spin=-1", "--fast-spin" },
		{ "--fast", "--fast-spin=1000001", "--fast-spin" },
		{ "--fast", "--fast-spin=12us", "--fast-spin" },
		{ "--fast-spin=50", NULL, "--fast-spin" }, /* only with --fast */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct run_result r;

		run(&SPEC(.prog = "cli", .args = { "exit", "7" }, .opts = { bad[i][0], bad[i][1] }),
		    &r);
		cr_assert_eq(exit_code(&r), 125, "%s: exit %d, expected 125", r.cmd, exit_code(&r));
		cr_assert(strlen(r.err) > 10, "%s: no message on stderr", r.cmd);
		/* named as the program is, not by the path it was run as */
		cr_assert(!strncmp(r.err, "semvisor-run: ", 14), "%s: message: %s", r.cmd, r.err);
		cr_assert(!bad[i][2] || strstr(r.err, bad[i][2]), "%s: message: %s", r.cmd, r.err);
		cr_assert_str_empty(r.out, "%s: the program ran? stdout: %s", r.cmd, r.out);
		run_free(&r);
	}
	{
		struct run_result r;

		run(&SPEC(.prog = NULL), &r);
		cr_assert_eq(exit_code(&r), 125, "no program: exit %d", exit_code(&r));
		cr_assert(strstr(r.err, "PROGRAM"), "no program: stderr says: %s", r.err);
		run_free(&r);
	}
}

Test(run_cli, cannot_run)
{
	char path[] = "/tmp/semvisor-cli-XXXXXX";
	struct run_result r;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	cr_assert(write(fd, "#!/bin/sh\nexit 0\n", 17) == 17);
	close(fd);
	chmod(path, 0644); /* not executable, not even for root */

	run(&SPEC(.prog = "/nonexistent/semvisor-test-prog"), &r);
	cr_assert_eq(exit_code(&r), 127, "missing program: exit %d", exit_code(&r));
	cr_assert(strstr(r.err, "/nonexistent/semvisor-test-prog"), "missing program: stderr: %s",
		  r.err);
	run_free(&r);

	run(&SPEC(.prog = path), &r);
	cr_assert_eq(exit_code(&r), 126, "non-executable file: exit %d", exit_code(&r));
	cr_assert(strlen(r.err) > 10, "non-executable file: no message");
	run_free(&r);
	run(&SPEC(.prog = "/tmp/"), &r);
	cr_assert_eq(exit_code(&r), 126, "a directory: exit %d", exit_code(&r));
	run_free(&r);
	unlink(path);
}

/* The program's status passes through, and a death by signal is reproduced. */
Test(run_cli, exit_status)
{
	static const char *const codes[] = { "0", "3", "42", "255" };
	static const char *const sigs[] = { "15", "9", "6", "11", "1" };

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		struct run_result r;

		run(&SPEC(.prog = "cli", .args = { "exit", codes[i] }), &r);
		cr_assert_eq(exit_code(&r), atoi(codes[i]), "exit %s passed on as %d", codes[i],
			     exit_code(&r));
		run_free(&r);
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct run_result r, n;

		run(&SPEC(.prog = "cli", .args = { "raise", sigs[i] }), &r);
		run(&(struct run_spec){ .prog = "cli",
					.args = { "raise", sigs[i] },
					.split = true },
		    &n);
		if (!WIFSIGNALED(r.status))
			log_run(&r);
		cr_assert(
		    !r.timed_out && WIFSIGNALED(r.status) && WTERMSIG(r.status) == atoi(sigs[i]),
		    "program killed by signal %s: semvisor-run status %#x", sigs[i], r.status);
		cr_assert(WIFSIGNALED(n.status) && WTERMSIG(n.status) == atoi(sigs[i]));
		/* core dump flag aside, the same status as the native run */
		cr_assert_eq(r.status & 0x7f, n.status & 0x7f);
		cr_assert_str_empty(r.err, "signal %s: stderr: %s", sigs[i], r.err);
		run_free(&r);
		run_free(&n);
	}
}

/* kill() to semvisor-run's pid reaches the program. */
Test(run_cli, signal_forwarding)
{
	struct run_spec s = SPEC(.prog = "cli", .args = { "usr1" }, .timeout_ms = 10000);
	struct run_handle h;
	struct run_result r;

	run_start(&s, &h, &r);
	cr_assert(run_pump(&h, "ready\n"), "the program never said ready: %s %s", r.out, r.err);
	cr_assert_eq(kill(h.pid, SIGUSR1), 0);
	run_finish(&h);
	cr_assert_eq(exit_code(&r), 0, "stdout %s stderr %s", r.out, r.err);
	cr_assert_str_eq(r.out, "ready\ngot SIGUSR1\n");
	run_free(&r);

	/* SIGTERM: the program dies of it (default action), so semvisor-run does too */
	s = SPEC(.prog = "cli", .args = { "sleep" }, .timeout_ms = 10000);
	run_start(&s, &h, &r);
	cr_assert(run_pump(&h, "ready\n"), "the program never said ready: %s %s", r.out, r.err);
	cr_assert_eq(kill(h.pid, SIGTERM), 0);
	run_finish(&h);
	cr_assert(!r.timed_out && r.ms < 4000, "SIGTERM did not end the program (%lld ms)",
		  (long long)r.ms);
	cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM,
		  "after SIGTERM: status %#x", r.status);
	run_free(&r);
}

/* Number after "word " in s (the --stats summary), or -1. */
static long count_after(const char *s, const char *word)
{
	const char *p = s;
	size_t n = strlen(word);

	while ((p = strstr(p, word))) {
		if ((p == s || p[-1] == ' ') && p[n] == ' ')
			return strtol(p + n + 1, NULL, 10);
		p += n;
	}
	return -1;
}

/* cli count makes exactly 3 semget, 5 glibc semop (semtimedop), 2 raw semop, 1 semctl. */
Test(run_cli, stats)
{
	struct run_result r;

	run(&SPEC(.prog = "cli", .args = { "count" }, .opts = { "--stats" }), &r);
	cr_assert_eq(exit_code(&r), 0, "%s", r.err);
	cr_assert_str_eq(r.out, "done\n");
	if (count_after(r.err, "semget") != 3)
		log_run(&r);
	cr_assert(strstr(r.err, "calls served"), "no summary on stderr: %s", r.err);
	cr_assert_eq(count_after(r.err, "semget"), 3, "semget count in: %s", r.err);
	cr_assert_eq(count_after(r.err, "semop"), 2, "semop count in: %s", r.err);
	cr_assert_eq(count_after(r.err, "semtimedop"), 5, "semtimedop count in: %s", r.err);
	cr_assert_eq(count_after(r.err, "semctl"), 1, "semctl count in: %s", r.err);
	cr_assert(strstr(r.err, "errors: none"), "errors reported: %s", r.err);
	run_free(&r);

	/* without --stats, nothing on stderr */
	run(&SPEC(.prog = "cli", .args = { "count" }), &r);
	cr_assert_eq(exit_code(&r), 0);
	cr_assert_str_empty(r.err, "stderr without --stats: %s", r.err);
	run_free(&r);
}

Test(run_cli, verbose)
{
	static const char *const calls[] = { "semget(", "semop(", "semtimedop(", "semctl(" };
	static const int want[] = { 3, 2, 5, 1 };
	int n[4] = { 0 }, lines = 0;
	struct run_result r;

	run(&SPEC(.prog = "cli", .args = { "count" }, .opts = { "-v" }), &r);
	cr_assert_eq(exit_code(&r), 0, "%s", r.err);
	for (const char *l = r.err; *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);

		if (!strncmp(l, "semvisor: [", 11)) {
			lines++;
			for (int i = 0; i < 4; i++)
				if (memmem(l, len, calls[i], strlen(calls[i])) &&
				    (i != 1 || !memmem(l, len, "semtimedop(", 11)))
					n[i]++;
		}
		l += len + (e ? 1 : 0);
	}
	if (lines != 11)
		log_run(&r);
	cr_assert_eq(lines, 11, "%d trace lines for 11 calls", lines);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(n[i], want[i], "%d lines with %s, expected %d", n[i], calls[i],
			     want[i]);
	run_free(&r);
}

/* --limits against the same limits written into the namespace's /proc/sys/kernel/sem. */
/* -v -o FILE: the trace goes to FILE, calls, commands and flags named as strace names them. */
Test(run_cli, verbose_to_file)
{
	char path[] = "/tmp/semvisor-trace-XXXXXX", opt[64];
	struct run_result r;
	char *text;
	FILE *f;
	long len;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	close(fd);
	snprintf(opt, sizeof(opt), "-o%s", path);
	run(&SPEC(.prog = "cli", .args = { "count" }, .opts = { "-v", opt }), &r);
	cr_assert_eq(exit_code(&r), 0, "%s", r.err);
	cr_assert(!strstr(r.err, "semvisor: ["), "trace lines on stderr:\n%s", r.err);
	f = fopen(path, "r");
	cr_assert(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	cr_assert(text && fread(text, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	unlink(path);
	cr_assert(strstr(text, "semget(IPC_PRIVATE, 1, 0600) = "), "%s", text);
	cr_assert(strstr(text, "semget(0x5151, 1, IPC_CREAT|0600) = "), "%s", text);
	cr_assert(strstr(text, "semget(0x5151, 0, 0) = "), "%s", text);
	cr_assert(strstr(text, ", 0, GETVAL, 0) = 1\n"), "%s", text);
	cr_assert(strstr(text, ", 1, NULL) = 0\n"),
		  "glibc's semop is semtimedop without a timeout:\n%s", text);
	free(text);
	run_free(&r);
}

Test(run_cli, limits)
{
	struct run_result c, n;

	run(&SPEC(.prog = "cli", .args = { "limits" }, .opts = { "--limits=10,20,5,3" }), &c);
	run(
	    &(struct run_spec){
		.prog = "cli", .args = { "limits" }, .split = true, .sem_sysctl = "10 20 5 3\n" },
	    &n);
	cr_assert_eq(exit_code(&n), 0, "native: %s", n.out);
	if (strcmp(c.out, n.out))
		log_run(&n), log_run(&c);
	cr_assert_str_eq(c.out, n.out);
	cr_assert_eq(exit_code(&c), 0);
	cr_assert(strstr(c.out, "semmsl 10 semmns 20 semopm 5 semmni 3"), "%s", c.out);
	run_free(&c);
	run_free(&n);
}

/* --workers=1: one worker still serves sleepers and wakers (blocking calls must not hold it). */
Test(run_cli, one_worker)
{
	struct run_result c, n;

	run(&SPEC(.prog = "complex", .opts = { "--workers=1" }), &c);
	run(&(struct run_spec){ .prog = "complex", .split = true }, &n);
	cr_assert_eq(exit_code(&n), 0);
	if (strcmp(c.out, n.out))
		log_run(&n), log_run(&c);
	cr_assert_str_eq(c.out, n.out);
	cr_assert_eq(exit_code(&c), 0);
	run_free(&c);
	run_free(&n);
}

Test(run_cli, stdin_passes_through)
{
	static char input[200001];
	struct run_result r;
	char tail[64];

	for (size_t i = 0; i < sizeof(input) - 1; i++)
		input[i] = i % 61 == 60 ? '\n' : (char)('a' + i % 26);
	run(&SPEC(.prog = "cli", .args = { "stdin" }, .input = input), &r);
	cr_assert_eq(exit_code(&r), 0, "%s", r.err);
	snprintf(tail, sizeof(tail), "[%zu bytes]\n", sizeof(input) - 1);
	cr_assert_eq(r.out_len, sizeof(input) - 1 + strlen(tail), "%zu bytes out", r.out_len);
	cr_assert(!memcmp(r.out, input, sizeof(input) - 1), "stdin came out changed");
	cr_assert_str_eq(r.out + sizeof(input) - 1, tail);
	run_free(&r);
}

/*
 * Under another listener the kernel refuses a second one (EBUSY). --backend=notify says so and
 * does not run; the default (auto) says so and serves through ptrace, and the program behaves
 * as natively.
 */
Test(run_cli, nested)
{
	char inner[PATH_MAX], prog[PATH_MAX];
	struct run_result r, native;

	snprintf(inner, sizeof(inner), "%s/semvisor-run", run_dir());
	snprintf(prog, sizeof(prog), "%s/tests/prog/semctl", run_dir());
	run(&SPEC(.prog = inner, .args = { "--backend=notify", "--", prog }), &r);
	cr_assert_eq(exit_code(&r), 125, "nested: exit %d; stderr %s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "EBUSY") || strstr(r.err, "already"),
		  "nested: the message does not say why: %s", r.err);
	run_free(&r);

	run(&(struct run_spec){ .prog = "semctl", .split = true }, &native);
	cr_assert_eq(exit_code(&native), 0, "semctl natively: %s", native.err);
	run(&SPEC(.prog = inner, .args = { "--", prog }), &r);
	cr_assert_eq(exit_code(&r), 0, "nested, auto: exit %d; stderr %s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "EBUSY") && strstr(r.err, "ptrace"),
		  "nested, auto: the fallback is not said: %s", r.err);
	cr_assert_str_eq(r.out, native.out);
	run_free(&r);
	run_free(&native);
}

/*
 * A program under the ptrace backend cannot trace: each thread has one tracer, the supervisor.
 * Natively (and under notification) its child is traced and stops; here PTRACE_TRACEME fails
 * with EPERM, as semvisor-run(1) says.
 */
Test(run_cli, ptrace_inside)
{
	struct run_result r, native;

	run(&(struct run_spec){ .prog = "cli", .args = { "trace" }, .split = true }, &native);
	cr_assert_eq(exit_code(&native), 0, "natively: %s", native.err);
	cr_assert(strstr(native.out, "PTRACE_TRACEME: 0\ntraced child stopped by signal 19\n"),
		  "natively: %s", native.out);
	run(&SPEC(.prog = "cli", .args = { "trace" }, .opts = { "--backend=ptrace" }), &r);
	cr_assert_eq(exit_code(&r), 0, "under ptrace: exit %d; %s", exit_code(&r), r.err);
	cr_assert_str_eq(r.out, "PTRACE_TRACEME: Operation not permitted\nchild exited 1\n");
	run_free(&r);
	run_free(&native);
}

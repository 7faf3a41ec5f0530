/* SPDX-License-Identifier: MIT */
/*
 * bench/openview.c - what semvisor-run --proc-view costs (server/notify/procview.h).
 *
 * Two workloads, each run natively, under semvisor-run, and under semvisor-run --proc-view,
 * in rounds that take the rows in turn, so that the machine's mood is shared among them:
 *
 *   open   open, read and close a small file (/etc/hostname) in a loop: every other program's
 *          open pays a round trip to the supervisor with --proc-view (the filter cannot look
 *          at a path), and nothing without it;
 *   view   read /proc/sysvipc/sem whole with 32000 sets in the namespace: the kernel's file
 *          natively and under plain semvisor-run (which shows the kernel's sets: none here),
 *          the supervisor's rendering with --proc-view.
 *
 * Each figure is the median over rounds of a round's per-operation time, measured by the
 * target itself with CLOCK_MONOTONIC (vDSO: the filter never sees the clock). Ratios are
 * against the native row of the same workload.
 *
 *   openview [--rounds N] [--run PATH]   (PATH: semvisor-run; default build/semvisor-run)
 *
 * The driver needs root for a fresh IPC namespace per target (unshare), as bench/run.sh runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSETS 32000

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the target: one workload, the per-operation time on stdout ---- */

static double target_open(void)
{
	char buf[256];
	int iters = 20000;
	int64_t t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			exit(3);
		close(fd);
	}
	return (double)(now_ns() - t0) / iters;
}

static double target_view(void)
{
	static char buf[1 << 16];
	int64_t best = INT64_MAX;
	size_t bytes = 0;

	for (int i = 0; i < NSETS; i++)
		if (semget(IPC_PRIVATE, 1, 0600) < 0) {
			perror("openview: semget");
			exit(3);
		}
	for (int rep = 0; rep < 5; rep++) {
		int64_t t0 = now_ns();
		int fd = open("/proc/sysvipc/sem", O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			exit(3);
		bytes = 0;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			bytes += (size_t)n;
		close(fd);
		if (now_ns() - t0 < best)
			best = now_ns() - t0;
	}
	fprintf(stderr, "openview: view: %zu bytes\n", bytes);
	return (double)best;
}

/* ---- the driver ---- */

enum {
	ROW_NATIVE,
	ROW_RUN,
	ROW_VIEW,
	NROWS
};
static const char *const row_name[NROWS] = { "native", "semvisor-run", "semvisor-run --proc-view" };

static char self[4096]; /* this program, for the targets: /proc/self/exe would be the launcher */

static double run_target(const char *run, int row, const char *what)
{
	int pfd[2], st;
	char out[64] = "";
	pid_t pid;

	if (pipe(pfd))
		exit(2);
	pid = fork();
	if (pid == 0) {
		const char *argv[8];
		int n = 0;

		if (unshare(CLONE_NEWIPC)) {
			perror("openview: unshare(CLONE_NEWIPC) (run as root)");
			_exit(2);
		}
		dup2(pfd[1], 1);
		close(pfd[0]);
		if (row != ROW_NATIVE) {
			argv[n++] = run;
			if (row == ROW_VIEW)
				argv[n++] = "--proc-view";
			argv[n++] = "--";
		}
		argv[n++] = self;
		argv[n++] = "--target";
		argv[n++] = what;
		argv[n] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	if (read(pfd[0], out, sizeof(out) - 1) < 0)
		out[0] = '\0';
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) || !out[0]) {
		fprintf(stderr, "openview: %s under %s failed\n", what, row_name[row]);
		exit(1);
	}
	return strtod(out, NULL);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *run = "build/semvisor-run", *what[] = { "open", "view" };
	double t[2][NROWS][32], med[2][NROWS];
	int rounds = 7;

	if (argc == 3 && !strcmp(argv[1], "--target")) {
		printf("%.1f\n", !strcmp(argv[2], "open") ? target_open() : target_view());
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--run") && i + 1 < argc)
			run = argv[++i];
		else {
			fprintf(stderr, "usage: openview [--rounds N] [--run PATH]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 32)
		rounds = 7;
	if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0) {
		perror("openview: /proc/self/exe");
		return 2;
	}
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < 2; w++)
			for (int row = 0; row < NROWS; row++)
				t[w][row][r] = run_target(run, row, what[w]);
	for (int w = 0; w < 2; w++)
		for (int row = 0; row < NROWS; row++) {
			qsort(t[w][row], (size_t)rounds, sizeof(double), cmp);
			med[w][row] = t[w][row][rounds / 2];
		}
	printf("| workload | row | median | x native |\n|---|---|---|---|\n");
	for (int w = 0; w < 2; w++)
		for (int row = 0; row < NROWS; row++)
			printf("| %s | %s | %.1f %s | %.2fx |\n",
			       w ? "read /proc/sysvipc/sem, 32000 sets" : "open+read+close a file",
			       row_name[row], w ? med[w][row] / 1e6 : med[w][row] / 1e3,
			       w ? "ms" : "us", med[w][row] / med[w][ROW_NATIVE]);
	printf("\n%d rounds, rows in turn; each figure the median of the rounds.\n", rounds);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The verdict of the agent message reader on every seed of the hand-off fuzzers
 * (tests/fuzz/corpus/handoff*), pinned in tests/fuzz/corpus/handoff.verdicts, one line a seed:
 *
 *   handoff/runc.json ok fd=0 pid=4242 id="ctr1" bundle="/run/bundle/ctr1" metadata="ns=blue"
 *   handoff/bad-dup.json EPROTO
 *   handoff_recv/split5-runc.json ok fd=0 pid=4242 ... recv=ok
 *
 * A handoff/ seed is a whole message, given to ho_parse. A handoff_recv/ seed is what
 * handoff_recv_fuzz reads: its first byte says where the first sendmsg (the one carrying the
 * listener) ends, the rest is the message; it is parsed, and also received through a socketpair
 * with a real seccomp listener, and recv= is what ho_recv said.
 *
 * The reader is what stands between the agent socket and the daemon: a change of verdict is a
 * change of what the daemon lets in, so any difference fails here, and so does a seed without a
 * line or a line without a seed. To pin the verdicts again after a change meant to make one,
 * run `SV_RECORD_VERDICTS=1 build/tests/33-handoff-corpus` from the top of the tree and say in
 * the commit why each line changed.
 *
 * Run from the top of the tree (as `make test` does): the corpus is read from tests/fuzz/corpus.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "handoff/xfer.h"
#include "tests/lib/fixture.h"

#define CORPUS	  "tests/fuzz/corpus"
#define VERDICTS  CORPUS "/handoff.verdicts"
#define MAX_SEEDS 256
#define LINE_MAX_ 4096

/* This process's listener (fixture.h); a failure to make it fails the test. */
static int get_listener(void)
{
	int l = fx_magic_listener();

	cr_assert_geq(l, 0, "seccomp NEW_LISTENER: %s", strerror(-l));
	return l;
}

struct line {
	char *s;
	size_t n, cap;
};

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(l->s + l->n, l->cap - l->n, fmt, ap);
	va_end(ap);
	cr_assert(k >= 0 && (size_t)k < l->cap - l->n, "verdict line too long");
	l->n += (size_t)k;
}

/* A string field, quoted, with every byte outside printable ASCII (and " and \) as \xNN. */
static void put_str(struct line *l, const char *name, const char *s)
{
	put(l, " %s=\"", name);
	for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
		if (*u >= 0x20 && *u < 0x7f && *u != '"' && *u != '\\')
			put(l, "%c", *u);
		else
			put(l, "\\x%02x", *u);
	}
	put(l, "\"");
}

static const char *errno_name(int rc)
{
	switch (rc) {
	case 0:
		return "ok";
	case -EPROTO:
		return "EPROTO";
	case -EMSGSIZE:
		return "EMSGSIZE";
	case -ETIMEDOUT:
		return "ETIMEDOUT";
	default:
		return "other";
	}
}

static void put_parse(struct line *l, const char *msg, size_t len)
{
	struct ho_info info;
	int idx, rc;

	rc = ho_parse(msg, len, &info, &idx, NULL, 0);
	put(l, " %s", errno_name(rc));
	if (rc)
		return;
	put(l, " fd=%d pid=%d", idx, (int)info.pid);
	put_str(l, "id", info.id);
	put_str(l, "bundle", info.bundle);
	put_str(l, "metadata", info.metadata);
	/* only when the annotations named it, so that the older lines read as they did */
	if (info.pod_ns[0] || info.pod[0] || info.container[0] || info.name_note[0]) {
		char name[HO_CLIENT_NAME_MAX];

		ho_client_name(&info, name, sizeof(name));
		put_str(l, "name", name);
		put_str(l, "name_note", info.name_note);
	}
}

/* What ho_recv makes of msg sent as handoff_recv_fuzz sends it, with a real listener. */
static void put_recv(struct line *l, const char *msg, size_t len, size_t split)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct ho_info info;
	char err[256];
	int sv[2], lfd = get_listener(), fd = -1, rc;
	struct iovec iov = { (void *)msg, split };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	memset(&ctl, 0, sizeof(ctl));
	ctl.h.cmsg_level = SOL_SOCKET;
	ctl.h.cmsg_type = SCM_RIGHTS;
	ctl.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&ctl.h), &lfd, sizeof(int));
	cr_assert_eq(sendmsg(sv[0], &mh, MSG_NOSIGNAL), (ssize_t)split);
	if (split < len)
		cr_assert_eq(send(sv[0], msg + split, len - split, MSG_NOSIGNAL),
			     (ssize_t)(len - split));
	close(sv[0]);
	rc = ho_recv(sv[1], &fd, &info, 5000, err, sizeof(err));
	put(l, " recv=%s", errno_name(rc));
	if (fd >= 0)
		close(fd);
	close(sv[1]);
}

static char *read_file(const char *path, size_t *len)
{
	char *buf = malloc(HO_MAX_MESSAGE + 2);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, HO_MAX_MESSAGE + 2);
	cr_assert(n >= 0 && n <= HO_MAX_MESSAGE + 1, "%s: unreadable or too long", path);
	close(fd);
	*len = (size_t)n;
	return buf;
}

/* The verdict line of one seed (name relative to CORPUS), into l. */
static void verdict(struct line *l, const char *dir, const char *file)
{
	char path[512];
	size_t len;
	char *data;

	snprintf(path, sizeof(path), CORPUS "/%s/%s", dir, file);
	data = read_file(path, &len);
	put(l, "%s/%s", dir, file);
	if (!strcmp(dir, "handoff")) {
		put_parse(l, data, len);
	} else if (len < 2) {
		put(l, " skipped"); /* handoff_recv_fuzz ignores it too */
	} else {
		size_t split = 1 + (unsigned char)data[0] % (len - 1);

		put_parse(l, data + 1, len - 1);
		put_recv(l, data + 1, len - 1, split);
	}
	free(data);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every seed's verdict line, sorted by name. */
static size_t all_verdicts(char **out)
{
	static const char *const dirs[] = { "handoff", "handoff_recv" };
	size_t n = 0;

	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		char path[256];
		struct dirent *e;
		DIR *dh;

		snprintf(path, sizeof(path), CORPUS "/%s", dirs[d]);
		dh = opendir(path);
		cr_assert_not_null(dh, "%s: %s (run from the top of the tree)", path,
				   strerror(errno));
		while ((e = readdir(dh))) {
			struct line l = { malloc(LINE_MAX_), 0, LINE_MAX_ };

			if (e->d_name[0] == '.') {
				free(l.s);
				continue;
			}
			cr_assert_not_null(l.s);
			cr_assert_lt(n, MAX_SEEDS);
			verdict(&l, dirs[d], e->d_name);
			out[n++] = l.s;
		}
		closedir(dh);
	}
	qsort(out, n, sizeof(out[0]), by_name);
	return n;
}

/* The recorded lines, comments and blank lines left out. */
static size_t recorded(char **out)
{
	FILE *f = fopen(VERDICTS, "re");
	char buf[LINE_MAX_];
	size_t n = 0;

	cr_assert_not_null(f, "%s: %s", VERDICTS, strerror(errno));
	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = '\0';
		if (!buf[0] || buf[0] == '#')
			continue;
		cr_assert_lt(n, MAX_SEEDS);
		out[n] = strdup(buf);
		cr_assert_not_null(out[n]);
		n++;
	}
	fclose(f);
	qsort(out, n, sizeof(out[0]), by_name);
	return n;
}

static void record(char **got, size_t n)
{
	FILE *f = fopen(VERDICTS, "we");

	cr_assert_not_null(f, "%s: %s", VERDICTS, strerror(errno));
	fprintf(
	    f, "# What the agent message reader says of each hand-off fuzz seed: written by\n"
	       "# SV_RECORD_VERDICTS=1 build/tests/33-handoff-corpus, checked by the same test.\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", got[i]);
	cr_assert_eq(fclose(f), 0);
}

/* The seed a line is about: its first word. */
static size_t name_len(const char *line)
{
	return strcspn(line, " ");
}

Test(handoff_corpus, verdicts_unchanged)
{
	char *got[MAX_SEEDS], *want[MAX_SEEDS];
	size_t ngot = all_verdicts(got), nwant, i = 0, j = 0;

	cr_assert_gt(ngot, 0);
	if (getenv("SV_RECORD_VERDICTS")) {
		record(got, ngot);
		cr_log_warn("recorded %zu verdicts in %s", ngot, VERDICTS);
	}
	nwant = recorded(want);
	/* a merge of two sorted lists: each seed must be on both, with the same line */
	while (i < ngot || j < nwant) {
		int c = i == ngot ? 1 : j == nwant ? -1 : by_name(&got[i], &want[j]);
		size_t gl = i < ngot ? name_len(got[i]) : 0, wl = j < nwant ? name_len(want[j]) : 0;

		if (i < ngot && j < nwant && gl == wl && !memcmp(got[i], want[j], gl))
			c = 0;
		if (c == 0) {
			cr_expect_str_eq(got[i], want[j], "verdict changed");
			i++;
			j++;
		} else if (c < 0) {
			cr_expect_fail("seed without a recorded verdict: %s", got[i]);
			i++;
		} else {
			cr_expect_fail("verdict for a seed that is gone: %s", want[j]);
			j++;
		}
	}
	cr_log_info("%zu seeds checked", ngot);
	for (i = 0; i < ngot; i++)
		free(got[i]);
	for (j = 0; j < nwant; j++)
		free(want[j]);
}

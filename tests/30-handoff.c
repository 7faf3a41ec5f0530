/* SPDX-License-Identifier: MIT */
/*
 * The agent message (server/handoff/, SPEC B7): the JSON reader (msg.c) on its own, then the
 * transfer over a socketpair with a real seccomp listener.
 *
 * Every receive test counts the open fds before and after: a receiver that serves hundreds of
 * connections must not leak one fd per hostile sender. Criterion runs each test in its own
 * process, so a test may install the one filter with a listener that a process may have (SPEC
 * B1.3). The filter traps only getpgid(FX_MAGIC_PID), which nothing but these tests calls: a trap
 * on a common call would hang the runtime (LeakSanitizer's tracer calls getppid, for one).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handoff/meta.h"
#include "handoff/xfer.h"
#include "tests/lib/fixture.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif

TestSuite(handoff, .timeout = 30);

/* ---- helpers ------------------------------------------------------------------------------ */

/* This process's listener (fixture.h); a failure to make it fails the test. */
static int get_listener(void)
{
	int l = fx_magic_listener();

	cr_assert_geq(l, 0, "seccomp NEW_LISTENER: %s", strerror(-l));
	return l;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

static void pair(int sv[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static bool is_listener(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = '\0';
	return !strcmp(link, "anon_inode:seccomp notify");
}

/* The next two fd numbers the kernel will hand out (it always picks the lowest free). */
static void next_two_fds(int *a, int *b)
{
	*a = open("/dev/null", O_RDONLY);
	*b = open("/dev/null", O_RDONLY);
	cr_assert(*a >= 0 && *b > *a);
	close(*a);
	close(*b);
}

/* One sendmsg with the fds, then the rest of the data (if the socket took only part). */
static void send_raw(int sock, const char *data, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(64 * sizeof(int))];
	} ctl;
	struct iovec iov = { (void *)data, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *c = &ctl.h; /* CMSG_FIRSTHDR, which a buffer this size always has */

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	cr_assert_geq(n, 0, "sendmsg: %s", strerror(errno));
	for (size_t off = (size_t)n; off < len; off += (size_t)n) {
		n = send(sock, data + off, len - off, MSG_NOSIGNAL);
		cr_assert_gt(n, 0);
	}
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A sender in a thread: data in chunks (fds with the first), a pause between chunks. */
struct sender {
	int sock;
	const char *data;
	size_t len, chunk;
	int fds[4], nfds;
	int pause_ms;
	bool close_after;
	pthread_t thread;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;

	for (size_t off = 0; off < s->len;) {
		size_t k = s->chunk && s->chunk < s->len - off ? s->chunk : s->len - off;

		send_raw(s->sock, s->data + off, k, s->fds, off ? 0 : s->nfds);
		off += k;
		if (s->pause_ms && off < s->len)
			sleep_ms(s->pause_ms);
	}
	if (s->close_after)
		close(s->sock);
	return NULL;
}

static void sender_start(struct sender *s)
{
	cr_assert_eq(pthread_create(&s->thread, NULL, sender_main, s), 0);
}

static void sender_join(struct sender *s)
{
	cr_assert_eq(pthread_join(s->thread, NULL), 0);
}

/* Receive what data (with fds) produces; expect rc, an error containing needle, no fd kept. */
static void expect_refused(const char *data, size_t len, const int *fds, int nfds, int want_rc,
			   const char *needle)
{
	struct ho_info info;
	char err[256];
	int sv[2], fd = 1234, before, rc;

	pair(sv);
	send_raw(sv[0], data, len, fds, nfds);
	close(sv[0]);
	before = count_fds();
	rc = ho_recv(sv[1], &fd, &info, 2000, err, sizeof(err));
	cr_assert_eq(rc, want_rc, "rc %d (%s), wanted %d", rc, err, want_rc);
	cr_assert_eq(fd, -1);
	cr_assert(strstr(err, needle), "error \"%s\" does not say \"%s\"", err, needle);
	cr_assert_eq(info.pid, 0);
	cr_assert_eq(count_fds(), before, "ho_recv leaked an fd: %s", err);
	close(sv[1]);
}

/* runc's message, with what runc puts in it: annotations, metadata, every field. */
static const char runc_msg[] =
    "{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"],\"pid\":4242,"
    "\"metadata\":\"ns=caf\\u00e9 \\ud83d\\ude00\\ttab\",\"state\":{\"ociVersion\":\"1.0.2\","
    "\"id\":\"ctr-\\\"one\\\"\",\"status\":\"creating\",\"pid\":4242,"
    "\"bundle\":\"/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc\","
    "\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
    "\"org.opencontainers.image.title\":\"\\u65e5\\u672c\",\"empty\":\"\"}}}";

static void check_runc_info(const struct ho_info *info)
{
	cr_assert_eq(info->pid, 4242);
	cr_assert_str_eq(info->metadata, "ns=caf\xc3\xa9 \xf0\x9f\x98\x80\ttab");
	cr_assert_str_eq(info->id, "ctr-\"one\"");
	cr_assert_str_eq(info->bundle, "/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc");
}

/* A valid start of a message (28 bytes): the malformed inputs go wrong after it. */
#define OK_HEAD "{\"pid\":1,\"fds\":[\"seccompFd\"]"

static int parse(const char *json, struct ho_info *info, int *idx, char *err, size_t errlen)
{
	return ho_parse(json, strlen(json), info, idx, err, errlen);
}

/* ---- the reader --------------------------------------------------------------------------- */

Test(handoff, parse_runc_message)
{
	struct ho_info info;
	char err[256];
	int idx = -7;

	cr_assert_eq(parse(runc_msg, &info, &idx, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(idx, 0);
	check_runc_info(&info);
}

Test(handoff, parse_fields)
{
	struct ho_info info;
	char err[256];
	int idx;

	/* seccompFd's index is its SCM_RIGHTS slot */
	cr_assert_eq(parse("{\"fds\":[\"a\",\"seccompFdX\",\"seccompFd\"],\"pid\":7}", &info, &idx,
			   err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(idx, 2);
	cr_assert_eq(info.pid, 7);
	cr_assert_str_eq(info.id, "");
	cr_assert_str_eq(info.metadata, "");
	cr_assert_str_eq(info.bundle, "");

	/* state.pid stands in for an absent pid; a present pid wins */
	cr_assert_eq(parse("{\"fds\":[\"seccompFd\"],\"state\":{\"pid\":77}}", &info, &idx, err,
			   sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(info.pid, 77);
	cr_assert_eq(parse("{\"state\":{\"pid\":6},\"pid\":5,\"fds\":[\"seccompFd\"]}", &info, &idx,
			   err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(info.pid, 5);
	cr_assert_eq(parse("{\"pid\":null,\"state\":{\"pid\":8},\"fds\":[\"seccompFd\"]}", &info,
			   &idx, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(info.pid, 8);

	/* null is absent; keys are compared after unescaping; whitespace anywhere */
	cr_assert_eq(
	    parse(" \t\r\n{ \"p\\u0069d\" : 2147483647 , \"fds\" : [ \"seccomp\\u0046d\" ] ,"
		  "\"metadata\":null,\"state\":{\"id\":null,\"bundle\":\"b\"} } \n",
		  &info, &idx, err, sizeof(err)),
	    0, "%s", err);
	cr_assert_eq(info.pid, INT32_MAX);
	cr_assert_str_eq(info.metadata, "");
	cr_assert_str_eq(info.id, "");
	cr_assert_str_eq(info.bundle, "b");
	cr_assert_eq(parse("{\"pid\":1,\"fds\":[\"seccompFd\"],\"state\":null}", &info, &idx, err,
			   sizeof(err)),
		     0, "%s", err);
}

Test(handoff, parse_escapes)
{
	struct ho_info info;
	char err[256];
	int idx;

	cr_assert_eq(parse("{\"pid\":1,\"fds\":[\"seccompFd\"],\"metadata\":"
			   "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00E9\\u20ac\\uD83D\\uDE00\\u007f"
			   "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"}",
			   &info, &idx, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(info.metadata, "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f"
					"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf");
}

Test(handoff, parse_skips_unknown)
{
	struct ho_info info;
	char err[256];
	int idx;

	/* Everything JSON can say, where we do not look, is validated and skipped. */
	cr_assert_eq(
	    parse("{\"x\":[1,-0,0.5,-1.25e+10,1E-3,1e308,-9223372036854775808,"
		  "true,false,null,{},[],\"\\u0000\",{\"a\":{\"b\":[[]]}}],\"pid\":3,"
		  "\"fds\":[\"seccompFd\"],\"y\":{},\"state\":{\"annotations\":{\"pid\":\"no\","
		  "\"id\":1},\"status\":\"creating\"}}",
		  &info, &idx, err, sizeof(err)),
	    0, "%s", err);
	cr_assert_eq(info.pid, 3);
	cr_assert_str_eq(info.id, "");

	/* 32 levels in all are accepted (the top object is one of them), 33 are not */
	for (int levels = 32; levels <= 33; levels++) {
		static const char head[] = OK_HEAD ",\"a\":";
		char deep[256], want[64];
		int n = (int)sizeof(head) - 1;

		memcpy(deep, head, (size_t)n);
		for (int i = 1; i < levels; i++)
			deep[n++] = '[';
		for (int i = 1; i < levels; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		deep[n] = '\0';
		if (levels == 32) {
			cr_assert_eq(parse(deep, &info, &idx, err, sizeof(err)), 0, "%s", err);
			continue;
		}
		cr_assert_eq(parse(deep, &info, &idx, err, sizeof(err)), -EPROTO);
		/* the 33rd level opens with the 32nd bracket */
		snprintf(want, sizeof(want), "nest deeper than 32 at byte %zu",
			 sizeof(head) - 1 + 31);
		cr_assert(strstr(err, want), "%s", err);
	}
}

/* Where we do not look, the decoder still refuses a duplicate key, a key holding NUL and a number
   that fits neither an int64 nor a double (server/handoff/msg.c says why that is safe). */
Test(handoff, parse_refuses_what_the_decoder_refuses)
{
	static const struct {
		const char *json, *needle;
	} t[] = {
		{ OK_HEAD ",\"x\":1,\"x\":2}", "duplicate object key near '\"x\"'" },
		{ OK_HEAD ",\"state\":{\"annotations\":{\"a\":\"1\",\"a\":\"1\"}}}",
		  "duplicate object key near '\"a\"'" },
		{ OK_HEAD ",\"x\\u0000\":1}", "NUL byte in object key" },
		{ OK_HEAD ",\"x\":9223372036854775808}", "too big integer" },
		{ OK_HEAD ",\"x\":-9223372036854775809}", "too big negative integer" },
		{ OK_HEAD ",\"x\":1e999999}", "real number overflow" },
	};
	struct ho_info info;
	char err[256];
	int idx;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		cr_expect_eq(parse(t[i].json, &info, &idx, err, sizeof(err)), -EPROTO, "%s",
			     t[i].json);
		cr_expect(strstr(err, t[i].needle), "%s: \"%s\" does not say \"%s\"", t[i].json,
			  err, t[i].needle);
	}
}

/* Each string field holds exactly its buffer less the NUL; one byte more is refused, not cut. */
Test(handoff, parse_string_limits)
{
	static const struct {
		const char *json_key, *name;
		size_t off, max;
		bool in_state;
	} f[] = {
		{ "id", "state.id", offsetof(struct ho_info, id),
		  sizeof(((struct ho_info *)0)->id) - 1, true },
		{ "bundle", "state.bundle", offsetof(struct ho_info, bundle),
		  sizeof(((struct ho_info *)0)->bundle) - 1, true },
		{ "metadata", "metadata", offsetof(struct ho_info, metadata),
		  sizeof(((struct ho_info *)0)->metadata) - 1, false },
	};
	char json[2048], val[1024], err[256];
	struct ho_info info;
	int idx;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		for (size_t extra = 0; extra < 2; extra++) {
			/* two-byte characters, so a cut could even land inside one */
			size_t len = f[i].max + extra, n = 0;

			for (; n + 2 <= len; n += 2)
				memcpy(val + n, "\xc3\xa9", 2);
			if (n < len)
				val[n++] = 'x';
			val[n] = '\0';
			snprintf(json, sizeof(json),
				 "{\"pid\":1,\"fds\":[\"seccompFd\"],%s\"%s\":\"%s\"%s}",
				 f[i].in_state ? "\"state\":{" : "", f[i].json_key, val,
				 f[i].in_state ? "}" : "");
			if (!extra) {
				cr_assert_eq(parse(json, &info, &idx, err, sizeof(err)), 0, "%s",
					     err);
				cr_assert_str_eq((char *)&info + f[i].off, val);
			} else {
				char want[96];

				cr_assert_eq(parse(json, &info, &idx, err, sizeof(err)), -EPROTO);
				snprintf(want, sizeof(want), "\"%s\" is %zu bytes long", f[i].name,
					 len);
				cr_assert(strstr(err, want), "%s", err);
				cr_assert_str_eq(info.id, "");
				cr_assert_str_eq(info.metadata, "");
				cr_assert_str_eq(info.bundle, "");
			}
		}
	}
}

struct bad {
	const char *json;
	size_t len; /* 0: strlen */
	const char *needle;
};

#define BAD(j, n)                                                                                  \
	{                                                                                          \
		j, 0, n                                                                            \
	}
#define BADN(j, n)                                                                                 \
	{                                                                                          \
		j, sizeof(j) - 1, n                                                                \
	}

static const struct bad bad_inputs[] = {
	/* not an object, or nothing */
	BAD("", "the message is empty at byte 0"),
	BAD("  \n", "the message is empty at byte 3"),
	BAD("[]", "not a JSON object at byte 0"),
	BAD("\"pid\"", "not a JSON object"),
	BAD("null", "not a JSON object"),
	/* truncated */
	BAD("{", "string or '}' expected near end of file"),
	BAD(OK_HEAD, "'}' expected near end of file"),
	BAD(OK_HEAD ",", "string or '}' expected near end of file"),
	BAD(OK_HEAD ",\"x\":", "unexpected token near end of file"),
	BAD(OK_HEAD ",\"x\":\"abc", "premature end of input"),
	BAD(OK_HEAD ",\"x\":\"abc\\", "invalid escape"),
	BAD(OK_HEAD ",\"x\":\"\\u12", "invalid escape"),
	BAD(OK_HEAD ",\"x\":[1,", "']' expected near end of file"),
	BAD(OK_HEAD ",\"x\":tru}", "invalid token near 'tru'"),
	BAD(OK_HEAD ",\"x\":-}", "invalid token near '-'"),
	/* grammar */
	BAD(OK_HEAD ",}", "string or '}' expected near '}'"),
	BAD(OK_HEAD ",\"x\" 1}", "':' expected near '1'"),
	BAD(OK_HEAD " \"x\":1}", "'}' expected near '\"x\"'"),
	BAD(OK_HEAD ",\"x\":[1 2]}", "']' expected near '2'"),
	BAD(OK_HEAD ",\"x\":[1,]}", "unexpected token near ']'"),
	BAD(OK_HEAD ",'x':1}", "string or '}' expected near '''"),
	BAD(OK_HEAD ",\"x\":'a'}", "invalid token near '''"),
	BAD(OK_HEAD "/* c */}", "'}' expected near '/'"),
	BAD(OK_HEAD ",\"x\":01}", "invalid token near '0'"),
	BAD(OK_HEAD ",\"x\":+1}", "invalid token near '+'"),
	BAD(OK_HEAD ",\"x\":.5}", "invalid token near '.'"),
	BAD(OK_HEAD ",\"x\":1.}", "invalid token near '1.'"),
	BAD(OK_HEAD ",\"x\":1e}", "invalid token near '1e'"),
	BAD(OK_HEAD ",\"x\":0x10}", "'}' expected near 'x'"),
	BAD(OK_HEAD ",\"x\":NaN}", "invalid token near 'NaN'"),
	BAD(OK_HEAD ",\"x\":nul}", "invalid token near 'nul'"),
	/* trailing garbage */
	BAD(OK_HEAD "} x", "end of file expected near 'x'"),
	BAD(OK_HEAD "}{}", "end of file expected"),
	BAD(OK_HEAD "}}", "end of file expected"),
	BADN(OK_HEAD "}\0", "end of file expected"),
	/* NUL bytes and control characters */
	BADN(OK_HEAD ",\"x\":\"a\0b\"}", "control character 0x0"),
	BADN(OK_HEAD ",\0\"x\":1}", "string or '}' expected near end of file"),
	BAD(OK_HEAD ",\"x\":\"a\nb\"}", "unexpected newline"),
	BAD(OK_HEAD ",\"x\":\"\x1f\"}", "control character 0x1f"),
	BAD(OK_HEAD ",\"metadata\":\"a\\u0000b\"}", "\"metadata\" contains a NUL character"),
	BAD(OK_HEAD ",\"state\":{\"id\":\"\\u0000\"}}", "\"state.id\" contains a NUL character"),
	/* escapes */
	BAD(OK_HEAD ",\"x\":\"\\x41\"}", "invalid escape near '\"\\x'"),
	BAD(OK_HEAD ",\"x\":\"\\U0041\"}", "invalid escape near '\"\\U'"),
	BAD(OK_HEAD ",\"x\":\"\\'\"}", "invalid escape near '\"\\''"),
	BAD(OK_HEAD ",\"x\":\"\\uZZZZ\"}", "invalid escape near '\"\\uZ'"),
	BAD(OK_HEAD ",\"x\":\"\\u12G4\"}", "invalid escape near '\"\\u12G'"),
	BAD(OK_HEAD ",\"x\":\"\\ud800\"}", "invalid Unicode '\\uD800'"),
	BAD(OK_HEAD ",\"x\":\"\\ud800\\u0041\"}", "invalid Unicode '\\uD800\\u"),
	BAD(OK_HEAD ",\"x\":\"\\ud800\\ud800\"}", "invalid Unicode '\\uD800\\u"),
	BAD(OK_HEAD ",\"x\":\"\\udc00\"}", "invalid Unicode '\\uDC00'"),
	BAD(OK_HEAD ",\"x\":\"\\ude00\\ud83d\"}", "invalid Unicode '\\uDE00'"),
	/* raw bytes that are not UTF-8 */
	BAD(OK_HEAD ",\"x\":\"\x80\"}", "unable to decode byte 0x80"),
	BAD(OK_HEAD ",\"x\":\"\xc0\xaf\"}", "unable to decode byte"),	      /* overlong '/' */
	BAD(OK_HEAD ",\"x\":\"\xe0\x80\xaf\"}", "unable to decode byte"),     /* overlong */
	BAD(OK_HEAD ",\"x\":\"\xed\xa0\x80\"}", "unable to decode byte"),     /* surrogate */
	BAD(OK_HEAD ",\"x\":\"\xf4\x90\x80\x80\"}", "unable to decode byte"), /* > U+10FFFF */
	BAD(OK_HEAD ",\"x\":\"\xf8\x88\x80\x80\x80\"}", "unable to decode byte"),
	BAD(OK_HEAD ",\"x\":\"\xe2\x82\"}", "unable to decode byte"), /* cut short */
	BAD(OK_HEAD ",\"x\":\"\xff\"}", "unable to decode byte"),
	BAD(OK_HEAD ",\"\xc3\"}", "unable to decode byte"),
	/* wrong types */
	BAD("{\"pid\":\"1\",\"fds\":[\"seccompFd\"]}", "\"pid\" must be a number, not a string"),
	BAD("{\"pid\":true,\"fds\":[\"seccompFd\"]}", "\"pid\" must be a number, not a boolean"),
	BAD("{\"pid\":[1],\"fds\":[\"seccompFd\"]}", "\"pid\" must be a number, not an array"),
	BAD("{\"pid\":{},\"fds\":[\"seccompFd\"]}", "\"pid\" must be a number, not an object"),
	BAD("{\"pid\":1,\"fds\":\"seccompFd\"}",
	    "\"fds\" must be an array of strings, not a string"),
	BAD("{\"pid\":1,\"fds\":{\"seccompFd\":0}}",
	    "\"fds\" must be an array of strings, not an object"),
	BAD("{\"pid\":1,\"fds\":[0]}", "fds[0] is not a string"),
	BAD("{\"pid\":1,\"fds\":[\"a\",null]}", "fds[1] is not a string"),
	BAD("{\"pid\":1,\"fds\":[[\"seccompFd\"]]}", "fds[0] is not a string"),
	BAD(OK_HEAD ",\"metadata\":5}", "\"metadata\" must be a string, not a number"),
	BAD(OK_HEAD ",\"metadata\":{}}", "\"metadata\" must be a string, not an object"),
	BAD(OK_HEAD ",\"state\":\"x\"}", "\"state\" must be an object, not a string"),
	BAD(OK_HEAD ",\"state\":[]}", "\"state\" must be an object, not an array"),
	BAD(OK_HEAD ",\"state\":{\"id\":5}}", "\"state.id\" must be a string, not a number"),
	BAD(OK_HEAD ",\"state\":{\"bundle\":false}}",
	    "\"state.bundle\" must be a string, not a boolean"),
	BAD("{\"fds\":[\"seccompFd\"],\"state\":{\"pid\":\"5\"}}",
	    "\"state.pid\" must be a number"),
	/* numbers that are no pid */
	BAD("{\"pid\":2147483648,\"fds\":[\"seccompFd\"]}",
	    "\"pid\" is not a process id (1 to 2147483647)"),
	BAD("{\"pid\":99999999999999999999999999999,\"fds\":[\"seccompFd\"]}", "too big integer"),
	BAD("{\"pid\":-1,\"fds\":[\"seccompFd\"]}", "\"pid\" is not a process id"),
	BAD("{\"pid\":-2147483649,\"fds\":[\"seccompFd\"]}", "\"pid\" is not a process id"),
	BAD("{\"pid\":0,\"fds\":[\"seccompFd\"]}", "\"pid\" is not a process id"),
	BAD("{\"pid\":-0,\"fds\":[\"seccompFd\"]}", "\"pid\" is not a process id"),
	BAD("{\"pid\":1.5,\"fds\":[\"seccompFd\"]}", "\"pid\" is not an integer"),
	BAD("{\"pid\":1234.0,\"fds\":[\"seccompFd\"]}", "\"pid\" is not an integer"),
	BAD("{\"pid\":1e3,\"fds\":[\"seccompFd\"]}", "\"pid\" is not an integer"),
	BAD("{\"fds\":[\"seccompFd\"],\"state\":{\"pid\":0}}", "\"state.pid\" is not a process id"),
	/* duplicate keys, the ones we read among them */
	BAD(OK_HEAD ",\"pid\":2}", "duplicate object key near '\"pid\"'"),
	BAD("{\"pid\":null,\"pid\":2,\"fds\":[\"seccompFd\"]}",
	    "duplicate object key near '\"pid\"'"),
	BAD(OK_HEAD ",\"fds\":[\"seccompFd\"]}", "duplicate object key near '\"fds\"'"),
	BAD(OK_HEAD ",\"metadata\":\"a\",\"metadata\":\"b\"}",
	    "duplicate object key near '\"metadata\"'"),
	BAD(OK_HEAD ",\"state\":{},\"state\":{}}", "duplicate object key near '\"state\"'"),
	BAD(OK_HEAD ",\"state\":{\"id\":\"a\",\"id\":\"b\"}}",
	    "duplicate object key near '\"id\"'"),
	BAD(OK_HEAD ",\"state\":{\"bundle\":\"a\",\"bundle\":\"a\"}}",
	    "duplicate object key near '\"bundle\"'"),
	BAD(OK_HEAD ",\"state\":{\"pid\":1,\"pid\":1}}", "duplicate object key near '\"pid\"'"),
	BAD(OK_HEAD ",\"p\\u0069d\":2}", "duplicate object key near '\"p\\u0069d\"'"),
	BAD("{\"pid\":1,\"fds\":[\"seccompFd\",\"seccompFd\"]}", "fds names \"seccompFd\" twice"),
	/* what must be there */
	BAD("{\"pid\":1}", "names no \"seccompFd\" in \"fds\""),
	BAD("{\"pid\":1,\"fds\":[]}", "names no \"seccompFd\""),
	BAD("{\"pid\":1,\"fds\":null}", "names no \"seccompFd\""),
	BAD("{\"pid\":1,\"fds\":[\"seccompfd\",\"seccompFd \",\"seccompFd\\u0000\"]}",
	    "names no \"seccompFd\""),
	BAD("{\"fds\":[\"seccompFd\"]}", "has neither \"pid\" nor \"state.pid\""),
	BAD("{\"fds\":[\"seccompFd\"],\"state\":{\"annotations\":{\"pid\":1}}}", "has neither"),
	BAD("{\"pid\":1,\"fds\":[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\","
	    "\"10\","
	    "\"11\","
	    "\"12\",\"13\",\"14\",\"15\",\"seccompFd\"]}",
	    "fds names more than 16 descriptors"),
};

Test(handoff, parse_malformed)
{
	for (size_t i = 0; i < sizeof(bad_inputs) / sizeof(bad_inputs[0]); i++) {
		const struct bad *b = &bad_inputs[i];
		size_t len = b->len ? b->len : strlen(b->json);
		struct ho_info info;
		char err[256];
		int idx = 99;
		int rc;

		memset(&info, 0x55, sizeof(info));
		rc = ho_parse(b->json, len, &info, &idx, err, sizeof(err));
		cr_expect_eq(rc, -EPROTO, "input %zu was accepted: %.*s", i, (int)len, b->json);
		cr_expect(strstr(err, b->needle), "input %zu: \"%s\" does not say \"%s\"", i, err,
			  b->needle);
		cr_expect_eq(idx, -1);
		cr_expect_eq(info.pid, 0);
		cr_expect_eq(info.id[0] | info.metadata[0] | info.bundle[0], 0);
	}
}

/* No prefix of a message is a message: whatever byte the stream stops at, it is refused. */
Test(handoff, parse_every_prefix)
{
	size_t len = strlen(runc_msg);

	for (size_t n = 0; n < len; n++) {
		struct ho_info info;
		char err[256];
		int idx;

		cr_assert_eq(ho_parse(runc_msg, n, &info, &idx, err, sizeof(err)), -EPROTO,
			     "prefix of %zu bytes accepted", n);
		cr_assert(strstr(err, "malformed agent message"), "%zu: %s", n, err);
	}
}

Test(handoff, parse_err_buffers)
{
	struct ho_info info;
	char err[8];
	int idx;

	/* no buffer, or a tiny one: still refused, and nothing written past it */
	cr_assert_eq(ho_parse("{", 1, &info, &idx, NULL, 0), -EPROTO);
	memset(err, 'z', sizeof(err));
	cr_assert_eq(ho_parse("{", 1, &info, &idx, err, 4), -EPROTO);
	cr_assert_eq(err[3], '\0');
	cr_assert_eq(err[4], 'z');
	cr_assert_eq(ho_parse(runc_msg, HO_MAX_MESSAGE + 1, &info, &idx, NULL, 0), -EPROTO);
}

/* ---- the transfer ------------------------------------------------------------------------- */

/* ---- Kubernetes' names from the annotations (msg.h) ---------------------------------------- */

#define K8S_HEAD "{\"pid\":77,\"fds\":[\"seccompFd\"],\"state\":{\"id\":\"" HEX64 "\""
#define HEX64	 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* The name a message gives its client, and the note, after a parse that must succeed. */
static void name_of(const char *json, char *name, size_t cap, struct ho_info *info)
{
	char err[256];
	int idx;

	cr_assert_eq(parse(json, info, &idx, err, sizeof(err)), 0, "%s: %s", json, err);
	ho_client_name(info, name, cap);
}

Test(handoff, names_from_cri_annotations)
{
	struct ho_info info;
	char name[HO_CLIENT_NAME_MAX];

	/* containerd's CRI plugin: the names a pod's container gets */
	name_of(K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
			 "\"io.kubernetes.cri.sandbox-namespace\":\"default\","
			 "\"io.kubernetes.cri.sandbox-name\":\"db-0\","
			 "\"io.kubernetes.cri.container-name\":\"postgres\"}}}",
		name, sizeof(name), &info);
	cr_assert_str_eq(name, "default/db-0/postgres");
	cr_assert_str_eq(info.id, HEX64, "the id stays available");
	cr_assert_str_eq(info.name_note, "");

	/* the older keys (dockershim, CRI-O), and CRI's winning where both are */
	name_of(K8S_HEAD
		",\"annotations\":{\"io.kubernetes.pod.namespace\":\"kube-system\","
		"\"io.kubernetes.pod.name\":\"old-pod\",\"io.kubernetes.container.name\":\"c\","
		"\"io.kubernetes.cri.sandbox-name\":\"new-pod\"}}}",
		name, sizeof(name), &info);
	cr_assert_str_eq(name, "kube-system/new-pod/c");

	/* the parts present only: a sandbox (pause) container has no container name */
	name_of(K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.sandbox-namespace\":\"ns1\","
			 "\"io.kubernetes.cri.sandbox-name\":\"p\"}}}",
		name, sizeof(name), &info);
	cr_assert_str_eq(name, "ns1/p");
}

Test(handoff, names_without_annotations)
{
	struct ho_info info;
	char name[HO_CLIENT_NAME_MAX];

	name_of(K8S_HEAD "}}", name, sizeof(name), &info);
	cr_assert_str_eq(name, HEX64 " (pid 77)", "the whole id, not cut at 64 bytes");
	name_of(K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}}}",
		name, sizeof(name), &info);
	cr_assert_str_eq(name, HEX64 " (pid 77)");
	name_of(OK_HEAD "}", name, sizeof(name), &info);
	cr_assert_str_eq(name, "pid 1");
	name_of(K8S_HEAD ",\"annotations\":null}}", name, sizeof(name), &info);
	cr_assert_str_eq(name, HEX64 " (pid 77)");
	/* a short buffer cuts, and terminates */
	name_of(K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"abcdefgh\"}}}",
		name, 5, &info);
	cr_assert_str_eq(name, "abcd");
}

/* Hostile values are ignored, never refused and never shown; the note says which key. */
Test(handoff, names_hostile)
{
	static const struct {
		const char *value; /* as JSON */
		const char *why;
	} bad[] = {
		{ "\"a\\nb\"", "printable" },	   { "\"a b\"", "printable" },
		{ "\"\"", "printable" },	   { "\"x\\u0000y\"", "printable" },
		{ "\"caf\\u00e9\"", "printable" }, { "\"\\u001b[31mred\"", "printable" },
		{ "\"a/b\"", "without '/'" },	   { "\"a\\\\b\"", "printable" },
		{ "\"q\\\"\"", "printable" },	   { "5", "not a string" },
		{ "{}", "not a string" },	   { "[\"a\"]", "not a string" },
	};
	struct ho_info info;
	char json[1024], name[HO_CLIENT_NAME_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(json, sizeof(json),
			 K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.sandbox-name\":%s,"
				  "\"io.kubernetes.cri.container-name\":\"ok\"}}}",
			 bad[i].value);
		name_of(json, name, sizeof(name), &info);
		cr_expect_str_eq(name, "ok", "%s", bad[i].value);
		cr_expect(strstr(info.name_note, "io.kubernetes.cri.sandbox-name ignored: "),
			  "%s: %s", bad[i].value, info.name_note);
		cr_expect(strstr(info.name_note, bad[i].why), "%s: %s", bad[i].value,
			  info.name_note);
	}

	/* length caps: 63 bytes for a namespace and a container, 253 for a pod */
	for (int part = 0; part < 3; part++) {
		static const char *const key[] = { "io.kubernetes.cri.sandbox-namespace",
						   "io.kubernetes.cri.sandbox-name",
						   "io.kubernetes.cri.container-name" };
		int cap = part == 1 ? 253 : 63;

		for (int n = cap; n <= cap + 1; n++) {
			snprintf(json, sizeof(json),
				 K8S_HEAD ",\"annotations\":{\"%s\":\"%0*d\"}}}", key[part], n, 0);
			name_of(json, name, sizeof(name), &info);
			if (n == cap)
				cr_expect_eq(strlen(name), (size_t)cap, "%s at %d", key[part], n);
			else
				cr_expect_str_eq(name, HEX64 " (pid 77)", "%s at %d", key[part], n);
		}
	}

	/* annotations that are not an object: ignored, the message is still served */
	name_of(K8S_HEAD ",\"annotations\":[\"io.kubernetes.cri.sandbox-name\"]}}", name,
		sizeof(name), &info);
	cr_assert_str_eq(name, HEX64 " (pid 77)");
	cr_assert(strstr(info.name_note, "not an object"), "%s", info.name_note);

	/* the CRI key hostile, the older one fine: the older one names it */
	name_of(K8S_HEAD ",\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"a\\r\\nb\","
			 "\"io.kubernetes.pod.name\":\"fine\"}}}",
		name, sizeof(name), &info);
	cr_assert_str_eq(name, "fine");
	/* and every part at its longest fits the client name whole */
	{
		char pod[254], nsn[64], ctr[64];

		memset(pod, 'p', 253);
		pod[253] = '\0';
		memset(nsn, 'n', 63);
		nsn[63] = '\0';
		memset(ctr, 'c', 63);
		ctr[63] = '\0';
		snprintf(json, sizeof(json),
			 K8S_HEAD
			 ",\"annotations\":{\"io.kubernetes.cri.sandbox-namespace\":\"%s\","
			 "\"io.kubernetes.cri.sandbox-name\":\"%s\","
			 "\"io.kubernetes.cri.container-name\":\"%s\"}}}",
			 nsn, pod, ctr);
		name_of(json, name, sizeof(name), &info);
		cr_assert_eq(strlen(name), 63 + 1 + 253 + 1 + 63);
	}
}

/* ---- listenerMetadata (meta.h) ------------------------------------------------------------- */

Test(handoff, meta_separators)
{
	static const char *const same[] = {
		"ns=pod1 ns-traps",
		"ns=pod1,ns-traps",
		"ns=pod1;ns-traps",
		"ns=pod1\nns-traps",
		"ns=pod1\r\nns-traps\n",
		"\n\nns-traps\tns=pod1 ,; ",
		"semvisor-run ns-traps ns=pod1",
	};
	struct ho_meta m;

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		ho_meta_parse(same[i], &m);
		cr_expect(m.ns_traps, "%s", same[i]);
		cr_expect_str_eq(m.ns, "pod1", "%s", same[i]);
		cr_expect(m.ns_given && !m.ns_bad, "%s", same[i]);
		cr_expect_str_eq(m.note, "", "%s", same[i]);
	}
	ho_meta_parse("", &m);
	cr_assert(!m.ns_traps && !m.ns_given && !m.ns[0] && !m.note[0]);
	ho_meta_parse("ns-traps", &m);
	cr_assert(m.ns_traps && !m.ns_given && !m.ptrace);
	/* what semvisor-run --daemon --backend=ptrace sends */
	ho_meta_parse("semvisor-run ns-traps ptrace", &m);
	cr_assert(m.ns_traps && m.ptrace && !m.note[0], "%s", m.note);
	ho_meta_parse("ptrace=1", &m);
	cr_assert(!m.ptrace && strstr(m.note, "takes no value"), "%s", m.note);
}

/* seccompagent and SPO write KEY=VALUE lines for their own agents: ours are still found. */
Test(handoff, meta_seccompagent_lines)
{
	struct ho_meta m;

	ho_meta_parse("MKDIR_TMPL=/tmp/{{.Namespace}}\nns=pod1\nns-traps\n"
		      "MIDDLEWARE=falco,mkdir\nDEFAULT_ACTION=kill-container",
		      &m);
	cr_assert_str_eq(m.ns, "pod1");
	cr_assert(m.ns_traps);
	cr_assert_str_eq(m.note, "", "other agents' keys are not ours to report: %s", m.note);
	/* on one line, entries are split as they always were */
	ho_meta_parse("OTHER=1 ns=y", &m);
	cr_assert_str_eq(m.ns, "y");
	/* a value holding '=' belongs to its key */
	ho_meta_parse("EXEC_PATTERN=a=b\nns=x", &m);
	cr_assert_str_eq(m.ns, "x");
	cr_assert_str_eq(m.note, "");
}

Test(handoff, meta_malformed)
{
	static const struct {
		const char *meta;
		bool bad;	  /* the ns entry is refused */
		const char *note; /* in the note */
	} cases[] = {
		{ "ns", true, "'ns' without '=NAME'" },
		{ "ns=", true, "1 to 63 bytes" },
		{ "ns=a\nns=b", true, "ns given twice, differently" },
		{ "ns=a ns=a", false, "" },
		{ "ns=\x01x", true, "printable ASCII" },
		{ "ns=caf\xc3\xa9", true,
		  "'ns=caf\\xc3\\xa9': a namespace name is printable ASCII" },
		{ "ns="
		  "0123456789012345678901234567890123456789012345678901234567890123",
		  true, "1 to 63 bytes" },
		{ "ns-traps=yes", false, "takes no value" },
		{ "ns-trap", false, "'ns-trap' ignored: unknown" },
		{ "nstraps ns=ok", false, "'nstraps' ignored: unknown" },
	};
	struct ho_meta m;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ho_meta_parse(cases[i].meta, &m);
		cr_expect_eq(m.ns_bad, cases[i].bad, "%s", cases[i].meta);
		if (cases[i].bad)
			cr_expect_str_eq(m.ns, "", "%s", cases[i].meta);
		cr_expect(strstr(m.note, cases[i].note), "%s: note '%s'", cases[i].meta, m.note);
		if (!cases[i].note[0])
			cr_expect_str_eq(m.note, "", "%s", cases[i].meta);
	}
	ho_meta_parse("ns-traps=yes", &m);
	cr_assert(!m.ns_traps, "a known word with a value is not taken");
	/* a 63-byte name is fine */
	ho_meta_parse("ns=012345678901234567890123456789012345678901234567890123456789012", &m);
	cr_assert_eq(strlen(m.ns), 63);
}

/* Whatever the metadata holds, the parse ends, the note stays bounded and printable. */
Test(handoff, meta_hostile)
{
	char meta[512];
	struct ho_meta m;
	unsigned seed = 19;

	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < sizeof(meta) - 1; i++) {
			static const char alpha[] = "ns=-traps \n,;\t\r\x01\xff\x7f'\\";

			seed = seed * 1103515245u + 12345u;
			meta[i] = alpha[(seed >> 16) % (sizeof(alpha) - 1)];
		}
		meta[sizeof(meta) - 1] = '\0';
		ho_meta_parse(meta, &m);
		cr_assert_lt(strlen(m.note), sizeof(m.note));
		for (const char *p = m.note; *p; p++)
			cr_assert(*p >= 0x20 && *p < 0x7f, "unprintable byte in the note: %s",
				  m.note);
		cr_assert(!m.ns_bad || !m.ns[0]);
	}
}

Test(handoff, roundtrip)
{
	struct ho_info in = { .pid = 31337 }, out;
	int sv[2], lfd = get_listener(), fd = -1, before;
	char err[256];

	strcpy(in.id, "ctr-1");
	strcpy(in.metadata, "namespace=blue; \"quoted\" \\ back\tslash\x01\x1f caf\xc3\xa9");
	strcpy(in.bundle, "/run/bundle");
	pair(sv);
	before = count_fds();
	cr_assert_eq(ho_send(sv[0], lfd, &in), 0);
	/* no timeout at all (-1) */
	cr_assert_eq(ho_recv(sv[1], &fd, &out, -1, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(out.pid, 31337);
	cr_assert_str_eq(out.id, in.id);
	cr_assert_str_eq(out.metadata, in.metadata);
	cr_assert_str_eq(out.bundle, in.bundle);
	cr_assert_neq(fd, lfd);
	cr_assert(is_listener(fd));
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	cr_assert_eq(count_fds(), before);
	close(sv[0]);
	close(sv[1]);
}

/* The received fd is the working listener: a trapped call is answered through it. */
Test(handoff, roundtrip_serves_a_call)
{
	struct ho_info in = { .pid = 1 }, out;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int sv[2], fd, status;
	char err[256];
	pid_t child;

	pair(sv);
	cr_assert_eq(ho_send(sv[0], get_listener(), &in), 0);
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)), 0, "%s", err);
	close(get_listener()); /* only the received copy is left */
	fx_magic_listener_closed();

	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0)
		_exit(syscall(__NR_getpgid, FX_MAGIC_PID) == 4242 ? 0 : 1);
	memset(&req, 0, sizeof(req));
	cr_assert_eq(ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req), 0, "%s", strerror(errno));
	cr_assert_eq(req.data.nr, __NR_getpgid);
	cr_assert_eq(req.data.args[0], FX_MAGIC_PID);
	cr_assert_eq(req.pid, (uint32_t)child);
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	resp.val = 4242;
	cr_assert_eq(ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp), 0, "%s", strerror(errno));
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
}

Test(handoff, runc_message)
{
	struct ho_info out;
	int sv[2], lfd = get_listener(), fd, before;
	char err[256];

	pair(sv);
	send_raw(sv[0], runc_msg, strlen(runc_msg), &lfd, 1);
	close(sv[0]); /* runc closes after sending: EOF right behind the message */
	before = count_fds();
	/* timeout 0: no waiting, but what is already there is read */
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 0, err, sizeof(err)), 0, "%s", err);
	check_runc_info(&out);
	cr_assert(is_listener(fd));
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	close(sv[1]);
}

/* The message arrives a byte at a time (the fd with the first): reassembled. */
Test(handoff, dribbled)
{
	struct sender s = { .data = runc_msg, .len = strlen(runc_msg), .chunk = 1, .nfds = 1 };
	struct ho_info out;
	int sv[2], fd, before;
	char err[256];

	s.fds[0] = get_listener();
	pair(sv);
	s.sock = sv[0];
	before = count_fds();
	sender_start(&s);
	/* and the sender keeps the connection open: completeness, not EOF, ends the read */
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 10000, err, sizeof(err)), 0, "%s", err);
	sender_join(&s);
	check_runc_info(&out);
	cr_assert(is_listener(fd));
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

struct bg_send {
	int sock, fd, rc;
	struct ho_info info;
	atomic_bool done;
};

static void *bg_send_main(void *arg)
{
	struct bg_send *b = arg;

	b->rc = ho_send(b->sock, b->fd, &b->info);
	atomic_store(&b->done, true);
	return NULL;
}

/* A non-blocking socket with a small buffer takes the message in pieces; ho_send finishes it. */
Test(handoff, send_in_pieces)
{
	struct bg_send b = { .info = { .pid = 99 } };
	struct ho_info out;
	int sv[2], fd, one = 1, queued = 0;
	pthread_t t;
	char err[256];

	/* each byte escapes to six ("\u0001"): the longest message ho_send can make */
	memset(b.info.id, 1, sizeof(b.info.id) - 1);
	memset(b.info.metadata, 1, sizeof(b.info.metadata) - 1);
	memset(b.info.bundle, 1, sizeof(b.info.bundle) - 1);
	pair(sv);
	cr_assert_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one)), 0);
	cr_assert_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	b.sock = sv[0];
	b.fd = get_listener();
	cr_assert_eq(pthread_create(&t, NULL, bg_send_main, &b), 0);
	/* part of it is queued and the sender waits for room to send the rest */
	for (int waited = 0; waited < 5000 && !queued; waited += 10) {
		sleep_ms(10);
		cr_assert_eq(ioctl(sv[1], FIONREAD, &queued), 0);
	}
	cr_assert_gt(queued, 0);
	sleep_ms(100);
	cr_assert_eq(ioctl(sv[1], FIONREAD, &queued), 0);
	cr_assert_lt(queued, 6 * (127 + 511 + 255), "queued %d: the message went whole", queued);
	cr_assert(!atomic_load(&b.done), "ho_send returned with the message half sent");

	cr_assert_eq(ho_recv(sv[1], &fd, &out, 5000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(b.rc, 0);
	cr_assert_eq(out.pid, 99);
	cr_assert_str_eq(out.id, b.info.id);
	cr_assert_str_eq(out.metadata, b.info.metadata);
	cr_assert_str_eq(out.bundle, b.info.bundle);
	cr_assert(is_listener(fd));
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

Test(handoff, send_refuses)
{
	struct ho_info in = { .pid = 1 };
	int sv[2], lfd = get_listener();
	char buf[16];

	pair(sv);
	cr_assert_eq(ho_send(sv[0], -1, &in), -EBADF);
	in.pid = 0;
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EINVAL);
	in.pid = -5;
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EINVAL);
	in.pid = 1;
	memset(in.id, 'a', sizeof(in.id)); /* no terminating NUL */
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EINVAL);
	in.id[0] = '\0';
	strcpy(in.metadata, "bad \xc3 utf-8");
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EINVAL);
	strcpy(in.metadata, "\xed\xa0\x80"); /* an encoded surrogate */
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EINVAL);
	in.metadata[0] = '\0';
	/* nothing went out for any of those */
	cr_assert_eq(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
	cr_assert_eq(errno, EAGAIN);
	/* a peer that hung up: EPIPE, not a SIGPIPE that kills the sender */
	close(sv[1]);
	cr_assert_eq(ho_send(sv[0], lfd, &in), -EPIPE);
	close(sv[0]);
}

Test(handoff, no_fd)
{
	expect_refused(runc_msg, strlen(runc_msg), NULL, 0, -EPROTO,
		       "no file descriptor came with the agent message");
}

/* A message naming two fds: the other one is closed in the receiver, the listener kept. */
Test(handoff, two_fds_other_closed)
{
	static const char *const msgs[] = {
		"{\"pid\":5,\"fds\":[\"seccompFd\",\"other\"]}",
		"{\"pid\":5,\"fds\":[\"other\",\"seccompFd\"]}",
	};

	signal(SIGPIPE, SIG_IGN);
	for (int slot = 0; slot < 2; slot++) {
		struct ho_info out;
		int sv[2], p[2], fds[2], fd, a, b, before;
		char err[256];

		cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
		fds[slot] = get_listener();
		fds[!slot] = p[0];
		pair(sv);
		send_raw(sv[0], msgs[slot], strlen(msgs[slot]), fds, 2);
		close(p[0]);
		before = count_fds();
		next_two_fds(&a, &b);
		cr_assert_eq(ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)), 0, "%s", err);
		/* the kernel installed slot 0 as a and slot 1 as b */
		cr_assert_eq(fd, slot ? b : a);
		cr_assert(is_listener(fd));
		cr_assert_eq(fcntl(slot ? a : b, F_GETFD), -1, "the other fd is still open");
		cr_assert_eq(errno, EBADF);
		cr_assert_eq(count_fds(), before + 1);
		/* the pipe's read end is gone everywhere: the writer sees EPIPE */
		cr_assert_eq(write(p[1], "x", 1), -1);
		cr_assert_eq(errno, EPIPE);
		close(p[1]);
		close(fd);
		close(sv[0]);
		close(sv[1]);
	}
}

/* Also a message naming one fd while two come: the unnamed one is closed. */
Test(handoff, unnamed_extra_fd_closed)
{
	int sv[2], p[2], fds[2], fd, a, b, before;
	struct ho_info out;
	char err[256];

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	fds[0] = get_listener();
	fds[1] = p[0];
	pair(sv);
	send_raw(sv[0], runc_msg, strlen(runc_msg), fds, 2);
	before = count_fds();
	next_two_fds(&a, &b);
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fd, a);
	cr_assert_eq(fcntl(b, F_GETFD), -1);
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

Test(handoff, index_out_of_range)
{
	static const char msg[] = "{\"pid\":5,\"fds\":[\"other\",\"seccompFd\"]}";
	int lfd = get_listener();

	expect_refused(msg, strlen(msg), &lfd, 1, -EPROTO,
		       "\"seccompFd\" names SCM_RIGHTS slot 1 but only 1 file descriptor came");
}

/* More fds than the receiver takes: every one that arrived is closed. */
Test(handoff, too_many_fds)
{
	int fds[64], lfd = get_listener();

	for (int i = 0; i < 64; i++)
		fds[i] = lfd;
	/* 20 fit the control buffer (it has room for credentials and a pidfd too)... */
	expect_refused(runc_msg, strlen(runc_msg), fds, 20, -EPROTO,
		       "carried more than 16 file descriptors");
	/* ...64 do not: the kernel truncates, and what did arrive is closed */
	expect_refused(runc_msg, strlen(runc_msg), fds, 64, -EPROTO,
		       "more control data than expected");
}

/* SCM_RIGHTS in a later piece of the stream breaks "all in the first sendmsg". */
Test(handoff, fds_after_first_bytes)
{
	struct ho_info out;
	int sv[2], lfd = get_listener(), fd, before;
	char err[256];
	size_t half = strlen(runc_msg) / 2;

	pair(sv);
	send_raw(sv[0], runc_msg, half, &lfd, 1);
	send_raw(sv[0], runc_msg + half, strlen(runc_msg) - half, &lfd, 1);
	before = count_fds();
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "file descriptors came after the first bytes"), "%s", err);
	cr_assert_eq(fd, -1);
	cr_assert_eq(count_fds(), before);
	close(sv[0]);
	close(sv[1]);
}

/* A message of exactly HO_MAX_MESSAGE bytes: an annotation pads it. */
static char *sized_message(size_t total)
{
	static const char head[] = "{\"pid\":12,\"fds\":[\"seccompFd\"],\"state\":{\"id\":\"big\","
				   "\"annotations\":{\"pad\":\"";
	static const char tail[] = "\"}}}";
	char *m = malloc(total + 1);

	cr_assert_not_null(m);
	memcpy(m, head, sizeof(head) - 1);
	memset(m + sizeof(head) - 1, 'p', total - (sizeof(head) - 1) - (sizeof(tail) - 1));
	memcpy(m + total - (sizeof(tail) - 1), tail, sizeof(tail));
	cr_assert_eq(strlen(m), total);
	return m;
}

Test(handoff, largest_message)
{
	struct sender s = { .len = HO_MAX_MESSAGE, .nfds = 1, .chunk = 4096 };
	struct ho_info out;
	int sv[2], fd, before;
	char err[256];

	s.data = sized_message(HO_MAX_MESSAGE);
	s.fds[0] = get_listener();
	pair(sv);
	s.sock = sv[0];
	before = count_fds();
	sender_start(&s);
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 5000, err, sizeof(err)), 0, "%s", err);
	sender_join(&s);
	cr_assert_eq(out.pid, 12);
	cr_assert_str_eq(out.id, "big");
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	close(sv[0]);
	close(sv[1]);
	free((void *)s.data);
}

Test(handoff, oversized)
{
	struct sender s = { .len = HO_MAX_MESSAGE + 1, .nfds = 1 };
	struct ho_info out;
	int sv[2], fd, before;
	char err[256];

	s.data = sized_message(HO_MAX_MESSAGE + 1);
	s.fds[0] = get_listener();
	pair(sv);
	s.sock = sv[0];
	before = count_fds();
	sender_start(&s);
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 5000, err, sizeof(err)), -EMSGSIZE, "%s", err);
	sender_join(&s);
	cr_assert(strstr(err, "longer than 65536 bytes"), "%s", err);
	cr_assert_eq(fd, -1);
	cr_assert_eq(count_fds(), before);
	close(sv[0]);
	close(sv[1]);
	free((void *)s.data);
}

Test(handoff, timeout)
{
	struct ho_info out;
	int sv[2], lfd = get_listener(), fd, before;
	char err[256];
	int64_t t0, took;

	pair(sv);
	before = count_fds();
	/* nothing at all */
	t0 = now_ms();
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 150, err, sizeof(err)), -ETIMEDOUT);
	took = now_ms() - t0;
	cr_assert(took >= 150 && took < 2000, "took %lld ms", (long long)took);
	cr_assert(strstr(err, "no complete agent message within 150 ms (0 bytes came)"), "%s", err);
	/* half a message, its fd, and then silence: the fd that came is closed */
	send_raw(sv[0], runc_msg, 40, &lfd, 1);
	t0 = now_ms();
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 200, err, sizeof(err)), -ETIMEDOUT);
	took = now_ms() - t0;
	cr_assert(took >= 200 && took < 2000, "took %lld ms", (long long)took);
	cr_assert(strstr(err, "(40 bytes came)"), "%s", err);
	cr_assert_eq(fd, -1);
	cr_assert_eq(count_fds(), before);
	close(sv[0]);
	close(sv[1]);

	/* the deadline bounds the whole receive, not each read: a byte every 30 ms never ends it
	   (a per-read timeout would return 300 ms after the last byte, at 2 s) */
	{
		struct sender s = {
			.data = runc_msg, .len = 60, .chunk = 1, .nfds = 1, .pause_ms = 30
		};

		s.fds[0] = lfd;
		pair(sv);
		s.sock = sv[0];
		sender_start(&s);
		t0 = now_ms();
		cr_assert_eq(ho_recv(sv[1], &fd, &out, 300, err, sizeof(err)), -ETIMEDOUT);
		took = now_ms() - t0;
		cr_assert(took >= 300 && took < 1500, "took %lld ms", (long long)took);
		sender_join(&s);
		cr_assert_eq(count_fds(), before); /* this pair replaced the first */
		close(sv[0]);
		close(sv[1]);
	}
}

Test(handoff, eof)
{
	int lfd = get_listener();

	expect_refused("", 0, NULL, 0, -EPROTO, "the connection closed before any agent message");
	expect_refused(runc_msg, 100, &lfd, 1, -EPROTO,
		       "malformed agent message: premature end of input");
	expect_refused("{\"pid\":1,", 9, &lfd, 1, -EPROTO,
		       "malformed agent message: string or '}' expected near end of file");
}

Test(handoff, malformed_over_socket)
{
	static const char m1[] = "{\"pid\":1,\"fds\":[\"seccompFd\"]} trailing";
	static const char m2[] = "{\"pid\":1,\"fds\":[\"seccompFd\"],\"pid\":2}";
	static const char m3[] = "[\"seccompFd\"]";
	static const char m4[] = "{\"pid\":1,\"fds\":[\"seccompFd\"],\"metadata\":\"\\ud800\"}";
	int lfd = get_listener();
	char deep[128];

	expect_refused(m1, strlen(m1), &lfd, 1, -EPROTO, "end of file expected near 'trailing'");
	expect_refused(m2, strlen(m2), &lfd, 1, -EPROTO, "duplicate object key near '\"pid\"'");
	expect_refused(m3, strlen(m3), &lfd, 1, -EPROTO, "not a JSON object at byte 0");
	expect_refused(m4, strlen(m4), &lfd, 1, -EPROTO, "invalid Unicode '\\uD800'");
	/* nesting is refused as soon as it is seen, without waiting for the rest */
	memset(deep, '[', sizeof(deep));
	deep[0] = '{';
	deep[1] = '"';
	deep[2] = 'a';
	deep[3] = '"';
	deep[4] = ':';
	expect_refused(deep, sizeof(deep), &lfd, 1, -EPROTO, "nest deeper than 32 at byte 36");
}

Test(handoff, not_a_listener)
{
	int p[2], efd = eventfd(0, EFD_CLOEXEC), sock[2];

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_geq(efd, 0);
	pair(sock);
	expect_refused(runc_msg, strlen(runc_msg), &p[0], 1, -EPROTO,
		       "the fd is not a seccomp listener (it is pipe:[");
	/* an anonymous inode of another kind */
	expect_refused(runc_msg, strlen(runc_msg), &efd, 1, -EPROTO,
		       "the fd is not a seccomp listener (it is anon_inode:[eventfd])");
	expect_refused(runc_msg, strlen(runc_msg), &sock[0], 1, -EPROTO,
		       "the fd is not a seccomp listener (it is socket:[");
	close(p[0]);
	close(p[1]);
	close(efd);
	close(sock[0]);
	close(sock[1]);
}

/* A pidfd stands for a listener only in a message that asks to be traced (meta.h). */
Test(handoff, pidfd_only_for_ptrace)
{
	static const char traced[] =
	    "{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"],\"pid\":1,"
	    "\"metadata\":\"semvisor-run ns-traps ptrace\",\"state\":{\"id\":\"x\"}}";
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0), sv[2], fd = -1;
	struct ho_info info;
	char err[256];

	cr_assert_geq(pidfd, 0, "pidfd_open: %s", strerror(errno));
	expect_refused(runc_msg, strlen(runc_msg), &pidfd, 1, -EPROTO,
		       "the fd is not a seccomp listener (it is anon_inode:[pidfd])");
	pair(sv);
	send_raw(sv[0], traced, strlen(traced), &pidfd, 1);
	close(sv[0]);
	cr_assert_eq(ho_recv(sv[1], &fd, &info, 2000, err, sizeof(err)), 0, "%s", err);
	cr_assert_geq(fd, 0);
	cr_assert_str_eq(info.metadata, "semvisor-run ns-traps ptrace");
	close(fd);
	close(sv[1]);
	close(pidfd);
}

Test(handoff, not_a_socket)
{
	struct ho_info out;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), lfd;
	char err[256];

	cr_assert_eq(ho_recv(fd, &lfd, &out, 1000, err, sizeof(err)), -ENOTSOCK);
	cr_assert(strstr(err, "reading the agent message"), "%s", err);
	cr_assert_eq(lfd, -1);
	close(fd);
	cr_assert_eq(ho_recv(fd, &lfd, &out, 1000, err, sizeof(err)), -EBADF);
}

/* A receiving socket that asks for credentials and the sender's pidfd (SO_PASSPIDFD, Linux 6.5)
   gets them with every read: the pidfds are closed, the credentials ignored. */
Test(handoff, passcred_and_pidfd)
{
	struct sender s = {
		.data = runc_msg, .len = strlen(runc_msg), .chunk = 50, .nfds = 1, .pause_ms = 5
	};
	struct ho_info out;
	int sv[2], one = 1, fd, before;
	char err[256];

	s.fds[0] = get_listener();
	pair(sv);
	s.sock = sv[0];
	cr_assert_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
	if (setsockopt(sv[1], SOL_SOCKET, SO_PASSPIDFD, &one, sizeof(one)))
		cr_log_warn("SO_PASSPIDFD: %s; testing credentials only", strerror(errno));
	before = count_fds();
	sender_start(&s);
	cr_assert_eq(ho_recv(sv[1], &fd, &out, 5000, err, sizeof(err)), 0, "%s", err);
	sender_join(&s);
	check_runc_info(&out);
	cr_assert(is_listener(fd));
	cr_assert_eq(count_fds(), before + 1);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

/*
 * Without /proc the listener is recognised by asking it (ID_VALID); nothing else passes. In a
 * child: hiding /proc needs a single-threaded process, and the sanitizers' exit-time checks read
 * /proc, so the child reports by exit code and leaves with _exit.
 */
static int without_proc_child(int lfd)
{
	int sv[2], p[2], efd, fd;
	struct ho_info in = { .pid = 3 }, out;
	char err[256];

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    umount2("/proc", MNT_DETACH))
		return 77;
	if (!access("/proc/self/fd", F_OK))
		return 10;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(p) || (efd = eventfd(0, 0)) < 0)
		return 11;
	if (ho_send(sv[0], lfd, &in) || ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)))
		return 12;
	if (out.pid != 3 || fd < 0)
		return 13;
	send_raw(sv[0], runc_msg, strlen(runc_msg), &p[0], 1);
	if (ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)) != -EPROTO ||
	    !strstr(err, "not a seccomp listener (it is unknown: no /proc)"))
		return 14;
	send_raw(sv[0], runc_msg, strlen(runc_msg), &efd, 1);
	if (ho_recv(sv[1], &fd, &out, 1000, err, sizeof(err)) != -EPROTO ||
	    !strstr(err, "not a seccomp listener"))
		return 15;
	return 0;
}

Test(handoff, without_proc)
{
	int lfd = get_listener(), status;
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (child == 0)
		_exit(without_proc_child(lfd));
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status), "status %#x", status);
	if (WEXITSTATUS(status) == 77)
		cr_skip_test("cannot hide /proc here");
	cr_assert_eq(WEXITSTATUS(status), 0, "check %d failed without /proc", WEXITSTATUS(status));
}

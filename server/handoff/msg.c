/* SPDX-License-Identifier: MIT */
/*
 * The agent message (SPEC B7): a listener fd and the JSON "container process state" that names
 * it, in one connection; this file reads and writes the JSON, xfer.c moves it and the fds.
 * Whoever connects to the agent socket is outside our trust: the reader below is strict and
 * bounded so that a hostile or broken sender costs one refused connection and never an fd, a
 * crash or unbounded work.
 *
 * The JSON reader
 *   RFC 8259 with no extensions: one object at the top, then only whitespace. Strings must be
 *   valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF) and contain no raw
 *   control characters; escapes are the eight single-letter ones and \uXXXX, where a surrogate
 *   must come as a high-low pair. Numbers follow the JSON grammar (no leading zeros, no "+", no
 *   ".5", no hex). Containers nest at most HO_MAX_DEPTH deep, which bounds the recursion.
 *   It extracts, without building a tree:
 *     pid              integer in 1..INT32_MAX (1234.0 or 1e3 are refused: not integers)
 *     metadata         string, fits ho_info.metadata
 *     fds              array of at most HO_MAX_FDS strings; "seccompFd" exactly once
 *     state.id         string, fits ho_info.id
 *     state.bundle     string, fits ho_info.bundle
 *     state.pid        as pid; used only when the top-level "pid" is absent
 *   null stands for "absent" in each of them (encoding/json, which runc uses, reads it so).
 *   A string that does not fit its buffer, or holds \u0000, is refused rather than cut: a
 *   truncated id or metadata could name someone else's namespace.
 *   Duplicate keys: a key we extract that appears twice in its object is refused, since two
 *   parsers picking different copies is the classic way to smuggle a value past a check. Keys
 *   we skip are not compared, as they cannot change the result.
 *   Any other key and its value are skipped (after full validation).
 *
 * Errors name what was wrong and the byte offset where the reader noticed it, for the log of a
 * daemon that drops the connection and keeps serving everyone else.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff/msg.h"

/* Key and fd-name buffers: longer than anything we look for, so longer input simply differs. */
#define HO_KEY_MAX 16

void ho_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- the JSON reader ---------------------------------------------------------------------- */

/* What the value being read means to us; everything but JT_SKIP is extracted. */
enum jt {
	JT_SKIP,
	JT_ROOT,
	JT_STATE,
	JT_PID,
	JT_STATE_PID,
	JT_METADATA,
	JT_ID,
	JT_BUNDLE,
	JT_FDS,
};

/* Names as the error messages use them. */
static const char *const jt_name[] = {
	[JT_SKIP] = "value",  [JT_ROOT] = "message",	    [JT_STATE] = "state",
	[JT_PID] = "pid",     [JT_STATE_PID] = "state.pid", [JT_METADATA] = "metadata",
	[JT_ID] = "state.id", [JT_BUNDLE] = "state.bundle", [JT_FDS] = "fds",
};

/* Keys we extract, per object, and their bit in jp.seen (duplicate detection). */
struct jkey {
	enum jt in;
	const char *key;
	enum jt what;
	unsigned int bit;
};

static const struct jkey jkeys[] = {
	{ JT_ROOT, "pid", JT_PID, 1u << 0 },	    { JT_ROOT, "metadata", JT_METADATA, 1u << 1 },
	{ JT_ROOT, "fds", JT_FDS, 1u << 2 },	    { JT_ROOT, "state", JT_STATE, 1u << 3 },
	{ JT_STATE, "id", JT_ID, 1u << 4 },	    { JT_STATE, "bundle", JT_BUNDLE, 1u << 5 },
	{ JT_STATE, "pid", JT_STATE_PID, 1u << 6 },
};

struct jp {
	const unsigned char *s;
	size_t len;
	size_t pos;
	int depth;
	char *err;
	size_t errlen;

	struct ho_info *info;
	unsigned int seen;
	bool has_pid, has_state_pid;
	int32_t pid, state_pid;
	int fd_index;
};

/* A decoded string: bytes go to buf while they fit (NUL-terminated); n counts them all. */
struct jstr {
	char *buf; /* NULL: validate only */
	size_t cap;
	size_t n;
	bool nul; /* held \u0000 */
};

__attribute__((format(printf, 3, 4))) static int jp_fail(struct jp *p, size_t at, const char *fmt,
							 ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ho_err(p->err, p->errlen, "malformed agent message: %s at byte %zu", what, at);
	return -EPROTO;
}

static int jp_eof(struct jp *p, const char *inside)
{
	return jp_fail(p, p->pos, "the message ends inside %s", inside);
}

static void jp_ws(struct jp *p)
{
	while (p->pos < p->len) {
		unsigned char c = p->s[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

/* A character for a message: printable as itself, otherwise as a hex byte. */
static const char *jp_show(unsigned char c, char buf[8])
{
	if (c > 0x20 && c < 0x7f)
		snprintf(buf, 8, "'%c'", c);
	else
		snprintf(buf, 8, "0x%02x", c);
	return buf;
}

/* Length of the well-formed UTF-8 sequence at s (Unicode Table 3-7), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0; /* overlong */
		else if (s[0] == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90; /* overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	} else {
		return 0;
	}
	if (n > avail || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

static void js_put(struct jstr *o, const void *bytes, size_t k)
{
	/* Once a piece did not fit, none after it does either (n only grows). */
	if (o->buf && o->n + k < o->cap) {
		memcpy(o->buf + o->n, bytes, k);
		o->buf[o->n + k] = '\0';
	}
	o->n += k;
}

static void js_put_cp(struct jstr *o, uint32_t cp)
{
	unsigned char b[4];
	size_t k;

	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		k = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | (cp >> 6));
		b[1] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | (cp >> 12));
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | (cp >> 18));
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 4;
	}
	js_put(o, b, k);
}

/* Four hex digits at p->s[at]: 0 and *cp, or -1. */
static int jp_hex4(const struct jp *p, size_t at, uint32_t *cp)
{
	uint32_t v = 0;

	if (p->len - at < 4)
		return -1;
	for (size_t i = 0; i < 4; i++) {
		unsigned char c = p->s[at + i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*cp = v;
	return 0;
}

/* The \uXXXX escape at p->pos (the backslash), with its low half if it is a high surrogate. */
static int jp_unicode(struct jp *p, struct jstr *o)
{
	size_t at = p->pos;
	uint32_t cp, lo;

	if (jp_hex4(p, at + 2, &cp))
		return jp_fail(p, at, "\\u must be followed by four hex digits");
	p->pos += 6;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return jp_fail(p, at, "\\u%04x is a low surrogate without a high one before it",
			       cp);
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
		    jp_hex4(p, p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
			return jp_fail(p, at,
				       "\\u%04x is a high surrogate not followed by a low one", cp);
		p->pos += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0)
		o->nul = true;
	js_put_cp(o, cp);
	return 0;
}

/* The string at p->pos (its opening quote), decoded into o. */
static int jp_string(struct jp *p, struct jstr *o)
{
	size_t start = p->pos;
	char shown[8];

	o->n = 0;
	o->nul = false;
	if (o->buf && o->cap)
		o->buf[0] = '\0';
	p->pos++;
	for (;;) {
		unsigned char c, e;
		size_t k;

		if (p->pos >= p->len)
			return jp_fail(p, p->pos,
				       "the message ends inside a string (begun at byte %zu)",
				       start);
		c = p->s[p->pos];
		if (c == '"') {
			p->pos++;
			return 0;
		}
		if (c < 0x20)
			return jp_fail(p, p->pos, "control character %s inside a string",
				       jp_show(c, shown));
		if (c < 0x80 && c != '\\') {
			js_put(o, &c, 1);
			p->pos++;
			continue;
		}
		if (c >= 0x80) {
			k = utf8_seq(p->s + p->pos, p->len - p->pos);
			if (!k)
				return jp_fail(p, p->pos, "invalid UTF-8 inside a string");
			js_put(o, p->s + p->pos, k);
			p->pos += k;
			continue;
		}
		if (p->len - p->pos < 2)
			return jp_fail(p, p->pos, "the message ends inside an escape");
		e = p->s[p->pos + 1];
		switch (e) {
		case '"':
		case '\\':
		case '/':
			break;
		case 'b':
			e = '\b';
			break;
		case 'f':
			e = '\f';
			break;
		case 'n':
			e = '\n';
			break;
		case 'r':
			e = '\r';
			break;
		case 't':
			e = '\t';
			break;
		case 'u':
			if (jp_unicode(p, o))
				return -EPROTO;
			continue;
		default:
			return jp_fail(p, p->pos, "invalid escape \\ followed by %s",
				       jp_show(e, shown));
		}
		js_put(o, &e, 1);
		p->pos += 2;
	}
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* A number at p->pos. *integer: no fraction or exponent; *fits: an integer within int32. */
static int jp_number(struct jp *p, bool *integer, bool *fits, int32_t *value)
{
	size_t start = p->pos;
	bool neg = false, big = false;
	int64_t v = 0;

	*integer = true;
	if (p->s[p->pos] == '-') {
		neg = true;
		p->pos++;
	}
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		return jp_fail(p, start, "a number has no digits");
	if (p->s[p->pos] == '0') {
		p->pos++;
		if (p->pos < p->len && is_digit(p->s[p->pos]))
			return jp_fail(p, start, "a number has a leading zero");
	} else {
		for (; p->pos < p->len && is_digit(p->s[p->pos]); p->pos++) {
			/* Stop accumulating past int32: the digits still count for the grammar. */
			if (!big && (v = v * 10 + (p->s[p->pos] - '0')) > (int64_t)INT32_MAX + 1)
				big = true;
		}
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		*integer = false;
		if (++p->pos >= p->len || !is_digit(p->s[p->pos]))
			return jp_fail(p, start, "a number has no digits after its decimal point");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		*integer = false;
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return jp_fail(p, start, "a number has no digits in its exponent");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (neg)
		v = -v;
	*fits = *integer && !big && v >= INT32_MIN && v <= INT32_MAX;
	*value = *fits ? (int32_t)v : 0;
	return 0;
}

static int jp_value(struct jp *p, enum jt t);

static enum jt jp_key(enum jt in, const struct jstr *k, unsigned int *bit)
{
	*bit = 0;
	if (k->nul || k->n >= k->cap)
		return JT_SKIP;
	for (size_t i = 0; i < sizeof(jkeys) / sizeof(jkeys[0]); i++) {
		if (jkeys[i].in == in && !strcmp(jkeys[i].key, k->buf)) {
			*bit = jkeys[i].bit;
			return jkeys[i].what;
		}
	}
	return JT_SKIP;
}

/* The object at p->pos; in is JT_ROOT, JT_STATE or JT_SKIP. */
static int jp_object(struct jp *p, enum jt in)
{
	size_t start = p->pos;
	char shown[8];

	if (++p->depth > HO_MAX_DEPTH)
		return jp_fail(p, start, "objects and arrays nest deeper than %d", HO_MAX_DEPTH);
	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}') {
		p->pos++;
		p->depth--;
		return 0;
	}
	for (;;) {
		char key[HO_KEY_MAX];
		struct jstr k = { key, sizeof(key), 0, false };
		size_t kpos;
		unsigned int bit;
		enum jt what;

		jp_ws(p);
		if (p->pos >= p->len)
			return jp_eof(p, "an object");
		if (p->s[p->pos] != '"')
			return jp_fail(p, p->pos,
				       "expected a key (a string) in an object, found %s",
				       jp_show(p->s[p->pos], shown));
		kpos = p->pos;
		if (jp_string(p, &k))
			return -EPROTO;
		what = jp_key(in, &k, &bit);
		if (bit) {
			if (p->seen & bit)
				return jp_fail(p, kpos, "\"%s\" appears twice", jt_name[what]);
			p->seen |= bit;
		}
		jp_ws(p);
		if (p->pos >= p->len)
			return jp_eof(p, "an object");
		if (p->s[p->pos] != ':')
			return jp_fail(p, p->pos, "expected ':' after a key, found %s",
				       jp_show(p->s[p->pos], shown));
		p->pos++;
		if (jp_value(p, what))
			return -EPROTO;
		jp_ws(p);
		if (p->pos >= p->len)
			return jp_eof(p, "an object");
		if (p->s[p->pos] == '}')
			break;
		if (p->s[p->pos] != ',')
			return jp_fail(p, p->pos, "expected ',' or '}' in an object, found %s",
				       jp_show(p->s[p->pos], shown));
		p->pos++;
	}
	p->pos++;
	p->depth--;
	return 0;
}

/* One entry of "fds": remember the slot of "seccompFd". */
static int jp_fd_name(struct jp *p, size_t i)
{
	static const char want[] = "seccompFd";
	char name[HO_KEY_MAX];
	struct jstr n = { name, sizeof(name), 0, false };
	size_t at = p->pos;

	if (i >= HO_MAX_FDS)
		return jp_fail(p, at, "fds names more than %d descriptors", HO_MAX_FDS);
	if (p->s[p->pos] != '"')
		return jp_fail(p, at, "fds[%zu] is not a string", i);
	if (jp_string(p, &n))
		return -EPROTO;
	if (n.nul || n.n != sizeof(want) - 1 || memcmp(name, want, n.n))
		return 0;
	if (p->fd_index >= 0)
		return jp_fail(p, at, "fds names \"seccompFd\" twice");
	p->fd_index = (int)i;
	return 0;
}

/* The array at p->pos; t is JT_FDS or JT_SKIP. */
static int jp_array(struct jp *p, enum jt t)
{
	size_t start = p->pos;
	char shown[8];

	if (++p->depth > HO_MAX_DEPTH)
		return jp_fail(p, start, "objects and arrays nest deeper than %d", HO_MAX_DEPTH);
	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']') {
		p->pos++;
		p->depth--;
		return 0;
	}
	for (size_t i = 0;; i++) {
		jp_ws(p);
		if (p->pos >= p->len)
			return jp_eof(p, "an array");
		if (t == JT_FDS ? jp_fd_name(p, i) : jp_value(p, JT_SKIP))
			return -EPROTO;
		jp_ws(p);
		if (p->pos >= p->len)
			return jp_eof(p, "an array");
		if (p->s[p->pos] == ']')
			break;
		if (p->s[p->pos] != ',')
			return jp_fail(p, p->pos, "expected ',' or ']' in an array, found %s",
				       jp_show(p->s[p->pos], shown));
		p->pos++;
	}
	p->pos++;
	p->depth--;
	return 0;
}

static const char *jp_type_of(unsigned char c)
{
	switch (c) {
	case '"':
		return "a string";
	case '{':
		return "an object";
	case '[':
		return "an array";
	case 't':
	case 'f':
		return "a boolean";
	default:
		return "a number";
	}
}

static int jp_wrong_type(struct jp *p, enum jt t, const char *want)
{
	return jp_fail(p, p->pos, "\"%s\" must be %s, not %s", jt_name[t], want,
		       jp_type_of(p->s[p->pos]));
}

/* A string field of ho_info: refused whole if it does not fit, never cut. */
static int jp_field(struct jp *p, enum jt t, char *buf, size_t cap)
{
	struct jstr o = { buf, cap, 0, false };
	size_t at = p->pos;

	if (jp_string(p, &o))
		return -EPROTO;
	if (o.nul)
		return jp_fail(p, at, "\"%s\" contains a NUL character (\\u0000)", jt_name[t]);
	if (o.n >= cap)
		return jp_fail(p, at, "\"%s\" is %zu bytes long, more than the %zu allowed",
			       jt_name[t], o.n, cap - 1);
	return 0;
}

static int jp_pid(struct jp *p, enum jt t)
{
	size_t at = p->pos;
	bool integer, fits;
	int32_t v;

	if (jp_number(p, &integer, &fits, &v))
		return -EPROTO;
	if (!integer)
		return jp_fail(p, at, "\"%s\" is not an integer", jt_name[t]);
	if (!fits || v <= 0)
		return jp_fail(p, at, "\"%s\" is not a process id (1 to %d)", jt_name[t],
			       INT32_MAX);
	if (t == JT_PID) {
		p->pid = v;
		p->has_pid = true;
	} else {
		p->state_pid = v;
		p->has_state_pid = true;
	}
	return 0;
}

static int jp_literal(struct jp *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return jp_fail(p, p->pos, "invalid literal (expected %s)", word);
	p->pos += n;
	return 0;
}

static int jp_value(struct jp *p, enum jt t)
{
	bool integer, fits;
	char shown[8];
	int32_t v;

	jp_ws(p);
	if (p->pos >= p->len)
		return jp_fail(p, p->pos, "the message ends where a value should be");
	switch (p->s[p->pos]) {
	case 'n':
		/* null: the field is absent */
		return jp_literal(p, "null");
	case 't':
	case 'f':
		if (t == JT_SKIP)
			return jp_literal(p, p->s[p->pos] == 't' ? "true" : "false");
		break;
	case '"':
		switch (t) {
		case JT_SKIP:
			return jp_string(p, &(struct jstr){ NULL, 0, 0, false });
		case JT_METADATA:
			return jp_field(p, t, p->info->metadata, sizeof(p->info->metadata));
		case JT_ID:
			return jp_field(p, t, p->info->id, sizeof(p->info->id));
		case JT_BUNDLE:
			return jp_field(p, t, p->info->bundle, sizeof(p->info->bundle));
		case JT_PID:
		case JT_STATE_PID:
			return jp_wrong_type(p, t, "a number");
		case JT_FDS:
			return jp_wrong_type(p, t, "an array");
		default:
			return jp_wrong_type(p, t, "an object");
		}
	case '{':
		if (t == JT_SKIP || t == JT_ROOT || t == JT_STATE)
			return jp_object(p, t);
		break;
	case '[':
		if (t == JT_SKIP || t == JT_FDS)
			return jp_array(p, t);
		break;
	case '-':
	case '0' ... '9':
		if (t == JT_PID || t == JT_STATE_PID)
			return jp_pid(p, t);
		if (t == JT_SKIP)
			return jp_number(p, &integer, &fits, &v);
		break;
	default:
		return jp_fail(p, p->pos, "expected a value, found %s",
			       jp_show(p->s[p->pos], shown));
	}
	switch (t) {
	case JT_PID:
	case JT_STATE_PID:
		return jp_wrong_type(p, t, "a number");
	case JT_FDS:
		return jp_wrong_type(p, t, "an array of strings");
	case JT_STATE:
		return jp_wrong_type(p, t, "an object");
	default:
		return jp_wrong_type(p, t, "a string");
	}
}

int ho_parse(const char *json, size_t len, struct ho_info *info, int *fd_index, char *err,
	     size_t errlen)
{
	struct jp p = {
		.s = (const unsigned char *)json,
		.len = len,
		.err = err,
		.errlen = errlen,
		.info = info,
		.fd_index = -1,
	};

	memset(info, 0, sizeof(*info));
	*fd_index = -1;
	ho_err(err, errlen, "%s", "");
	if (len > HO_MAX_MESSAGE) {
		ho_err(err, errlen, "the agent message is %zu bytes long, more than the %d allowed",
		       len, HO_MAX_MESSAGE);
		goto fail;
	}
	jp_ws(&p);
	if (p.pos >= p.len) {
		jp_fail(&p, p.pos, "the message is empty");
		goto fail;
	}
	if (p.s[p.pos] != '{') {
		jp_fail(&p, p.pos, "the message is not a JSON object");
		goto fail;
	}
	if (jp_object(&p, JT_ROOT))
		goto fail;
	jp_ws(&p);
	if (p.pos < p.len) {
		jp_fail(&p, p.pos, "more data follows the end of the object");
		goto fail;
	}
	if (p.fd_index < 0) {
		ho_err(err, errlen, "the agent message names no \"seccompFd\" in \"fds\"");
		goto fail;
	}
	if (p.has_pid) {
		info->pid = p.pid;
	} else if (p.has_state_pid) {
		info->pid = p.state_pid;
	} else {
		ho_err(err, errlen, "the agent message has neither \"pid\" nor \"state.pid\"");
		goto fail;
	}
	*fd_index = p.fd_index;
	return 0;
fail:
	memset(info, 0, sizeof(*info));
	*fd_index = -1;
	return -EPROTO;
}

/* ---- writing ------------------------------------------------------------------------------ */

struct jout {
	char *buf;
	size_t cap;
	size_t n;
};

static void jo_raw(struct jout *o, const char *s, size_t k)
{
	if (o->n + k <= o->cap)
		memcpy(o->buf + o->n, s, k);
	o->n += k;
}

static void jo_cstr(struct jout *o, const char *s)
{
	jo_raw(o, s, strlen(s));
}

/* s as a JSON string: -EINVAL unless it ends within cap bytes and is valid UTF-8, since the
   receiver would refuse the message anyway and the sender is the one who can say why. */
static int jo_string(struct jout *o, const char *s, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strnlen(s, cap);

	if (len == cap)
		return -EINVAL;
	jo_raw(o, "\"", 1);
	for (size_t i = 0; i < len;) {
		char esc[8];
		size_t k;

		switch (u[i]) {
		case '"':
			jo_raw(o, "\\\"", 2);
			break;
		case '\\':
			jo_raw(o, "\\\\", 2);
			break;
		case '\n':
			jo_raw(o, "\\n", 2);
			break;
		case '\r':
			jo_raw(o, "\\r", 2);
			break;
		case '\t':
			jo_raw(o, "\\t", 2);
			break;
		case '\b':
			jo_raw(o, "\\b", 2);
			break;
		case '\f':
			jo_raw(o, "\\f", 2);
			break;
		default:
			if (u[i] < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", u[i]);
				jo_raw(o, esc, 6);
			} else if (u[i] < 0x80) {
				jo_raw(o, s + i, 1);
			} else {
				k = utf8_seq(u + i, len - i);
				if (!k)
					return -EINVAL;
				jo_raw(o, s + i, k);
				i += k;
				continue;
			}
		}
		i++;
	}
	jo_raw(o, "\"", 1);
	return 0;
}

/* The message runc would send for this process (runc omits an empty metadata, so do we). */
int ho_build(const struct ho_info *info, char *buf, size_t cap, size_t *len)
{
	struct jout o = { buf, cap, 0 };
	char num[16];

	if (info->pid <= 0)
		return -EINVAL;
	snprintf(num, sizeof(num), "%d", (int)info->pid);
	jo_cstr(&o, "{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"],\"pid\":");
	jo_cstr(&o, num);
	if (info->metadata[0]) {
		jo_cstr(&o, ",\"metadata\":");
		if (jo_string(&o, info->metadata, sizeof(info->metadata)))
			return -EINVAL;
	}
	jo_cstr(&o, ",\"state\":{\"ociVersion\":\"1.0.2\",\"id\":");
	if (jo_string(&o, info->id, sizeof(info->id)))
		return -EINVAL;
	jo_cstr(&o, ",\"status\":\"creating\",\"pid\":");
	jo_cstr(&o, num);
	jo_cstr(&o, ",\"bundle\":");
	if (jo_string(&o, info->bundle, sizeof(info->bundle)))
		return -EINVAL;
	jo_cstr(&o, "}}");
	if (o.n > o.cap)
		return -EOVERFLOW; /* HO_BUILD_MAX is wrong */
	*len = o.n;
	return 0;
}

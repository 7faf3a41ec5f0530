/* SPDX-License-Identifier: MIT */
/*
 * listenerMetadata (meta.h). The string comes from whoever can write a seccomp profile and
 * reach the agent socket, so it is read as from a network peer: bounded by the message reader
 * (ho_info.metadata), scanned once, nothing in it is trusted beyond the form checked here, and
 * what the log quotes of it is escaped.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "handoff/meta.h"

#define SEPARATORS " \t\r\n,;"
#define QUOTE_MAX  40 /* bytes of an entry quoted in the note */

static bool graphic(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

/* Append to the note: "; "-separated, silently cut when full (the log line stays bounded). */
__attribute__((format(printf, 2, 3))) static void note(struct ho_meta *m, const char *fmt, ...)
{
	size_t n = strlen(m->note);
	va_list ap;

	if (n && n + 2 < sizeof(m->note)) {
		memcpy(m->note + n, "; ", 3);
		n += 2;
	}
	if (n + 1 >= sizeof(m->note))
		return;
	va_start(ap, fmt);
	vsnprintf(m->note + n, sizeof(m->note) - n, fmt, ap);
	va_end(ap);
}

/* The entry for the log: graphic ASCII as it is, anything else \xNN, at most QUOTE_MAX bytes. */
static void quote(char *out, size_t cap, const char *s, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && i < QUOTE_MAX && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (graphic(c) && c != '\'' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
	}
	if (len > QUOTE_MAX && o + 4 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

static bool is(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && !memcmp(s, word, len);
}

/* "ns=VALUE": vlen bytes at v. */
static void take_ns(struct ho_meta *m, const char *v, size_t vlen, const char *q)
{
	bool was = m->ns_given;

	m->ns_given = true;
	if (m->ns_bad)
		return;
	if (!vlen || vlen >= sizeof(m->ns)) {
		note(m, "'%s': a namespace name is 1 to %zu bytes", q, sizeof(m->ns) - 1);
		goto bad;
	}
	for (size_t i = 0; i < vlen; i++) {
		if (!graphic((unsigned char)v[i])) {
			note(m, "'%s': a namespace name is printable ASCII", q);
			goto bad;
		}
	}
	/* two different names: picking either could put the client with the wrong tenant */
	if (was && (strlen(m->ns) != vlen || memcmp(m->ns, v, vlen))) {
		note(m, "'%s': ns given twice, differently", q);
		goto bad;
	}
	memcpy(m->ns, v, vlen);
	m->ns[vlen] = '\0';
	return;
bad:
	m->ns_bad = true;
	m->ns[0] = '\0';
}

void ho_meta_parse(const char *metadata, struct ho_meta *m)
{
	/* in the line form another agent's value may hold spaces and commas (meta.h) */
	bool lines = strchr(metadata, '\n') != NULL;
	const char *p = metadata;

	memset(m, 0, sizeof(*m));
	p += strspn(p, SEPARATORS);
	while (*p) {
		size_t len = strcspn(p, SEPARATORS);
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		char q[4 * QUOTE_MAX + 8];

		quote(q, sizeof(q), p, len);
		if (is(p, klen, "ns")) {
			if (eq)
				take_ns(m, eq + 1, len - klen - 1, q);
			else {
				note(m, "'ns' without '=NAME'");
				m->ns_given = m->ns_bad = true;
				m->ns[0] = '\0';
			}
		} else if (is(p, klen, "ns-traps") || is(p, klen, "semvisor-run") ||
			   is(p, klen, "ptrace")) {
			if (eq)
				note(m, "'%s' ignored: '%.*s' takes no value", q, (int)klen, p);
			else if (*p == 'n')
				m->ns_traps = true;
			else if (*p == 'p')
				m->ptrace = true;
		} else if (!eq) {
			note(m, "'%s' ignored: unknown", q);
		} else if (lines) {
			/* another agent's KEY=VALUE: not ours to judge, and its value ends the line */
			len = strcspn(p, "\n");
		}
		p += len;
		p += strspn(p, SEPARATORS);
	}
}

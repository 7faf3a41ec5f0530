/* SPDX-License-Identifier: MIT */
/*
 * listenerMetadata: the free-form string an OCI seccomp profile gives its agent (runtime-spec
 * config-linux.md), which runc passes on unchanged as the agent message's "metadata".
 *
 * It is a list of entries, each a WORD or a KEY=VALUE, separated by newlines (the way kinvolk's
 * seccompagent and the Security Profiles Operator write it), spaces, tabs, commas or semicolons
 * (the way semvisor always read it). What semvisord knows:
 *   ns=NAME       serve the client from the named namespace NAME (1 to 63 graphic ASCII bytes)
 *   ns-traps      the client's filter traps unshare and setns (filter.h)
 *   semvisor-run  sent by semvisor-run --daemon to say who it is; nothing to do
 *   ptrace        trace the process that sent this instead (semvisor-run --backend=ptrace):
 *                 its fd is not a listener, and its filter returns SECCOMP_RET_TRACE
 * Any other KEY=VALUE is somebody else's (seccompagent's MKDIR_TMPL, MIDDLEWARE, ...: one profile
 * may serve several agents through one string) and is ignored without a word, as seccompagent
 * ignores ours. When the string has a newline (the line form), such an entry's value runs to
 * the end of its line, since other agents' values may hold spaces and commas
 * ("MIDDLEWARE=falco,mkdir"); without one, entries are split as they always were. An unknown WORD, or a known entry in the wrong form, is ignored too, and named
 * in the note for the log, since it is more likely our own typo than anyone else's convention.
 */
#ifndef SV_HANDOFF_META_H
#define SV_HANDOFF_META_H

#include <stdbool.h>

struct ho_meta {
	bool ns_traps;	/* "ns-traps" */
	bool ptrace;	/* "ptrace" */
	bool ns_given;	/* some "ns" entry was there, well formed or not */
	bool ns_bad;	/* ...and it was malformed or ambiguous: ns is "" */
	char ns[64];	/* "ns=NAME": NAME, or "" */
	char note[256]; /* what was ignored and why, for the log; "" if nothing was */
};

/* Read metadata (NUL-terminated, any bytes) into *m. Never fails: what it cannot use is noted. */
void ho_meta_parse(const char *metadata, struct ho_meta *m);

#endif

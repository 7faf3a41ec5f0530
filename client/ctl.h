/* SPDX-License-Identifier: MIT */
/*
 * semvisorctl's parts: semvisorctl.c (commands, options, help), rpc.c (the connection),
 * text.c (output for people), json.c (JSON), metrics.c (Prometheus), top.c (the live view).
 */
#ifndef SV_CLIENT_CTL_H
#define SV_CLIENT_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "control/ctl_frame.h"
#include "control/ctl_metrics.h"
#include "util/utf8.h"

/* Exit status, documented in semvisorctl --help. */
enum {
	EX_OK = 0,
	EX_REFUSED = 1, /* the server refused the request or could not carry it out */
	EX_USAGE = 2,
	EX_CONNECT = 3, /* no socket, nobody listening, no answer in time */
	EX_DENIED = 4,	/* permission denied: connecting, or a privileged request */
	EX_PROTO = 5,	/* a reply not understood, another protocol version */
};

#define DEFAULT_SOCKET "/run/semvisor/control.sock"

/* ---- rpc.c ---- */

struct rpc {
	int fd;
	const char *path;
	uint64_t next_id;
	int timeout_ms;
	uint8_t *buf; /* received bytes not yet made into replies */
	size_t len, cap;
};

#define RPC_AGAIN (-1) /* rpc_recv() with timeout 0: no whole reply yet */

/* Connect; 0, or an exit status after saying why on stderr. */
int rpc_connect(struct rpc *r, const char *path, int timeout_ms);
void rpc_close(struct rpc *r);
/* Send req (version and id filled in): 0 or an exit status. */
int rpc_send(struct rpc *r, Semvisor__Request *req);
/*
 * The next reply: 0 with *out set, RPC_AGAIN (timeout_ms 0 only), or an exit status after saying
 * why. timeout_ms < 0: the connection's timeout.
 */
int rpc_recv(struct rpc *r, Semvisor__Reply **out, int timeout_ms);
/*
 * Send, receive, check: 0 with an OK reply in *out, or an exit status after printing the server's
 * refusal (or the failure) on stderr.
 */
int rpc_call(struct rpc *r, Semvisor__Request *req, Semvisor__Reply **out);
/* The exit status for a reply's status; prints the server's message unless it is OK. */
int rpc_check(const Semvisor__Reply *reply);

/* ---- text.c ---- */

/* Printable for a terminal: control characters become '?' (names come from other users). */
const char *text_safe(const char *s, char *buf, size_t len);
/* How people know a namespace: "NAMESPACE/POD" where a pod lives in it, else its name. */
const char *text_ns_name(const char *name, const char *pod_ns, const char *pod, char *buf,
			 size_t len);
/* 1234 ns -> "1.2us"; UINT64_MAX -> "inf". */
const char *text_fmt_ns(uint64_t ns, char *buf, size_t len);
/* Upper bound of the bucket holding the q-quantile (0 < q <= 1) of counts. */
uint64_t text_hist_quantile(const uint64_t *count, const uint64_t *bound, size_t n, double q);
const char *text_user_name(uint32_t uid, char *buf, size_t len);
const char *text_group_name(uint32_t gid, char *buf, size_t len);
const char *text_fmt_time(int64_t t, char *buf, size_t len);

void text_stats(FILE *f, const Semvisor__Stats *s);
void text_sets(FILE *f, const Semvisor__SetList *l);
void text_set(FILE *f, const Semvisor__SetDetail *d);
void text_clients(FILE *f, Semvisor__Client *const *c, size_t n);

/* ---- json.c ---- */

/* Print doc (consumed) compact on one line; exits if it is NULL (json_pack ran out of memory). */
void json_print(FILE *f, json_t *doc);

void json_stats(FILE *f, const Semvisor__Stats *s);
void json_sets(FILE *f, const Semvisor__SetList *l);
void json_set(FILE *f, const Semvisor__SetDetail *d);
void json_clients(FILE *f, Semvisor__Client *const *c, size_t n);
void json_limits(FILE *f, const Semvisor__Limits *l);

/* ---- top.c ---- */

struct top_opts {
	uint32_t interval_ms;
	uint32_t count; /* 0: until q / Ctrl-C (a terminal), 1 otherwise */
	bool json;
};

int top_run(struct rpc *r, const struct top_opts *o);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The control socket: statistics and administration of a running supervisor over the protocol of
 * proto/semvisor.proto (frames: ctl_frame.h). semvisord and semvisor-run --control serve it;
 * semvisorctl is its client.
 *
 * The server runs on a thread of its own: one poll loop, non-blocking sockets, a buffer per
 * connection in each direction, so no client, however slow or hostile, holds up another or the
 * supervisor's workers. What it enforces (OpenSMTPD's control.c is the model):
 *   - one instance per path: start fails if a server already answers on it; a stale socket file
 *     left by a dead one is replaced;
 *   - the socket is created under umask 0177, then given opts->mode and opts->group, so it is
 *     never reachable with wider permissions than asked, not even for an instant;
 *   - peers are identified with SO_PEERCRED (and SO_PEERGROUPS) when they connect: read-only
 *     requests are answered for anyone who can connect (the file's mode and group decide who
 *     can); Reset, RemoveSet and SetLimits only for uid 0 and the socket's owner (the uid that
 *     created it; for an inherited socket, its file's owner);
 *   - a peer reads no more than it could natively: every set's metadata (as SEM_STAT_ANY shows
 *     it to anyone), but a set's values and per-semaphore state only if the set's mode lets
 *     the peer read it (owner, group or other read bit, as semctl(IPC_STAT) checks); ShowSet of
 *     another set is refused with PERMISSION_DENIED. Root and the socket's owner read every
 *     set. Stats and Watch carry no per-set values (ctl_answer.c has the rule in full);
 *   - at most max_conns connections (uid 0 and the owner get CTL_ADMIN_RESERVE more, so an
 *     administrator can always get in) and max_conns_per_uid per other uid; a peer over the limit
 *     gets a BUSY reply and is closed;
 *   - a request frame over max_frame, or one that is not a request, gets an error reply and the
 *     connection is closed; replies wait in a buffer of at most max_output bytes per connection,
 *     and a client that lets it fill is dropped, as is one that leaves a frame half sent or its
 *     replies unread for idle_ms;
 *   - a connection with no request in progress, no reply unsent and no Watch running is closed
 *     once it has been so for idle_ms, so a silent peer does not keep its slot;
 *   - an fd is kept in reserve so that accept() failing with EMFILE takes the connection off the
 *     queue (and closes it) instead of spinning on it.
 */
#ifndef SV_CONTROL_H
#define SV_CONTROL_H

#include <stdio.h>
#include <sys/types.h>

#include "notify/notify.h"

#define CTL_DEFAULT_SOCKET	  "/run/semvisor/control.sock"
#define CTL_DEFAULT_MODE	  0660
#define CTL_DEFAULT_MAX_CONNS	  64
#define CTL_DEFAULT_MAX_CONNS_UID 16
#define CTL_DEFAULT_MAX_OUTPUT	  (32u * 1024 * 1024)
#define CTL_ADMIN_RESERVE	  4
#define CTL_IDLE_MS		  30000

struct ctl_opts {
	/*
	 * Where to listen. The parent directory is created (mode 0755) if it is missing; it must
	 * not be writable by untrusted users, since the socket's mode is set by path after bind.
	 * With listen_fd >= 0: only used in messages (may be NULL).
	 */
	const char *path;
	/*
	 * >= 0: serve this already-listening AF_UNIX stream socket (systemd socket activation)
	 * instead of binding path; its mode and group are left as they are, and it is not
	 * unlinked at stop. The server owns the fd from the call on, also when start fails.
	 */
	int listen_fd;
	mode_t mode;	       /* 0: CTL_DEFAULT_MODE */
	gid_t group;	       /* (gid_t)-1: leave the socket's group alone */
	int max_conns;	       /* 0: CTL_DEFAULT_MAX_CONNS */
	int max_conns_per_uid; /* 0: CTL_DEFAULT_MAX_CONNS_UID */
	/* Sizes, each capped at CTL_MAX_REPLY: */
	size_t max_frame;  /* largest request payload; 0: CTL_MAX_REQUEST_DEFAULT */
	size_t max_output; /* pending reply bytes per connection; 0: CTL_DEFAULT_MAX_OUTPUT */
	int idle_ms;	   /* the time limits above; 0: CTL_IDLE_MS */
	FILE *log;	   /* non-NULL: refused peers, privileged actions, dropped clients */
};

/* Initialise with this, then change what differs: listen_fd 0 would be a real fd. */
#define CTL_OPTS_INIT                                                                              \
	{                                                                                          \
		.path = CTL_DEFAULT_SOCKET, .listen_fd = -1, .mode = CTL_DEFAULT_MODE,             \
		.group = (gid_t)-1                                                                 \
	}

struct ctl_server;

/*
 * Start serving s on a thread of its own. NULL with a sentence in err when the socket cannot be
 * set up: another instance already listens on the path (EADDRINUSE), the path exists and is
 * not a socket, permissions, no memory. The thread blocks every signal and registers with the
 * engine's RCU. s must outlive the server: call ctl_server_stop() before nt_super_free().
 */
struct ctl_server *ctl_server_start(struct nt_super *s, const struct ctl_opts *opts, char *err,
				    size_t errlen);

/*
 * Stop the thread, close every connection and the socket, and remove the socket file if this
 * server created it and it is still the same file. NULL is allowed. Not from a signal handler.
 */
void ctl_server_stop(struct ctl_server *srv);

/*
 * The metrics over HTTP (ctl_http.c): GET /metrics on a TCP socket answers what `semvisorctl
 * metrics` prints. Read-only: no request changes anything, and what is served is a Stats
 * snapshot, which holds no set's values. Its own thread, like the control server's.
 */
struct ctl_http_opts {
	const char *listen; /* "HOST:PORT", "[V6]:PORT" or ":PORT"; port 0: the kernel picks */
	int listen_fd;	    /* >= 0: serve this listening socket instead (systemd's); owned */
	int timeout_ms;	    /* a connection's whole exchange; 0: 10 s */
	FILE *log;
};

struct ctl_http;

/* Start it; NULL with a sentence in err when the socket cannot be set up. */
struct ctl_http *ctl_http_start(struct nt_super *s, const struct ctl_http_opts *o, char *err,
				size_t errlen);
/* Where it listens, as "127.0.0.1:9479" or "[::1]:9479". */
const char *ctl_http_where(const struct ctl_http *h);
/* Stop the thread, close every connection and the socket. NULL is allowed. */
void ctl_http_stop(struct ctl_http *h);

#endif

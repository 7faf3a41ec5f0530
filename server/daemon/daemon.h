/* SPDX-License-Identifier: MIT */
/*
 * semvisord's parts: main.c (setup, signals, systemd), agent.c (the agent socket), ctlsock.c
 * (attaching the control server and the metrics endpoint of server/control/ to the configured
 * sockets).
 */
#ifndef SV_DAEMON_H
#define SV_DAEMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/config.h"
#include "notify/notify.h"
#include "util/usock.h"

/* A setting given on the command line: it wins over the file, also after a reload. */
struct cfg_override {
	const char *key, *value;
};

struct daemon {
	struct cfg cfg;
	const char *config_path;
	bool explicit_config;
	struct cfg_override overrides[64];
	int noverrides;
	int lock_fd; /* flock on AGENT.lock: one daemon per agent socket */
	void *loop;  /* struct ev_loop *, for agent_resume() */
	struct nt_super *super;
	struct sv_budget *budget; /* every namespace's sets: cfg.budget, applied again on SIGHUP */
	int agent_fd;
	bool agent_bound; /* we created the socket file (agent_sock), so we remove it */
	struct usock agent_sock;
	struct ctl_server *ctl;
	struct ctl_http *metrics;
	_Atomic uint64_t next_key; /* the last listener key given (fdstore.c) */
};

/* Log a line on stderr (the journal under systemd). Thread-safe. */
void dlog(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The agent socket is readable: accept and receive pending clients. Returns false when as many
 * clients are being received as we allow: the caller stops watching the socket (connections
 * wait in the backlog) until agent_resume() says a receive has finished.
 */
bool agent_accept(struct daemon *d, int lfd);
/* Called from a receiving thread when it is done (main.c wakes the loop). */
void agent_resume(struct daemon *d);

/* Wait (a bounded time) until every connection being received has been served or dropped. */
void agent_drain(struct daemon *d);

/*
 * The fd store (fdstore.c): whether the service manager keeps fds for us (NOTIFY_SOCKET, and
 * systemd's $FDSTORE not 0); store a listener under its options' key (before the supervisor
 * owns fd) or take it out again; at a start, serve the listeners and apply the state stored
 * by the previous process (before nt_super_start(): returns the listeners taken over); at a
 * stop, store the state (after nt_super_wait()).
 */
bool fdstore_enabled(void);
void fdstore_listener(struct daemon *d, int fd, const struct nt_listener_opts *lo);
void fdstore_forget(struct daemon *d, const struct nt_listener_opts *lo);
int fdstore_take(struct daemon *d);
void fdstore_save(struct daemon *d);

/* A listening socket systemd passed under this name (FileDescriptorName=), or -1. */
int systemd_socket(const char *name);

/*
 * The control socket (control_path, or systemd's "control" socket): start / stop serving it
 * with server/control/.
 */
int ctlsock_attach(struct daemon *d, char *err, size_t errlen);
void ctlsock_detach(struct daemon *d);

/* The metrics over HTTP (metrics_listen, or systemd's "metrics" socket), if either is there. */
int metrics_attach(struct daemon *d, char *err, size_t errlen);
void metrics_detach(struct daemon *d);

#endif

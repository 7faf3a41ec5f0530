/* SPDX-License-Identifier: MIT */
/* semvisord's parts: main.c (setup, signals, systemd), agent.c (the agent socket). */
#ifndef SV_DAEMON_H
#define SV_DAEMON_H

#include "daemon/config.h"
#include "notify/notify.h"

struct daemon {
	struct cfg cfg;
	const char *config_path;
	struct nt_super *super;
	int agent_fd;
	bool agent_bound; /* we created the socket file (so we remove it) */
	struct ctl_server *ctl;
};

/* Log a line on stderr (the journal under systemd). Thread-safe. */
void dlog(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The agent socket is readable: accept and receive every pending client. */
void agent_accept(struct daemon *d, int lfd);

/* A listening socket systemd passed under this name (FileDescriptorName=), or -1. */
int systemd_socket(const char *name);

/* The control socket (control_path, or systemd's "control" socket): start / stop serving it. */
int ctl_attach(struct daemon *d, char *err, size_t errlen);
void ctl_detach(struct daemon *d);

#endif

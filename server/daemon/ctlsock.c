/* SPDX-License-Identifier: MIT */
/*
 * semvisord's control socket and metrics endpoint: systemd's sockets ("control", "metrics"), or
 * control_path and metrics_listen; none where both are absent. What is served on them is
 * server/control/'s business; this file only picks the sockets and starts the servers.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>

#include "control/control.h"
#include "daemon/daemon.h"

int ctlsock_attach(struct daemon *d, char *err, size_t errlen)
{
	struct ctl_opts o = CTL_OPTS_INIT;

	o.listen_fd = systemd_socket("control");
	if (o.listen_fd < 0 && !d->cfg.control_path[0])
		return 0;
	o.path = d->cfg.control_path[0] ? d->cfg.control_path : CTL_DEFAULT_SOCKET;
	o.mode = d->cfg.control_mode;
	o.log = stderr;
	if (d->cfg.control_group[0]) {
		struct group *g = getgrnam(d->cfg.control_group);

		if (!g) {
			snprintf(err, errlen, "no group named '%s'", d->cfg.control_group);
			return -EINVAL;
		}
		o.group = g->gr_gid;
	}
	d->ctl = ctl_server_start(d->super, &o, err, errlen);
	return d->ctl ? 0 : -EINVAL;
}

void ctlsock_detach(struct daemon *d)
{
	ctl_server_stop(d->ctl);
	d->ctl = NULL;
}

int metrics_attach(struct daemon *d, char *err, size_t errlen)
{
	struct ctl_http_opts o = { .listen = d->cfg.metrics_listen,
				   .listen_fd = systemd_socket("metrics"),
				   .timeout_ms = d->cfg.metrics_timeout_ms,
				   .log = stderr };

	if (o.listen_fd < 0 && !d->cfg.metrics_listen[0])
		return 0;
	d->metrics = ctl_http_start(d->super, &o, err, errlen);
	return d->metrics ? 0 : -EINVAL;
}

void metrics_detach(struct daemon *d)
{
	ctl_http_stop(d->metrics);
	d->metrics = NULL;
}

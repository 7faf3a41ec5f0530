/* SPDX-License-Identifier: MIT */
/*
 * semvisord's control socket: systemd's, or one at control_path; none if both are absent. What
 * is served on it is server/control/'s business; this file only picks the socket and starts it.
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

/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/killpoint.h"

atomic_bool sv_kp_armed;
static enum sv_kp armed_at;
static atomic_long left;

static const char *const names[SV_KP_NPOINTS] = {
	[SV_KP_RECEIVED] = "received",
	[SV_KP_COMMITTED] = "committed",
	[SV_KP_JOURNAL] = "journal",
	[SV_KP_CHECKPOINT] = "checkpoint",
};

int sv_kp_arm(const char *spec)
{
	const char *colon = spec ? strchr(spec, ':') : NULL;
	long n;

	if (!colon || (n = strtol(colon + 1, NULL, 10)) < 1)
		return -1;
	for (int i = 0; i < SV_KP_NPOINTS; i++) {
		if (strlen(names[i]) == (size_t)(colon - spec) &&
		    !strncmp(spec, names[i], (size_t)(colon - spec))) {
			armed_at = (enum sv_kp)i;
			atomic_store(&left, n);
			atomic_store(&sv_kp_armed, true);
			return 0;
		}
	}
	return -1;
}

void sv_kp_pass(enum sv_kp p)
{
	if (p == armed_at && atomic_fetch_sub(&left, 1) == 1)
		kill(getpid(), SIGKILL);
}

/* SPDX-License-Identifier: MIT */
/*
 * semvisord's configuration: /etc/semvisor/semvisord.conf, then command-line options over it.
 *
 * The file is "key = value" lines; '#' starts a comment; unknown keys are errors (a typo must
 * not silently fall back to a default).
 */
#ifndef SV_DAEMON_CONFIG_H
#define SV_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "engine/sem.h"

#define CFG_DEFAULT_PATH    "/etc/semvisor/semvisord.conf"
#define CFG_DEFAULT_AGENT   "/run/semvisor/agent.sock"
#define CFG_DEFAULT_CONTROL "/run/semvisor/control.sock"

enum cfg_ns_policy {
	CFG_NS_PER_IPC, /* one namespace per caller IPC namespace (as one kernel would) */
	CFG_NS_SHARED,	/* every client in one namespace, named "shared" */
};

struct cfg {
	char agent_path[108];
	mode_t agent_mode;
	char agent_group[64];	/* "" : leave the group alone */
	char control_path[108]; /* "" : no control socket */
	mode_t control_mode;
	char control_group[64];
	int workers; /* 0: the default (1) */
	bool have_limits;
	struct sv_limits limits;
	enum cfg_ns_policy ns_policy;
	bool trace;	 /* one line per served call on stderr (the journal) */
	int max_clients; /* listeners served at once */
	/* semaphores and sets across every namespace, in all and per creating uid; 0: no bound */
	struct sv_budget_limits budget;
};

/*
 * The budget's defaults. A semaphore costs 64 bytes and a set about 250 besides (bench/engine),
 * so the daemon-wide maxima bound what every tenant together can make the daemon hold to about
 * 2e6 * 64 B + 65536 * 250 B = 144 MB. A uid may take an eighth of the semaphores (16 MB): far
 * more than the databases and servers that use System V semaphores ask for (PostgreSQL: one
 * semaphore per connection), far less than the 1e9 the kernel's defaults allow one namespace.
 */
#define CFG_MAX_SEMAPHORES	   2000000
#define CFG_MAX_SEMAPHORES_PER_UID 262144
#define CFG_MAX_SETS		   65536
#define CFG_MAX_SETS_PER_UID	   8192

void cfg_defaults(struct cfg *c);
/*
 * Read a configuration file over c. 0; -ENOENT if the file does not exist (callers decide
 * whether that matters); other -errno with a sentence naming the file and line in err.
 */
int cfg_load(struct cfg *c, const char *path, char *err, size_t errlen);
/* Parse one "key = value" assignment (as in the file, or from --set). 0 or -EINVAL + err. */
int cfg_set(struct cfg *c, const char *key, const char *value, char *err, size_t errlen);
const char *cfg_ns_policy_name(enum cfg_ns_policy p);

#endif

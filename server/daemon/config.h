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
	char metrics_listen[128]; /* "" : no metrics over HTTP (unless systemd passes a socket) */
	int metrics_timeout_ms;	  /* one HTTP exchange, accept to answer sent */
	int workers;		  /* 0: the default (1) */
	bool have_limits;
	struct sv_limits limits;
	enum cfg_ns_policy ns_policy;
	bool trace;	       /* one line per served call on stderr (the journal) */
	bool fast_path;	       /* answer semvisor-run --fast's requests (notify/fastabi.h) */
	int max_clients;       /* listeners served at once */
	long checkpoint_bytes; /* the journal's size that makes a checkpoint (recover.c) */
	/*
	 * semaphores, sets, undo entries, waiters and namespaces across every namespace, in all
	 * and per uid (sem.h says which uid); 0: no bound
	 */
	struct sv_budget_limits budget;
};

/*
 * The budget's defaults. A semaphore costs 64 bytes and a set about 250 besides (bench/engine),
 * so the daemon-wide maxima bound what every tenant together can make the daemon hold to about
 * 2e6 * 64 B + 65536 * 250 B = 144 MB. A uid may take an eighth of the semaphores (16 MB): far
 * more than the databases and servers that use System V semaphores ask for (PostgreSQL: one
 * semaphore per connection), far less than the 1e9 the kernel's defaults allow one namespace.
 *
 * Undo entries. The kernel bounds them only through SEMMNI: one per process and set, so
 * processes times 32000. Here an entry costs about 64 bytes plus 2 per semaphore of its set and
 * counts once per 32 semaphores (budget.c), so one unit is at most 128 bytes: 262144 units bound
 * them to 32 MB in all, 8 MB per uid. The largest legitimate user we know is Apache's
 * "Mutex sysvsem": one entry per child on a one-semaphore set, and ServerLimit caps the
 * children at 20000, under the 65536 a uid may hold.
 *
 * Waiters. The kernel has no bound but the threads a tenant may have (a parked call is a
 * blocked thread: threads-max, about 190000 on a 24 GB machine, RLIMIT_NPROC per uid). A parked
 * call costs the engine about 100 bytes plus 10 per sop, and the supervisor's record of the
 * call a few hundred more; 65536 of them stay under 64 MB even with long sop arrays. Apache's
 * accept mutex parks every idle child (at most 20000); a uid may park 32768.
 *
 * Namespaces. The kernel's max_ipc_namespaces defaults to half of threads-max, per user. An
 * empty namespace costs the daemon about 10 KB (index bitmap, two hash tables, its record) and
 * up to three file descriptors, so 4096 of them bound that to 40 MB and 12288 descriptors
 * (LimitNOFILE in semvisord.service is 1048576). Containers per host are counted in hundreds
 * (Kubernetes' default is 110 pods per node); a uid (the owner of the namespaces' user
 * namespace: root for containers without one) may hold 1024.
 */
#define CFG_MAX_SEMAPHORES	   2000000
#define CFG_MAX_SEMAPHORES_PER_UID 262144
#define CFG_MAX_SETS		   65536
#define CFG_MAX_SETS_PER_UID	   8192
#define CFG_MAX_UNDOS		   262144
#define CFG_MAX_UNDOS_PER_UID	   65536
#define CFG_MAX_WAITERS		   65536
#define CFG_MAX_WAITERS_PER_UID	   32768
#define CFG_MAX_NAMESPACES	   4096
#define CFG_MAX_NAMESPACES_PER_UID 1024

void cfg_defaults(struct cfg *c);
/*
 * Read a configuration file over c. 0; -ENOENT if the file does not exist (callers decide
 * whether that matters); other -errno with a sentence naming the file and line in err.
 */
int cfg_load(struct cfg *c, const char *path, char *err, size_t errlen);
/* Parse one "key = value" assignment (as in the file, or from --set). 0 or -EINVAL + err. */
int cfg_set(struct cfg *c, const char *key, const char *value, char *err, size_t errlen);
const char *cfg_ns_policy_name(enum cfg_ns_policy p);
/* The budget in one line, for --check and the reload's log line. */
void cfg_budget_str(const struct sv_budget_limits *b, char *buf, size_t len);

#endif

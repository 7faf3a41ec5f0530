/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

void cfg_defaults(struct cfg *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->agent_path, sizeof(c->agent_path), "%s", CFG_DEFAULT_AGENT);
	c->agent_mode = 0660;
	snprintf(c->control_path, sizeof(c->control_path), "%s", CFG_DEFAULT_CONTROL);
	c->control_mode = 0660;
	c->metrics_timeout_ms = 10000;
	c->ns_policy = CFG_NS_PER_IPC;
	c->max_clients = 4096;
	c->checkpoint_bytes = 64L << 20;
	c->fast_path = true;
	c->budget = (struct sv_budget_limits){
		.sems = CFG_MAX_SEMAPHORES,
		.sems_per_uid = CFG_MAX_SEMAPHORES_PER_UID,
		.sets = CFG_MAX_SETS,
		.sets_per_uid = CFG_MAX_SETS_PER_UID,
		.undos = CFG_MAX_UNDOS,
		.undos_per_uid = CFG_MAX_UNDOS_PER_UID,
		.waiters = CFG_MAX_WAITERS,
		.waiters_per_uid = CFG_MAX_WAITERS_PER_UID,
		.namespaces = CFG_MAX_NAMESPACES,
		.namespaces_per_uid = CFG_MAX_NAMESPACES_PER_UID,
	};
}

void cfg_budget_str(const struct sv_budget_limits *b, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%ld semaphores (%ld per uid), %ld sets (%ld per uid), %ld undo entries (%ld per "
		 "uid), %ld waiters (%ld per uid), %ld namespaces (%ld per uid)",
		 b->sems, b->sems_per_uid, b->sets, b->sets_per_uid, b->undos, b->undos_per_uid,
		 b->waiters, b->waiters_per_uid, b->namespaces, b->namespaces_per_uid);
}

const char *cfg_ns_policy_name(enum cfg_ns_policy p)
{
	return p == CFG_NS_SHARED ? "shared" : "per-ipc-namespace";
}

static int parse_int(const char *v, long lo, long hi, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 0);
	if (errno || end == v || *end || n < lo || n > hi)
		return -1;
	*out = n;
	return 0;
}

static int copy_str(char *dst, size_t size, const char *v)
{
	if (strlen(v) >= size)
		return -1;
	strcpy(dst, v);
	return 0;
}

/* The budget's keys and where each goes. */
static long *budget_key(struct cfg *c, const char *key)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "max_semaphores", offsetof(struct sv_budget_limits, sems) },
		{ "max_semaphores_per_uid", offsetof(struct sv_budget_limits, sems_per_uid) },
		{ "max_sets", offsetof(struct sv_budget_limits, sets) },
		{ "max_sets_per_uid", offsetof(struct sv_budget_limits, sets_per_uid) },
		{ "max_undos", offsetof(struct sv_budget_limits, undos) },
		{ "max_undos_per_uid", offsetof(struct sv_budget_limits, undos_per_uid) },
		{ "max_waiters", offsetof(struct sv_budget_limits, waiters) },
		{ "max_waiters_per_uid", offsetof(struct sv_budget_limits, waiters_per_uid) },
		{ "max_namespaces", offsetof(struct sv_budget_limits, namespaces) },
		{ "max_namespaces_per_uid", offsetof(struct sv_budget_limits, namespaces_per_uid) },
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i].key))
			return (long *)((char *)&c->budget + keys[i].off);
	return NULL;
}

int cfg_set(struct cfg *c, const char *key, const char *v, char *err, size_t errlen)
{
	long n, *budget = budget_key(c, key);

	if (!strcmp(key, "agent_socket")) {
		if (!copy_str(c->agent_path, sizeof(c->agent_path), v) && v[0] == '/')
			return 0;
		snprintf(err, errlen, "agent_socket wants an absolute path under 108 bytes");
	} else if (!strcmp(key, "agent_socket_mode")) {
		if (!parse_int(v, 0, 0777, &n)) {
			c->agent_mode = (mode_t)n;
			return 0;
		}
		snprintf(err, errlen, "agent_socket_mode wants an octal mode such as 0660");
	} else if (!strcmp(key, "agent_socket_group")) {
		if (!copy_str(c->agent_group, sizeof(c->agent_group), v))
			return 0;
		snprintf(err, errlen, "agent_socket_group is too long");
	} else if (!strcmp(key, "control_socket")) {
		if (!copy_str(c->control_path, sizeof(c->control_path), v) &&
		    (v[0] == '/' || !v[0]))
			return 0;
		snprintf(
		    err, errlen,
		    "control_socket wants an absolute path under 108 bytes (or nothing: none)");
	} else if (!strcmp(key, "control_socket_mode")) {
		if (!parse_int(v, 0, 0777, &n)) {
			c->control_mode = (mode_t)n;
			return 0;
		}
		snprintf(err, errlen, "control_socket_mode wants an octal mode such as 0660");
	} else if (!strcmp(key, "control_socket_group")) {
		if (!copy_str(c->control_group, sizeof(c->control_group), v))
			return 0;
		snprintf(err, errlen, "control_socket_group is too long");
	} else if (!strcmp(key, "metrics_listen")) {
		if (!copy_str(c->metrics_listen, sizeof(c->metrics_listen), v) &&
		    (!v[0] || strrchr(v, ':')))
			return 0;
		snprintf(err, errlen,
			 "metrics_listen wants HOST:PORT, [IPV6]:PORT or :PORT (or nothing: none)");
	} else if (!strcmp(key, "metrics_timeout_ms")) {
		if (!parse_int(v, 100, 600000, &n)) {
			c->metrics_timeout_ms = (int)n;
			return 0;
		}
		snprintf(err, errlen, "metrics_timeout_ms wants a number from 100 to 600000");
	} else if (!strcmp(key, "workers")) {
		if (!parse_int(v, 0, 1024, &n)) {
			c->workers = (int)n;
			return 0;
		}
		snprintf(
		    err, errlen,
		    "workers wants a number from 0 (the default: one per 4 CPUs, 1 to 8) to 1024");
	} else if (!strcmp(key, "limits")) {
		if (!sv_limits_parse(v, &c->limits)) {
			c->have_limits = true;
			return 0;
		}
		snprintf(err, errlen,
			 "limits wants SEMMSL,SEMMNS,SEMOPM,SEMMNI (SEMMNI at most %d)", SV_IPCMNI);
	} else if (!strcmp(key, "namespaces")) {
		if (!strcmp(v, "per-ipc-namespace")) {
			c->ns_policy = CFG_NS_PER_IPC;
			return 0;
		}
		if (!strcmp(v, "shared")) {
			c->ns_policy = CFG_NS_SHARED;
			return 0;
		}
		snprintf(err, errlen, "namespaces wants per-ipc-namespace or shared");
	} else if (!strcmp(key, "trace")) {
		if (!strcmp(v, "yes") || !strcmp(v, "no")) {
			c->trace = !strcmp(v, "yes");
			return 0;
		}
		snprintf(err, errlen, "trace wants yes or no");
	} else if (!strcmp(key, "fast_path")) {
		if (!strcmp(v, "yes") || !strcmp(v, "no")) {
			c->fast_path = !strcmp(v, "yes");
			return 0;
		}
		snprintf(err, errlen, "fast_path wants yes or no");
	} else if (!strcmp(key, "max_clients")) {
		if (!parse_int(v, 1, 1 << 20, &n)) {
			c->max_clients = (int)n;
			return 0;
		}
		snprintf(err, errlen, "max_clients wants a positive number");
	} else if (!strcmp(key, "checkpoint_bytes")) {
		if (!parse_int(v, 4096, 1L << 34, &n)) {
			c->checkpoint_bytes = n;
			return 0;
		}
		snprintf(err, errlen, "checkpoint_bytes wants a number from 4096 to %ld", 1L << 34);
	} else if (budget) {
		if (!parse_int(v, 0, 1L << 40, &n)) {
			*budget = n;
			return 0;
		}
		snprintf(err, errlen, "%s wants a whole number from 0 (no bound) to %ld, not '%s'",
			 key, 1L << 40, v);
	} else {
		snprintf(err, errlen, "unknown setting '%s'", key);
	}
	return -EINVAL;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int cfg_load(struct cfg *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[512], why[256];
	int lineno = 0;

	if (!f) {
		int e = errno;

		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash, *eq, *key, *value;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			fclose(f);
			return -EINVAL;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected 'key = value'", path, lineno);
			fclose(f);
			return -EINVAL;
		}
		*eq = '\0';
		key = trim(key);
		value = trim(eq + 1);
		if (cfg_set(c, key, value, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			fclose(f);
			return -EINVAL;
		}
	}
	fclose(f);
	return 0;
}

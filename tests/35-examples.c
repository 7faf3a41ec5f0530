/* SPDX-License-Identifier: MIT */
/*
 * The shipped examples (examples/kubernetes/) parse, and say what the daemon expects: the
 * profile's listenerPath is semvisord's default agent socket, the four semaphore calls are
 * sent to it, the DaemonSet shares the socket's directory with the node and sees its pids.
 * That the profile serves a real container is tests/60-daemon-runc.c's.
 *
 * JSON is read with jansson, as the daemon reads its agent messages; YAML with python3's yaml
 * module (Debian's python3-yaml, in make deps), which turns each file into JSON for jansson:
 * without it the YAML tests are skipped and say so.
 *
 * Run from the top of the tree (as `make test` does).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon/config.h"

#define DIR_ "examples/kubernetes/"

TestSuite(examples, .timeout = 30);

/* Whether the four semaphore calls, and only they, are sent to the agent by syscalls[]. */
static void check_syscalls(const json_t *prof, const char *file)
{
	static const char *const want[] = { "semget", "semop", "semtimedop", "semctl" };
	bool seen[4] = { false };
	const json_t *rule;
	size_t i, j;

	cr_assert(json_is_array(json_object_get(prof, "syscalls")), "%s: no syscalls", file);
	json_array_foreach(json_object_get(prof, "syscalls"), i, rule)
	{
		const json_t *name;

		if (strcmp(json_string_value(json_object_get(rule, "action")) ?: "",
			   "SCMP_ACT_NOTIFY"))
			continue;
		json_array_foreach(json_object_get(rule, "names"), j, name)
		{
			bool known = false;

			for (size_t k = 0; k < 4; k++)
				if (!strcmp(json_string_value(name) ?: "", want[k]))
					seen[k] = known = true;
			cr_expect(known, "%s: %s is sent to the agent", file,
				  json_string_value(name));
		}
	}
	for (size_t k = 0; k < 4; k++)
		cr_expect(seen[k], "%s: %s is not sent to the agent", file, want[k]);
	cr_assert_str_eq(json_string_value(json_object_get(prof, "listenerPath")) ?: "",
			 CFG_DEFAULT_AGENT, "%s: listenerPath is not semvisord's agent socket",
			 file);
}

Test(examples, seccomp_profile_json)
{
	json_error_t je;
	json_t *prof = json_load_file(DIR_ "seccomp-profile.json", JSON_REJECT_DUPLICATES, &je);

	cr_assert(prof, "seccomp-profile.json: %s at line %d", je.text, je.line);
	cr_assert(json_is_string(json_object_get(prof, "defaultAction")));
	check_syscalls(prof, "seccomp-profile.json");
	json_decref(prof);
}

/*
 * Every document of a YAML file, as a JSON array (python3 -c ...), or NULL after cr_skip when
 * python3 or its yaml module is missing. A file that does not parse fails the test.
 */
static json_t *load_yaml(const char *path)
{
	char cmd[512], *out = NULL;
	size_t cap = 0, n = 0;
	json_error_t je;
	json_t *docs;
	FILE *p;
	int st;

	if (system("python3 -c 'import yaml' >/dev/null 2>&1"))
		cr_skip_test("python3 with its yaml module (Debian: python3-yaml) is missing");
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json, sys, yaml; "
		 "json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)' %s",
		 path);
	p = popen(cmd, "r");
	cr_assert(p, "popen python3");
	for (;;) {
		if (n + 4096 > cap)
			cr_assert((out = realloc(out, cap = 2 * cap + 4096)));
		size_t k = fread(out + n, 1, cap - n, p);

		if (!k)
			break;
		n += k;
	}
	st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s does not parse as YAML", path);
	docs = json_loadb(out, n, 0, &je);
	free(out);
	cr_assert(json_is_array(docs), "%s: %s", path, je.text);
	return docs;
}

Test(examples, spo_seccompprofile_yaml)
{
	json_t *docs = load_yaml(DIR_ "seccompprofile-spo.yaml"), *sp = json_array_get(docs, 0);

	cr_assert_eq(json_array_size(docs), 1);
	cr_assert_str_eq(json_string_value(json_object_get(sp, "kind")) ?: "", "SeccompProfile");
	cr_assert_str_eq(json_string_value(json_object_get(sp, "apiVersion")) ?: "",
			 "security-profiles-operator.x-k8s.io/v1beta1");
	check_syscalls(json_object_get(sp, "spec"), "seccompprofile-spo.yaml");
	json_decref(docs);
}

Test(examples, daemonset_yaml)
{
	json_t *docs = load_yaml(DIR_ "semvisord-daemonset.yaml"), *ds = json_array_get(docs, 0);
	json_t *pod, *vol;
	char dir[sizeof(CFG_DEFAULT_AGENT)];
	bool mounted = false;
	size_t i;

	cr_assert_eq(json_array_size(docs), 1);
	cr_assert_str_eq(json_string_value(json_object_get(ds, "kind")) ?: "", "DaemonSet");
	pod = json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
	cr_assert(json_is_true(json_object_get(pod, "hostPID")), "the daemon must see host pids");
	/* the agent socket's directory, shared with the node */
	snprintf(dir, sizeof(dir), "%s", CFG_DEFAULT_AGENT);
	*strrchr(dir, '/') = '\0';
	json_array_foreach(json_object_get(pod, "volumes"), i, vol)
	{
		const char *hp =
		    json_string_value(json_object_get(json_object_get(vol, "hostPath"), "path"));

		mounted |= hp && !strcmp(hp, dir);
	}
	cr_assert(mounted, "no hostPath volume for %s", dir);
	json_decref(docs);
}

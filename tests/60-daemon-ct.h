/* SPDX-License-Identifier: MIT */
/*
 * Shared by the container tests (tests/60-daemon-runc.c, tests/62-daemon-runtimes.c): what a
 * container of any runtime needs from the test, whichever runtime starts it.
 *
 *  - a rootfs of busybox-static plus tests/prog/ct-sem linked statically (the rootfs has no libc);
 *  - an OCI config.json for the runtimes that take a bundle (runc, crun);
 *  - the seccomp profile: the brief's inline one, or the shipped examples/kubernetes/ one with
 *    listenerPath pointed at the test's daemon;
 *  - the checks of ct-sem's output (see tests/prog/ct-sem.c for what it prints and why).
 *
 * Everything is static, as in tests/60-daemon-harness.h: each test file includes this once.
 */
#ifndef SV_TEST_DAEMON_CT_H
#define SV_TEST_DAEMON_CT_H

#include <elf.h>
#include <sys/sendfile.h>

#include <jansson.h>

#include "tests/60-daemon-harness.h"

#define CT_KEY	   "0x5e3a00c7"
#define CT_ROUNDS  300
#define CT_BUSYBOX "/bin/busybox"

static inline bool ct_is_static_elf(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool interp = false, ok = false;

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64) {
		ok = true;
		for (int i = 0; i < eh.e_phnum; i++) {
			if (pread(fd, &ph, sizeof(ph),
				  (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) !=
			    sizeof(ph)) {
				ok = false;
				break;
			}
			if (ph.p_type == PT_INTERP)
				interp = true;
		}
	}
	close(fd);
	return ok && !interp;
}

/*
 * The static ct-sem: $O/tests/prog/ct-sem if a build rule made it static, otherwise compiled
 * here from tests/prog/ct-sem.c (found next to this file, relative to the working directory or
 * to the test binary) with cc -static, since the generic rule links dynamically and the rootfs
 * has no libc.
 */
static inline const char *ct_static_sem(void)
{
	static char out[PATH_MAX];
	const char *built = dh_bin("tests/prog/ct-sem"), *cc = getenv("CC"), *src;
	char cmd[3 * PATH_MAX + 128], *log;
	int rc;

	if (ct_is_static_elf(built))
		return built;
	src = dh_src("tests/prog/ct-sem.c");
	cr_assert(src,
		  "tests/prog/ct-sem.c not found (run from the source tree) and %s is not "
		  "static",
		  built);
	snprintf(out, sizeof(out), "%s", dh_path("ct-sem"));
	snprintf(cmd, sizeof(cmd), "%s -static -O2 -D_GNU_SOURCE -o %s %s >%s 2>&1",
		 cc && *cc ? cc : "cc", out, src, dh_path("cc.log"));
	rc = system(cmd);
	log = dh_slurp(dh_path("cc.log"));
	cr_assert(rc == 0 && ct_is_static_elf(out), "%s failed:\n%s", cmd, log);
	free(log);
	return out;
}

static inline void ct_copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	struct stat st;
	off_t off = 0;

	cr_assert(in >= 0 && fstat(in, &st) == 0, "%s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert(out >= 0, "%s: %s", to, strerror(errno));
	while (off < st.st_size)
		cr_assert(sendfile(out, in, &off, (size_t)(st.st_size - off)) > 0, "copy %s: %s",
			  from, strerror(errno));
	close(in);
	close(out);
}

static inline void ct_require_busybox(void)
{
	if (access(CT_BUSYBOX, X_OK))
		cr_skip_test("%s is missing (Debian package busybox-static)", CT_BUSYBOX);
}

/* rootfs/: busybox-static as sh and friends, and the static test program. */
static inline void ct_make_rootfs(const char *rootfs, const char *prog)
{
	static const char *const dirs[] = { "", "/bin", "/proc", "/dev", "/sys", "/tmp", "/sync" };
	static const char *const applets[] = { "sh", "ls", "cat", "echo", "sleep", "ipcs" };
	char path[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", rootfs, dirs[i]);
		cr_assert(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/bin/busybox", rootfs);
	ct_copy_file(CT_BUSYBOX, path, 0755);
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(path, sizeof(path), "%s/bin/%s", rootfs, applets[i]);
		cr_assert(symlink("busybox", path) == 0);
	}
	snprintf(path, sizeof(path), "%s/bin/ct-sem", rootfs);
	ct_copy_file(prog, path, 0755);
}

/*
 * The seccomp object of the brief, for config.json: allow everything, send the four semaphore
 * calls to the agent at listenerPath, with listenerMetadata if metadata. Freed by the caller.
 */
static inline char *ct_seccomp_json(const char *agent, const char *metadata)
{
	char meta[256] = "", *s;

	if (metadata)
		snprintf(meta, sizeof(meta), "\t\t\t\"listenerMetadata\": \"%s\",\n", metadata);
	cr_assert(asprintf(&s,
			   "{\n"
			   "\t\t\t\"defaultAction\": \"SCMP_ACT_ALLOW\",\n"
			   "\t\t\t\"listenerPath\": \"%s\",\n"
			   "%s"
			   "\t\t\t\"architectures\": [\"SCMP_ARCH_X86_64\", \"SCMP_ARCH_X86\", "
			   "\"SCMP_ARCH_X32\"],\n"
			   "\t\t\t\"syscalls\": [{\"names\": [\"semget\", \"semop\", "
			   "\"semtimedop\", \"semctl\"], \"action\": \"SCMP_ACT_NOTIFY\"}]\n"
			   "\t\t}",
			   agent, meta) > 0);
	return s;
}

/* The shipped profile (examples/kubernetes/), its listenerPath the test's daemon's. */
static inline char *ct_profile(const struct dh_daemon *d, const char *metadata)
{
	const char *src = dh_src("examples/kubernetes/seccomp-profile.json");
	json_error_t je;
	char *profile;
	json_t *prof;

	cr_assert(src, "examples/kubernetes/seccomp-profile.json not found");
	prof = json_load_file(src, JSON_REJECT_DUPLICATES, &je);
	cr_assert(prof, "%s: %s", src, je.text);
	cr_assert_eq(json_object_set_new(prof, "listenerPath", json_string(d->sock)), 0);
	if (metadata)
		cr_assert_eq(json_object_set_new(prof, "listenerMetadata", json_string(metadata)),
			     0);
	profile = json_dumps(prof, JSON_INDENT(1));
	json_decref(prof);
	cr_assert(profile);
	return profile;
}

/* What a bundle's config.json says beyond the defaults; NULL members leave things out. */
struct ct_oci {
	const char *rootfs;	 /* absolute */
	const char *args_json;	 /* process.args, a JSON array */
	const char *seccomp;	 /* linux.seccomp, a JSON object; NULL: no profile */
	const char *annotations; /* the members of the top-level annotations object */
	const char *sync;	 /* bind-mounted at /sync */
	const char *ipc_ns;	 /* an IPC namespace to join (/proc/PID/ns/ipc); NULL: a new one */
	const char *host_bin;	 /* bind-mounted read-only at /host, with the host's /usr, so
				    that dynamically linked programs of the host's build run */
};

/*
 * bundle/config.json: `runc spec`'s default (1.1.5) with process.args, an absolute root, no
 * terminal and what o adds. Runtimes hand the annotations on in the state they send the agent.
 */
static inline void ct_write_oci_config(const char *bundle, const struct ct_oci *o)
{
	char path[PATH_MAX + 16], sync_mount[PATH_MAX + 256] = "", ann[4096] = "";
	char ipc[PATH_MAX + 32] = "", host_mounts[PATH_MAX + 512] = "";
	char *seccomp = NULL;

	if (o->seccomp)
		cr_assert(asprintf(&seccomp, ",\n\t\t\"seccomp\": %s", o->seccomp) > 0);
	if (o->annotations)
		snprintf(ann, sizeof(ann), "\t\"annotations\": {%s},\n", o->annotations);
	if (o->sync)
		snprintf(
		    sync_mount, sizeof(sync_mount),
		    ",\n\t\t{\"destination\": \"/sync\", \"type\": \"bind\", \"source\": \"%s\", "
		    "\"options\": [\"rbind\", \"rw\"]}",
		    o->sync);
	if (o->ipc_ns)
		snprintf(ipc, sizeof(ipc), ", \"path\": \"%s\"", o->ipc_ns);
	if (o->host_bin)
		snprintf(host_mounts, sizeof(host_mounts),
			 ",\n\t\t{\"destination\": \"/host\", \"type\": \"bind\", \"source\": "
			 "\"%s\", \"options\": [\"rbind\", \"ro\"]},\n"
			 "\t\t{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": "
			 "\"/usr\", \"options\": [\"rbind\", \"ro\"]}",
			 o->host_bin);
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	dh_write_file(
	    path,
	    "{\n"
	    "%s"
	    "\t\"ociVersion\": \"1.0.2-dev\",\n"
	    "\t\"process\": {\n"
	    "\t\t\"terminal\": false,\n"
	    "\t\t\"user\": {\"uid\": 0, \"gid\": 0},\n"
	    "\t\t\"args\": %s,\n"
	    "\t\t\"env\": "
	    "[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],\n"
	    "\t\t\"cwd\": \"/\",\n"
	    "\t\t\"capabilities\": {\n"
	    "\t\t\t\"bounding\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"effective\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"permitted\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"ambient\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"]\n"
	    "\t\t},\n"
	    "\t\t\"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024}],\n"
	    "\t\t\"noNewPrivileges\": true\n"
	    "\t},\n"
	    "\t\"root\": {\"path\": \"%s\", \"readonly\": true},\n"
	    "\t\"hostname\": \"runc\",\n"
	    "\t\"mounts\": [\n"
	    "\t\t{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},\n"
	    "\t\t{\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", "
	    "\"options\": [\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\"]},\n"
	    "\t\t{\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", "
	    "\"mode=0620\", \"gid=5\"]},\n"
	    "\t\t{\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\"]},\n"
	    "\t\t{\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\"]},\n"
	    "\t\t{\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"ro\"]},\n"
	    "\t\t{\"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": "
	    "\"cgroup\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\"]}%s%s\n"
	    "\t],\n"
	    "\t\"linux\": {\n"
	    "\t\t\"resources\": {\"devices\": [{\"allow\": false, \"access\": \"rwm\"}]},\n"
	    "\t\t\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"network\"}, {\"type\": "
	    "\"ipc\"%s}, "
	    "{\"type\": \"uts\"}, {\"type\": \"mount\"}],\n"
	    "\t\t\"maskedPaths\": [\"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", "
	    "\"/proc/keys\", "
	    "\"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\", "
	    "\"/proc/sched_debug\", \"/sys/firmware\", \"/proc/scsi\"],\n"
	    "\t\t\"readonlyPaths\": [\"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\", "
	    "\"/proc/sysrq-trigger\"]%s\n"
	    "\t}\n"
	    "}\n",
	    ann, o->args_json, o->rootfs, sync_mount, host_mounts, ipc, seccomp ? seccomp : "");
	free(seccomp);
}

/*
 * Wait (bounded) until the file ready exists, made by the container that the runtime process
 * pid runs. false if pid ended first (its wait status in *status, and it is reaped) or the time
 * ran out (*status -1).
 */
static inline bool ct_wait_ready(pid_t pid, const char *ready, int timeout_ms, int *status)
{
	int64_t end = dh_now_ms() + timeout_ms;

	while (access(ready, F_OK)) {
		if (waitpid(pid, status, WNOHANG) == pid) {
			dh_untrack(pid);
			return false;
		}
		if (dh_now_ms() >= end) {
			*status = -1;
			return false;
		}
		dh_sleep_ms(10);
	}
	return true;
}

/* The pingpong container's output after its release: every value as expected, none of it from
   the kernel. */
static inline void ct_check_pingpong(const char *out)
{
	static const char *const want[] = {
		"created: yes\n",
		"ping: exited 0\n",
		"pong: exited 0\n",
		"sem0 sem1: 0 0\n",
		"lastpid is pong: yes\n",
		"kernel sets: 0\n",
		"mark: 0\n",
		"after probe: same id yes, sem0 1234\n",
		"rmid: 0\n",
	};
	char counter[64];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(strstr(out, want[i]), "container A did not print '%.*s':\n%s",
			  (int)strlen(want[i]) - 1, want[i], out);
	snprintf(counter, sizeof(counter), "counter: %d\n", 2 * CT_ROUNDS);
	cr_assert(strstr(out, counter), "container A: expected '%s':\n%s", counter, out);
	cr_assert(!strstr(out, "FAIL"), "container A:\n%s", out);
}

/* `ct-sem probe KEY absent` in another IPC namespace: the key unseen, a set of its own made. */
static inline void ct_check_probe_absent(const char *name, const char *out)
{
	cr_assert(strstr(out, "probe semget: -1 ENOENT\n"), "%s saw A's key:\n%s", name, out);
	cr_assert(strstr(out, "probe own set: created\n"), "%s:\n%s", name, out);
	cr_assert(strstr(out, "probe own getval: 7\n"), "%s:\n%s", name, out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "%s's calls reached the kernel:\n%s", name, out);
	cr_assert(!strstr(out, "FAIL"), "%s:\n%s", name, out);
}

/* `ct-sem probe KEY 1234` in A's IPC namespace: A's set, A's mark, nothing in the kernel. */
static inline void ct_check_probe_shared(const char *name, const char *out)
{
	cr_assert(strstr(out, "probe sem0: 1234\n"), "%s did not see A's set:\n%s", name, out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "%s's calls reached the kernel:\n%s", name, out);
	cr_assert(!strstr(out, "FAIL"), "%s:\n%s", name, out);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A container's root file system for the container tests (tests/60-daemon-runc.c,
 * tests/63-daemon-lxc.c): busybox-static as sh and a few applets, and tests/prog/ct-sem linked
 * statically, since the rootfs has no libc.
 */
#ifndef SV_TEST_DAEMON_ROOTFS_H
#define SV_TEST_DAEMON_ROOTFS_H

#include <elf.h>
#include <sys/sendfile.h>

#include "tests/60-daemon-harness.h"

#define BUSYBOX "/bin/busybox"

static inline bool is_static_elf(const char *path)
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
static inline const char *static_ct_sem(void)
{
	static char out[PATH_MAX];
	const char *built = dh_bin("tests/prog/ct-sem"), *cc = getenv("CC"), *src;
	char cmd[3 * PATH_MAX + 128], *log;
	int rc;

	if (is_static_elf(built))
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
	cr_assert(rc == 0 && is_static_elf(out), "%s failed:\n%s", cmd, log);
	free(log);
	return out;
}

static inline void copy_file(const char *from, const char *to, mode_t mode)
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

/* rootfs/: busybox-static as sh and friends, and the static test program. */
static inline void make_rootfs(const char *rootfs, const char *prog)
{
	static const char *const dirs[] = { "", "/bin", "/proc", "/dev", "/sys", "/tmp", "/sync" };
	static const char *const applets[] = { "sh", "ls", "cat", "echo", "sleep", "ipcs" };
	char path[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", rootfs, dirs[i]);
		cr_assert(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/bin/busybox", rootfs);
	copy_file(BUSYBOX, path, 0755);
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(path, sizeof(path), "%s/bin/%s", rootfs, applets[i]);
		cr_assert(symlink("busybox", path) == 0);
	}
	snprintf(path, sizeof(path), "%s/bin/ct-sem", rootfs);
	copy_file(prog, path, 0755);
}

#endif

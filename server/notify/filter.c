/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <unistd.h>

#include "notify/filter.h"

static const int sem_calls[] = { SCMP_SYS(semget), SCMP_SYS(semop), SCMP_SYS(semtimedop),
				 SCMP_SYS(semctl) };

static const int cred_calls[] = {
	SCMP_SYS(setuid),    SCMP_SYS(setgid),	  SCMP_SYS(setreuid), SCMP_SYS(setregid),
	SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setfsuid), SCMP_SYS(setfsgid),
	SCMP_SYS(setgroups), SCMP_SYS(capset),	  SCMP_SYS(execve),   SCMP_SYS(execveat),
	SCMP_SYS(unshare),   SCMP_SYS(setns),
};

bool filter_is_cred_change(int nr)
{
	for (size_t i = 0; i < sizeof(cred_calls) / sizeof(cred_calls[0]); i++)
		if (cred_calls[i] == nr)
			return true;
	return false;
}

/* CAP_SYS_ADMIN lets us install a filter without no_new_privs, so setuid programs still work. */
static bool have_sys_admin(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN);
}

/*
 * The i386 half: semaphore calls fail with ENOSYS rather than reach the kernel's semaphores.
 * Given the native names, libseccomp adds both the direct calls (semget 393, semctl 394) and
 * ipc(2) with the matching call number; it compares that number exactly, while the kernel
 * ignores its upper 16 bits (a version), so the masked ipc rules close that way around.
 */
static int build_i386(scmp_filter_ctx *out)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	const uint32_t nosys = SCMP_ACT_ERRNO(ENOSYS);
	int ipc, t64, rc;

	if (!ctx)
		return -ENOMEM;
	if ((rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE)) ||
	    (rc = seccomp_arch_add(ctx, SCMP_ARCH_X86)))
		goto fail;
	for (size_t i = 0; i < sizeof(sem_calls) / sizeof(sem_calls[0]); i++)
		if ((rc = seccomp_rule_add(ctx, nosys, sem_calls[i], 0)))
			goto fail;
	t64 = seccomp_syscall_resolve_name("semtimedop_time64");
	if (t64 >= 0 && (rc = seccomp_rule_add(ctx, nosys, t64, 0)))
		goto fail;
	ipc = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, "ipc");
	for (int call = 1; call <= 4 && ipc >= 0; call++) {
		rc = seccomp_rule_add_exact(
		    ctx, nosys, ipc, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffff, (scmp_datum_t)call));
		if (rc && rc != -EEXIST)
			goto fail;
	}
	*out = ctx;
	return 0;
fail:
	seccomp_release(ctx);
	return rc;
}

/*
 * libseccomp builds the program; the kernel gets it through the raw system call, because
 * libseccomp 2.5.4's seccomp_load() can report a stale errno (EFAULT) where the kernel said
 * EBUSY, and EBUSY is the one a user must be told about. Returns the listener fd or -errno.
 */
static int load(scmp_filter_ctx ctx, bool nnp)
{
	struct sock_fprog prog;
	struct stat sb;
	void *bpf;
	int mfd, fd, err;

	mfd = memfd_create("semvisor-filter", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	err = seccomp_export_bpf(ctx, mfd);
	if (err || fstat(mfd, &sb) || sb.st_size <= 0 || sb.st_size % sizeof(struct sock_filter)) {
		close(mfd);
		return err ? err : -EINVAL;
	}
	bpf = malloc((size_t)sb.st_size);
	if (!bpf || pread(mfd, bpf, (size_t)sb.st_size, 0) != sb.st_size) {
		free(bpf);
		close(mfd);
		return -EIO;
	}
	close(mfd);
	prog.len = (unsigned short)(sb.st_size / (off_t)sizeof(struct sock_filter));
	prog.filter = bpf;
	if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		free(bpf);
		return -errno;
	}
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			  &prog);
	err = errno;
	free(bpf);
	if (fd < 0)
		return -err;
	/* the kernel sets close-on-exec on the listener itself */
	return fd;
}

int filter_install(const struct filter_opts *opts, char *err, size_t errlen)
{
	scmp_filter_ctx ctx, i386 = NULL;
	int rc, fd;

	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, errlen, "out of memory building the seccomp filter");
		return -ENOMEM;
	}
	/* Raw errnos from the kernel, not libseccomp's -ECANCELED: EBUSY must be told apart. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)))
		goto fail_build;
	if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X32)) && rc != -EEXIST)
		goto fail_build;
	for (size_t i = 0; i < sizeof(sem_calls) / sizeof(sem_calls[0]); i++)
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, sem_calls[i], 0)))
			goto fail_build;
	if (opts->trap_cred_changes)
		for (size_t i = 0; i < sizeof(cred_calls) / sizeof(cred_calls[0]); i++)
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, cred_calls[i], 0)))
				goto fail_build;
	if ((rc = build_i386(&i386)) || (rc = seccomp_merge(ctx, i386)))
		goto fail_build;
	i386 = NULL; /* merged into ctx */

	fd = load(ctx, opts->force_nnp || !have_sys_admin());
	seccomp_release(ctx);
	if (fd >= 0)
		return fd;
	switch (-fd) {
	case EBUSY:
		snprintf(err, errlen,
			 "a seccomp filter with a listener is already installed above this process "
			 "(nested sandbox or container supervisor); the kernel allows only one "
			 "(EBUSY)");
		break;
	case EACCES:
		snprintf(err, errlen,
			 "installing a seccomp filter needs no_new_privs or "
			 "CAP_SYS_ADMIN (EACCES)");
		break;
	case EINVAL:
	case ENOSYS:
	case EOPNOTSUPP:
		snprintf(err, errlen,
			 "this kernel lacks seccomp user notification (needs Linux 5.0 or later "
			 "with CONFIG_SECCOMP_FILTER): %s",
			 strerror(-fd));
		break;
	default:
		snprintf(err, errlen, "loading the seccomp filter: %s", strerror(-fd));
	}
	return fd;

fail_build:
	if (i386)
		seccomp_release(i386);
	seccomp_release(ctx);
	snprintf(err, errlen, "building the seccomp filter: %s", strerror(rc < 0 ? -rc : rc));
	return rc < 0 ? rc : -EINVAL;
}

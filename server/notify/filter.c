/* SPDX-License-Identifier: MIT */
/*
 * Building the filter (filter.h) with libseccomp, one context per system-call table, merged.
 *
 * Each table gets rules of its own because libseccomp, given a rule for a multi-architecture
 * context, translates it to every architecture by name and, on i386, turns each semaphore call
 * into an ipc(2) rule that compares the call number exactly; the kernel ignores the number's
 * upper 16 bits (a version), so such a rule lets SEMGET | 1 << 16 through. Here i386 gets
 * explicit ipc(2) rules on the low 16 bits, and tests/33-notify-filter runs the finished program
 * over every number of every table to check the result against the kernel's own tables.
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "notify/filter.h"

/* ipc(2) call numbers (the kernel's include/uapi/linux/ipc.h) */
#define IPCCALL_SEMOP	   1
#define IPCCALL_SEMGET	   2
#define IPCCALL_SEMCTL	   3
#define IPCCALL_SEMTIMEDOP 4

/* the unshare flags that change what SysV semaphores a thread sees, or its undo list */
#define NNS_BITS 2
static const scmp_datum_t unshare_bits[NNS_BITS] = { CLONE_NEWIPC, CLONE_SYSVSEM };

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
 * unshare and setns in the forms that change an IPC namespace or detach the SysV undo list
 * (CLONE_NEWIPC implies CLONE_SYSVSEM). setns's nstype is an int: only its low 32 bits count,
 * as for the kernel; 0 means "whatever namespace fd is", so it is trapped too.
 */
static int add_ns_rules(scmp_filter_ctx ctx, uint32_t trap)
{
	int rc;

	for (int i = 0; i < NNS_BITS; i++) {
		rc =
		    seccomp_rule_add(ctx, trap, SCMP_SYS(unshare), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, unshare_bits[i], unshare_bits[i]));
		if (rc)
			return rc;
	}
	rc = seccomp_rule_add(ctx, trap, SCMP_SYS(setns), 1,
			      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, trap, SCMP_SYS(setns), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, CLONE_NEWIPC, CLONE_NEWIPC));
	return rc;
}

/* What a trapped call gets: a notification, or a ptrace stop for the ptrace transport. */
static uint32_t trap_action(const struct filter_opts *o)
{
	return o->trace ? SCMP_ACT_TRACE(0) : SCMP_ACT_NOTIFY;
}

/* A context for one table only, with the attributes every context to be merged must share. */
static int table_ctx(uint32_t arch, scmp_filter_ctx *out)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	if (!ctx)
		return -ENOMEM;
	/* Raw errnos from the kernel, not libseccomp's -ECANCELED: EBUSY must be told apart. */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
	/*
	 * A table not in the filter (x32 on a kernel without it) gets ENOSYS, as natively:
	 * libseccomp's default would kill the process.
	 */
	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
	if (!rc && arch != SCMP_ARCH_NATIVE && (rc = seccomp_arch_add(ctx, arch)) == 0)
		rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	if (rc) {
		seccomp_release(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

/*
 * The end of building a table's context: the namespace changes are trapped if asked, then ctx
 * goes to *out, or is released if anything failed (rc). ctx is NULL if it was never made.
 */
static int table_done(scmp_filter_ctx ctx, const struct filter_opts *o, int rc,
		      scmp_filter_ctx *out)
{
	if (!rc && o->trap_ns_changes)
		rc = add_ns_rules(ctx, trap_action(o));
	if (rc) {
		if (ctx)
			seccomp_release(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

/* x86_64 or x32: the semaphore calls are served; x32 shares x86_64's entry points and layouts. */
static int build_64(uint32_t arch, const struct filter_opts *o, scmp_filter_ctx *out)
{
	static const int sem_calls[] = { SCMP_SYS(semget), SCMP_SYS(semop), SCMP_SYS(semtimedop),
					 SCMP_SYS(semctl) };
	static const int open_calls[] = { SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2) };
	scmp_filter_ctx ctx = NULL;
	int rc = table_ctx(arch, &ctx);

	for (size_t i = 0; !rc && i < sizeof(sem_calls) / sizeof(sem_calls[0]); i++)
		rc = seccomp_rule_add(ctx, trap_action(o), sem_calls[i], 0);
	for (size_t i = 0; !rc && o->trap_opens && i < sizeof(open_calls) / sizeof(open_calls[0]);
	     i++)
		rc = seccomp_rule_add(ctx, trap_action(o), open_calls[i], 0);
	return table_done(ctx, o, rc, out);
}

/* i386: every semaphore entry point fails closed until 32-bit programs are served. */
static int build_i386(const struct filter_opts *o, scmp_filter_ctx *out)
{
	const uint32_t nosys = SCMP_ACT_ERRNO(ENOSYS);
	scmp_filter_ctx ctx = NULL;
	int rc = table_ctx(SCMP_ARCH_X86, &ctx);

	if (!rc)
		rc = seccomp_rule_add(ctx, nosys, SCMP_SYS(semget), 0);
	if (!rc)
		rc = seccomp_rule_add(ctx, nosys, SCMP_SYS(semctl), 0);
	if (!rc)
		rc = seccomp_rule_add(ctx, nosys, SCMP_SYS(semtimedop_time64), 0);
	for (int call = IPCCALL_SEMOP; !rc && call <= IPCCALL_SEMTIMEDOP; call++) {
		rc = seccomp_rule_add(ctx, nosys, SCMP_SYS(ipc), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffff, (scmp_datum_t)call));
		if (rc == -EEXIST)
			rc = 0;
	}
	return table_done(ctx, o, rc, out);
}

int filter_probe_notify(void)
{
	/* the smallest filter: allow everything */
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { 1, &allow };
	int status, fd;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* a child that ends at once: the filter and no_new_privs go with it */
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(errno);
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		_exit(fd < 0 ? errno : 0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -ECHILD;
}

bool filter_kernel_has_x32(void)
{
	return syscall(__X32_SYSCALL_BIT + SYS_getpid) >= 0;
}

static int build(const struct filter_opts *o, scmp_filter_ctx *out)
{
	scmp_filter_ctx ctx, x32 = NULL, i386 = NULL;
	int rc = build_64(SCMP_ARCH_NATIVE, o, &ctx);

	if (rc)
		return rc;
	/* Without x32 in the kernel its calls fail with ENOSYS before they reach anything. */
	if (filter_kernel_has_x32()) {
		if ((rc = build_64(SCMP_ARCH_X32, o, &x32)) || (rc = seccomp_merge(ctx, x32)))
			goto fail;
		x32 = NULL; /* merged into ctx */
	}
	if ((rc = build_i386(o, &i386)) || (rc = seccomp_merge(ctx, i386)))
		goto fail;
	*out = ctx;
	return 0;
fail:
	if (x32)
		seccomp_release(x32);
	if (i386)
		seccomp_release(i386);
	seccomp_release(ctx);
	return rc < 0 ? rc : -EINVAL;
}

static int export(scmp_filter_ctx ctx, struct sock_filter **prog)
{
	struct stat sb;
	void *bpf;
	int mfd, err;

	mfd = memfd_create("semvisor-filter", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	err = seccomp_export_bpf(ctx, mfd);
	if (!err &&
	    (fstat(mfd, &sb) || sb.st_size <= 0 || sb.st_size % (off_t)sizeof(struct sock_filter) ||
	     sb.st_size > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter))))
		err = -EINVAL;
	bpf = err ? NULL : malloc((size_t)sb.st_size);
	if (!err && (!bpf || pread(mfd, bpf, (size_t)sb.st_size, 0) != sb.st_size))
		err = -EIO;
	close(mfd);
	if (err) {
		free(bpf);
		return err;
	}
	*prog = bpf;
	return (int)(sb.st_size / (off_t)sizeof(struct sock_filter));
}

int filter_export(const struct filter_opts *opts, void **prog)
{
	scmp_filter_ctx ctx;
	struct sock_filter *p;
	int n = build(opts, &ctx);

	if (n)
		return n;
	n = export(ctx, &p);
	seccomp_release(ctx);
	if (n > 0)
		*prog = p;
	return n;
}

/*
 * libseccomp builds the program; the kernel gets it through the raw system call, because
 * libseccomp 2.5.4's seccomp_load() can report a stale errno (EFAULT) where the kernel said
 * EBUSY, and EBUSY is the one a user must be told about. Returns the listener fd (0 without
 * one) or -errno.
 */
static int load(scmp_filter_ctx ctx, bool nnp, bool listener)
{
	struct sock_fprog fprog;
	struct sock_filter *bpf;
	int n = export(ctx, &bpf), fd, err;

	if (n < 0)
		return n;
	fprog.len = (unsigned short)n;
	fprog.filter = bpf;
	if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		err = errno;
		free(bpf);
		return -err;
	}
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			  listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &fprog);
	err = errno;
	free(bpf);
	/* the kernel sets close-on-exec on the listener itself */
	return fd < 0 ? -err : fd;
}

int filter_install(const struct filter_opts *opts, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	int rc, fd;

	rc = build(opts, &ctx);
	if (rc) {
		snprintf(err, errlen, "building the seccomp filter: %s", strerror(-rc));
		return rc;
	}
	fd = load(ctx, opts->force_nnp || !have_sys_admin(), !opts->trace);
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
}

/* SPDX-License-Identifier: MIT */
/*
 * The seccomp user-notification transport (transport.h): the listener's fd is the notifier
 * the filter returned, calls come with NOTIF_RECV and go back with NOTIF_SEND, and the
 * callers' memory is read and written with process_vm_readv/writev (target.h).
 *
 * NOTIF_ID_VALID and NOTIF_SEND take the notifier's mutex interruptibly: a signal (the
 * receiver's kick, receiver.c) makes them fail with EINTR having done nothing, so they are
 * retried.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>

#include "notify/listener.h"
#include "notify/super.h"
#include "notify/target.h"
#include "notify/transport.h"

static int seccomp_recv(struct nt_listener *l, struct seccomp_notif *n, size_t size)
{
	/* NOTIF_RECV insists on a zeroed buffer. */
	memset(n, 0, size);
	return ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_RECV, n) ? -errno : 0;
}

static bool seccomp_waits(const struct nt_listener *l, uint64_t id)
{
	int rc;

	while ((rc = ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id)) && errno == EINTR)
		;
	return rc == 0;
}

static int seccomp_answer(const struct nt_listener *l, uint64_t id, long val, unsigned int flags)
{
	size_t size = l->super->resp_size;
	union {
		struct seccomp_notif_resp r;
		char raw[256];
	} u;

	memset(&u, 0, size < sizeof(u) ? size : sizeof(u));
	u.r.id = id;
	u.r.flags = flags;
	if (val < 0)
		u.r.error = (int32_t)val; /* must be negative, or it reads as success */
	else
		u.r.val = val;
	while (ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_SEND, &u.r))
		if (errno != EINTR)
			return -errno;
	return 0;
}

#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif

/*
 * ADDFD with SEND (5.14): the file and the answer in one step, so the caller cannot get the
 * one without the other. Interrupted before the caller took the file, it did nothing.
 */
static int seccomp_answer_fd(const struct nt_listener *l, uint64_t id, int fd, bool cloexec)
{
	struct seccomp_notif_addfd a = {
		.id = id,
		.flags = SECCOMP_ADDFD_FLAG_SEND,
		.srcfd = (uint32_t)fd,
		.newfd_flags = cloexec ? O_CLOEXEC : 0,
	};

	int rc;

	while ((rc = ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a)) < 0)
		if (errno != EINTR)
			return -errno;
	return rc;
}

void nt_vm_read(const struct nt_listener *l, pid_t tid, struct nt_span *sp, int n)
{
	(void)l;
	if (n == 2) { /* the common semtimedop: timeout and sops in one system call */
		tgt_read2(tid, sp[0].addr, sp[0].buf, sp[0].len, &sp[0].err, sp[1].addr, sp[1].buf,
			  sp[1].len, &sp[1].err);
		return;
	}
	for (int i = 0; i < n; i++)
		sp[i].err = tgt_read(tid, sp[i].addr, sp[i].buf, sp[i].len);
}

int nt_vm_write(const struct nt_listener *l, pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	(void)l;
	return tgt_write(tid, addr, buf, len);
}

const struct nt_transport nt_seccomp_transport = {
	.name = "seccomp",
	.recv = seccomp_recv,
	.answer = seccomp_answer,
	.answer_fd = seccomp_answer_fd,
	.waits = seccomp_waits,
	.read = nt_vm_read,
	.write = nt_vm_write,
};

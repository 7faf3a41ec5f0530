/* SPDX-License-Identifier: MIT */
/*
 * How a trapped call reaches the supervisor and how it goes back: receive it, answer it, ask
 * whether its caller still waits, and read or write the caller's memory. The serving code
 * (serve.c, parked.c, ident.c) does all of that through this interface only, so that another
 * way of trapping calls can stand behind the same code: seccomp user notification
 * (transport.c) and ptrace (ptrace.h).
 *
 * A call is described as the kernel's struct seccomp_notif describes it (id, thread, ABI,
 * number, arguments), whatever brought it.
 */
#ifndef SV_NOTIFY_TRANSPORT_H
#define SV_NOTIFY_TRANSPORT_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

struct nt_listener;

/* A region of the caller's memory to read; err is set per region (0 or -EFAULT). */
struct nt_span {
	uint64_t addr;
	void *buf;
	size_t len; /* 0: skipped */
	int err;
};

struct nt_transport {
	const char *name;
	/*
	 * Take the next call into n (size bytes, as large as the kernel says): 0, or -errno
	 * (ENOENT: its caller went before it was taken, or nobody uses the listener any more;
	 * EINTR: a signal, the receiver's kick).
	 */
	int (*recv)(struct nt_listener *l, struct seccomp_notif *n, size_t size);
	/*
	 * Answer call id with a value or -errno; with NT_CONTINUE the call runs as it would
	 * without us. 0, or -errno (ENOENT: its caller no longer waits: it was interrupted or
	 * died).
	 */
	int (*answer)(const struct nt_listener *l, uint64_t id, long val, unsigned int flags);
	/*
	 * Answer call id with a file: fd goes into the caller at its lowest free number
	 * (close-on-exec if cloexec), and the call returns that number. The number, or -errno
	 * (ENOENT as for answer).
	 */
	int (*answer_fd)(const struct nt_listener *l, uint64_t id, int fd, bool cloexec);
	/* Is call id still waiting for its answer? */
	bool (*waits)(const struct nt_listener *l, uint64_t id);
	/*
	 * The memory of thread tid, with that thread's own access rights, by number: whichever
	 * thread has the number when it is read (ident.h says how that is proven ours).
	 */
	void (*read)(const struct nt_listener *l, pid_t tid, struct nt_span *spans, int n);
	int (*write)(const struct nt_listener *l, pid_t tid, uint64_t addr, const void *buf,
		     size_t len);
	/* Optional: call id waits, parked (nt_park()); it stays pending until answered. */
	void (*parked)(const struct nt_listener *l, uint64_t id);
	/* Optional: l is served from now on (nt_super_add_listener() made it). */
	void (*attached)(struct nt_listener *l);
	/* Optional: the listener is being freed; its fd is closed after this. */
	void (*release)(struct nt_listener *l);
};

#define NT_CONTINUE SECCOMP_USER_NOTIF_FLAG_CONTINUE

/*
 * read and write for a transport whose callers are stopped in the call: process_vm_readv and
 * process_vm_writev, with the caller's own access rights (target.h).
 */
void nt_vm_read(const struct nt_listener *l, pid_t tid, struct nt_span *sp, int n);
int nt_vm_write(const struct nt_listener *l, pid_t tid, uint64_t addr, const void *buf, size_t len);

/* Seccomp user notification: the listener's fd is a seccomp notifier. */
extern const struct nt_transport nt_seccomp_transport;

#endif

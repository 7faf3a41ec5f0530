/* SPDX-License-Identifier: MIT */
/* /proc/sysvipc/sem for confined programs (procview.h says what and why). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "notify/procview.h"

/* The sysvipc/sem entry's inode number: procfs numbers its entries once, for every mount. */
static ino_t sem_ino;
static pthread_once_t sem_ino_once = PTHREAD_ONCE_INIT;

static void find_sem_ino(void)
{
	struct stat sb;

	if (stat("/proc/sysvipc/sem", &sb) == 0)
		sem_ino = sb.st_ino;
}

static int open_in(pid_t tid, const char *what)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)tid, what);
	return open(path, O_PATH | O_CLOEXEC);
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

enum pv_file pv_classify(pid_t tid, int dirfd, const char *path, uint64_t oflags, uint64_t resolve)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC | (oflags & O_NOFOLLOW) };
	enum pv_file what = PV_OTHER;
	struct statfs sf;
	struct stat sb;
	int base, fd;

	pthread_once(&sem_ino_once, find_sem_ino);
	if (!sem_ino || !path[0])
		return PV_OTHER;
	/* the caller's restrictions apply to our walk too; the cache-only one would only fail it */
	how.resolve = resolve & ~(uint64_t)RESOLVE_CACHED;
	if (path[0] == '/' && !(resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT))) {
		/* absolute: from the caller's root, absolute symlinks too */
		base = open_in(tid, "root");
		how.resolve |= RESOLVE_IN_ROOT;
	} else if (dirfd == AT_FDCWD) {
		base = open_in(tid, "cwd");
	} else {
		char fdname[32];

		if (dirfd < 0)
			return PV_OTHER; /* the kernel says EBADF */
		snprintf(fdname, sizeof(fdname), "fd/%d", dirfd);
		base = open_in(tid, fdname);
	}
	if (base < 0)
		return PV_OTHER;
	fd = (int)syscall(SYS_openat2, base, path, &how, sizeof(how));
	close(base);
	if (fd < 0)
		return PV_OTHER;
	if (fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC && fstat(fd, &sb) == 0 &&
	    S_ISREG(sb.st_mode)) {
		if (sb.st_ino == sem_ino) {
			what = PV_SYSVIPC_SEM;
		} else {
			/*
			 * sysctl files get an inode number per mount and open: known by where
			 * they sit in their proc mount, which only /proc/sys gives them
			 */
			char self[32], at[PATH_MAX];
			ssize_t n;

			snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
			n = readlink(self, at, sizeof(at) - 1);
			at[n > 0 ? n : 0] = '\0';
			if (n > 0 && ends_with(at, "/sys/kernel/sem"))
				what = PV_SYSCTL_SEM;
			else if (n > 0 && ends_with(at, "/sys/kernel/sem_next_id"))
				what = PV_SYSCTL_NEXT_ID;
		}
	}
	close(fd);
	return what;
}

#define HEADER                                                                                     \
	"       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n"
#define LINE_MAX_ 256 /* one line at its widest: eight numbers of up to 20 digits, and spaces */

/*
 * The text, built by hand: printf's cost per line was most of a 32000-set view's. A
 * growing buffer, NULL once memory ran out.
 */
struct render {
	const struct sv_caller *c;
	char *buf;
	size_t len, cap;
	/* the last id translated each way: most sets share their owner */
	uint32_t uid_in, uid_out, gid_in, gid_out;
	bool have_uid, have_gid;
};

static uint32_t id_out(struct render *r, uint32_t id, bool gid)
{
	const struct sv_caller *c = r->c;
	uint32_t out;

	if (gid ? r->have_gid && r->gid_in == id : r->have_uid && r->uid_in == id)
		return gid ? r->gid_out : r->uid_out;
	if (!c->ops)
		out = id;
	else if (gid)
		out = c->ops->gid_out ? c->ops->gid_out(c, id) : id;
	else
		out = c->ops->uid_out ? c->ops->uid_out(c, id) : id;
	if (gid) {
		r->gid_in = id, r->gid_out = out, r->have_gid = true;
	} else {
		r->uid_in = id, r->uid_out = out, r->have_uid = true;
	}
	return out;
}

/* v in base (8 or 10), right-aligned in width, then a space unless last: printf's %*d. */
static char *put(char *p, bool neg, unsigned long long v, unsigned base, int width, char sep)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % base);
		v /= base;
	} while (v);
	if (neg)
		tmp[n++] = '-';
	for (int pad = width - n; pad > 0; pad--)
		*p++ = ' ';
	while (n)
		*p++ = tmp[--n];
	if (sep)
		*p++ = sep;
	return p;
}

/* One line, as ipc/sem.c's sysvipc_sem_proc_show() prints it ("%10d %10d  %4o %10u ..."). */
static int render_set(const struct sv_set_info *si, void *arg)
{
	struct render *r = arg;
	char *p;

	if (!r->buf)
		return 0;
	if (r->cap - r->len < LINE_MAX_) {
		char *nb = realloc(r->buf, r->cap * 2);

		if (!nb) {
			free(r->buf);
			r->buf = NULL;
			return 0;
		}
		r->buf = nb;
		r->cap *= 2;
	}
	p = r->buf + r->len;
	p = put(p, si->key < 0, si->key < 0 ? -(unsigned long long)si->key : (unsigned)si->key, 10,
		10, ' ');
	p = put(p, si->id < 0, si->id < 0 ? -(unsigned long long)si->id : (unsigned)si->id, 10, 10,
		' ');
	*p++ = ' ';
	p = put(p, false, si->mode, 8, 4, ' ');
	p = put(p, false, (unsigned)si->nsems, 10, 10, ' ');
	p = put(p, false, id_out(r, si->uid, false), 10, 5, ' ');
	p = put(p, false, id_out(r, si->gid, true), 10, 5, ' ');
	p = put(p, false, id_out(r, si->cuid, false), 10, 5, ' ');
	p = put(p, false, id_out(r, si->cgid, true), 10, 5, ' ');
	p = put(p, false, (unsigned long long)si->otime, 10, 10, ' ');
	p = put(p, false, (unsigned long long)si->ctime, 10, 10, '\n');
	r->len = (size_t)(p - r->buf);
	return 0;
}

/*
 * text in a sealed memfd, opened again read-only: a copy that cannot change (the reader gets
 * what was there at the open), and a write to it gets EBADF, as on the kernel's files.
 */
static int memfd_of(const char *text, size_t len)
{
	int fd = memfd_create("semvisor-view", MFD_CLOEXEC | MFD_ALLOW_SEALING), ro = -1, err = 0;
	char self[32];

	if (fd < 0)
		return -errno;
	/* a worker may be signalled (the receiver's kick): a write can stop short */
	for (size_t off = 0; off < len && !err;) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno != EINTR)
			err = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (!err &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL))
		err = -errno;
	if (!err) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		ro = open(self, O_RDONLY | O_CLOEXEC);
		if (ro < 0)
			err = -errno;
	}
	close(fd);
	return err ? err : ro;
}

int pv_render(const struct sv_caller *c)
{
	struct render r = { .c = c, .cap = 128 * 1024 };
	int fd;

	r.buf = malloc(r.cap);
	if (!r.buf)
		return -ENOMEM;
	memcpy(r.buf, HEADER, sizeof(HEADER) - 1);
	r.len = sizeof(HEADER) - 1;
	sv_ns_for_each_set_ordered(c->ns, render_set, &r);
	if (!r.buf)
		return -ENOMEM;
	fd = memfd_of(r.buf, r.len);
	free(r.buf);
	return fd;
}

int pv_render_sysctl(struct sv_ns *ns, enum pv_file what)
{
	char text[96];
	int n;

	if (what == PV_SYSCTL_SEM) {
		struct sv_limits lim;

		sv_ns_limits(ns, &lim);
		n = snprintf(text, sizeof(text), "%d\t%d\t%d\t%d\n", lim.semmsl, lim.semmns,
			     lim.semopm, lim.semmni);
	} else {
		n = snprintf(text, sizeof(text), "%d\n", sv_ns_next_id(ns));
	}
	return memfd_of(text, (size_t)n);
}

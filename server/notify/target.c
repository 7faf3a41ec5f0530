/* SPDX-License-Identifier: MIT */
/*
 * Reading a confined thread from outside: see target.h for which reads prove what.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "notify/target.h"

/* Newer than Debian 12's kernel headers: the values of Linux's uapi. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#define PIDFS_IOCTL_MAGIC	 0xFF
#define PIDFD_GET_IPC_NAMESPACE	 _IO(PIDFS_IOCTL_MAGIC, 2)
#define PIDFD_GET_PID_NAMESPACE	 _IO(PIDFS_IOCTL_MAGIC, 5)
#define PIDFD_GET_USER_NAMESPACE _IO(PIDFS_IOCTL_MAGIC, 9)
#define PIDFD_INFO_CREDS	 (1UL << 1)
#ifndef NS_GET_ID
#define NS_GET_ID _IOR(NSIO, 13, __u64)
#endif
#define FD_NSFS_ROOT (-10003) /* open_by_handle_at(): the root of nsfs */

/* struct pidfd_info as first published (PIDFD_INFO_SIZE_VER0): the ioctl takes its size. */
struct pidfd_info_v0 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
_Static_assert(sizeof(struct pidfd_info_v0) == 64, "PIDFD_INFO_SIZE_VER0");
#define PIDFD_GET_INFO_V0 _IOWR(PIDFS_IOCTL_MAGIC, 11, struct pidfd_info_v0)

/* ---- features ---- */

static const char *const feature_names[] = { "pidfd_thread", "pidfd_info", "pidfd_ns", "ns_id" };

static bool *feature(struct tgt_features *f, int i)
{
	bool *fields[] = { &f->pidfd_thread, &f->pidfd_info, &f->pidfd_ns, &f->ns_id };

	return fields[i];
}

static bool probe_ns_id(void)
{
	struct tgt_nsid id;
	int fd = open("/proc/self/ns/ipc", O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return false;
	rc = tgt_ns_ident(fd, true, &id);
	close(fd);
	return rc == 0 && id.id && id.has_handle && tgt_ns_alive(&id) == 1;
}

void tgt_probe(struct tgt_features *f)
{
	const char *off = getenv("SEMVISOR_KERNEL_FEATURES_OFF");
	struct pidfd_info_v0 info = { .mask = PIDFD_INFO_CREDS };
	int fd = tgt_pidfd_open(gettid(), true);

	memset(f, 0, sizeof(*f));
	f->pidfd_thread = fd >= 0;
	if (fd < 0)
		fd = tgt_pidfd_open(getpid(), false);
	if (fd >= 0) {
		int ns = ioctl(fd, PIDFD_GET_IPC_NAMESPACE, 0);

		f->pidfd_info = ioctl(fd, PIDFD_GET_INFO_V0, &info) == 0;
		f->pidfd_ns = ns >= 0;
		if (ns >= 0)
			close(ns);
		close(fd);
	}
	f->ns_id = probe_ns_id();
	for (int i = 0; off && i < (int)(sizeof(feature_names) / sizeof(feature_names[0])); i++) {
		size_t len = strlen(feature_names[i]);

		for (const char *p = off; *p; p += strcspn(p, ","), p += *p == ',')
			if (!strncmp(p, "all", 3) ||
			    (!strncmp(p, feature_names[i], len) && (p[len] == ',' || !p[len])))
				*feature(f, i) = false;
	}
}

/* ---- tasks ---- */

int tgt_pidfd_open(pid_t tid, bool thread)
{
	int fd = (int)syscall(SYS_pidfd_open, tid, thread ? PIDFD_THREAD : 0);

	if (fd >= 0)
		return fd;
	/* a number that names no thread group leader (or, before 6.9, no leader at all) */
	return errno == ENOENT || errno == EINVAL ? -ESRCH : -errno;
}

int tgt_alive(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM ? 0
											: -ESRCH;
}

int tgt_creds(int pidfd, struct tgt_creds *c)
{
	struct pidfd_info_v0 info = { .mask = PIDFD_INFO_CREDS };

	if (ioctl(pidfd, PIDFD_GET_INFO_V0, &info))
		return errno == ESRCH ? -ESRCH : -errno;
	c->tgid = (int32_t)info.tgid;
	c->uid[0] = info.ruid;
	c->uid[1] = info.euid;
	c->uid[2] = info.suid;
	c->uid[3] = info.fsuid;
	c->gid[0] = info.rgid;
	c->gid[1] = info.egid;
	c->gid[2] = info.sgid;
	c->gid[3] = info.fsgid;
	return 0;
}

/* Read a whole small /proc file into buf (NUL-terminated). Length, or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) != 0) {
		if (n < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			close(fd);
			return err == ESRCH ? -ESRCH : -err;
		}
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

/*
 * Read a whole /proc file into *buf (allocated, NUL-terminated; the caller frees it), however
 * long: /proc/TID/status lists every supplementary group, up to 65536 of them, ~400 KiB of
 * text, before the lines read after them. Its length, or -errno.
 */
static ssize_t read_whole(const char *path, char **buf)
{
	size_t size = 4096;
	ssize_t len;

	*buf = NULL;
	for (;;) {
		char *bigger = realloc(*buf, size);

		if (!bigger) {
			free(*buf);
			*buf = NULL;
			return -ENOMEM;
		}
		*buf = bigger;
		len = read_small(path, *buf, size);
		if (len < 0 || (size_t)len < size - 1)
			break;
		size *= 4;
	}
	if (len < 0) {
		free(*buf);
		*buf = NULL;
	}
	return len;
}

static int parse_u32_list(const char *p, uint32_t *out, int max)
{
	int n = 0;

	while (*p && *p != '\n') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p)
			break;
		if (n == max)
			return -1; /* more than we can hold */
		out[n++] = (uint32_t)v;
		p = end;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	return n;
}

/* What parse_status() found. */
enum {
	ST_TGID = 1,
	ST_UID = 2,
	ST_GID = 4,
	ST_CAPEFF = 8,
	ST_NSPID = 16,
	ST_GROUPS = 32,
	ST_CREDS = ST_TGID | ST_UID | ST_GID,
};

/* The Groups: line's values, into *g (grown as needed; n of them so far). 0 or -ENOMEM. */
static int parse_groups(const char *v, uint32_t **g, int *n)
{
	int cap = *n; /* the array holds at least *n: growing from there is safe */

	while (*v && *v != '\n') {
		char *end;
		unsigned long id = strtoul(v, &end, 10);

		if (end == v)
			break;
		if (*n == cap) {
			uint32_t *more;

			cap = cap ? 2 * cap : 32;
			more = realloc(*g, (size_t)cap * sizeof(**g));
			if (!more)
				return -ENOMEM;
			*g = more;
		}
		(*g)[(*n)++] = (uint32_t)id;
		for (v = end; *v == ' ' || *v == '\t'; v++)
			;
	}
	return 0;
}

/*
 * Parse the text of /proc/TID/status into st, and its supplementary groups into *groups
 * (allocated; *ngroups of them) when groups is not NULL. The fields found (ST_*), or -ENOMEM.
 */
static int parse_status(const char *buf, struct tgt_status *st, uint32_t **groups, int *ngroups)
{
	const char *line;
	int seen = 0;

	memset(st, 0, sizeof(*st));
	for (line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		const char *v = strchr(line, ':');

		if (!v)
			continue;
		for (v++; *v == ' ' || *v == '\t'; v++)
			;
		if (!strncmp(line, "Tgid:", 5)) {
			st->creds.tgid = (int32_t)strtol(v, NULL, 10);
			seen |= ST_TGID;
		} else if (!strncmp(line, "Uid:", 4)) {
			seen |= parse_u32_list(v, st->creds.uid, 4) == 4 ? ST_UID : 0;
		} else if (!strncmp(line, "Gid:", 4)) {
			seen |= parse_u32_list(v, st->creds.gid, 4) == 4 ? ST_GID : 0;
		} else if (!strncmp(line, "Groups:", 7) && groups) {
			if (parse_groups(v, groups, ngroups))
				return -ENOMEM;
			seen |= ST_GROUPS;
		} else if (!strncmp(line, "Threads:", 8)) {
			st->threads = (int)strtol(v, NULL, 10);
		} else if (!strncmp(line, "CapEff:", 7)) {
			st->cap_eff = strtoull(v, NULL, 16);
			seen |= ST_CAPEFF;
		} else if (!strncmp(line, "NSpid:", 6)) {
			uint32_t tmp[TGT_MAX_LEVELS];

			st->nspid_levels = parse_u32_list(v, tmp, TGT_MAX_LEVELS);
			for (int i = 0; i < st->nspid_levels; i++)
				st->nspid[i] = (int32_t)tmp[i];
			seen |= ST_NSPID;
		}
	}
	return seen;
}

/* /proc/TID/status, whole (read_whole()). */
static ssize_t read_status(pid_t tid, char **buf)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	return read_whole(path, buf);
}

int tgt_read_status(pid_t tid, struct tgt_status *st)
{
	char *buf;
	ssize_t len = read_status(tid, &buf);
	int seen;

	if (len < 0)
		return (int)len;
	seen = parse_status(buf, st, NULL, NULL);
	free(buf);
	/* A zombie or a half-exited thread lacks some of these: as good as gone. */
	return seen == (ST_CREDS | ST_CAPEFF | ST_NSPID) && st->nspid_levels > 0 ? 0 : -ESRCH;
}

int tgt_read_groups(pid_t tid, struct tgt_creds *c, uint32_t **groups)
{
	struct tgt_status st;
	uint32_t *g = NULL;
	char *buf;
	ssize_t len = read_status(tid, &buf);
	int n = 0, seen;

	if (len < 0)
		return (int)len;
	seen = parse_status(buf, &st, &g, &n);
	free(buf);
	if (seen < 0 || (seen & (ST_CREDS | ST_GROUPS)) != (ST_CREDS | ST_GROUPS)) {
		free(g);
		return seen < 0 ? seen : -ESRCH;
	}
	*c = st.creds;
	*groups = g;
	return n;
}

int tgt_caps(pid_t tid, uint64_t *eff)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, tid };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return errno == ESRCH ? -ESRCH : -errno;
	*eff = (uint64_t)data[1].effective << 32 | data[0].effective;
	return 0;
}

int tgt_read_syscall_regs(pid_t tid, uint64_t *sp, uint64_t *pc)
{
	char path[64], buf[512];
	unsigned long long v[9];
	ssize_t len;
	long nr;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	/* "NR ARG1 ... ARG6 SP PC" while in a system call; "running" or "-1 SP PC" otherwise */
	if (sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7]) != 9)
		return -EAGAIN;
	*sp = v[6];
	*pc = v[7];
	return 0;
}

/* ---- memory ---- */

static int xfer_result(ssize_t n, size_t len)
{
	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && errno == ESRCH)
		return -ESRCH;
	return -EFAULT;
}

int tgt_read(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };

	if (!len)
		return 0;
	return xfer_result(process_vm_readv(tid, &local, 1, &remote, 1, 0), len);
}

int tgt_write(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };

	if (!len)
		return 0;
	return xfer_result(process_vm_writev(tid, &local, 1, &remote, 1, 0), len);
}

void tgt_read2(pid_t tid, uint64_t a1, void *b1, size_t l1, int *r1, uint64_t a2, void *b2,
	       size_t l2, int *r2)
{
	struct iovec local[2], remote[2];
	int n = 0;
	ssize_t got;

	if (l1) {
		local[n] = (struct iovec){ b1, l1 };
		remote[n++] = (struct iovec){ (void *)(uintptr_t)a1, l1 };
	}
	if (l2) {
		local[n] = (struct iovec){ b2, l2 };
		remote[n++] = (struct iovec){ (void *)(uintptr_t)a2, l2 };
	}
	*r1 = *r2 = 0;
	if (!n)
		return;
	/* Transfers stop at the first fault: what was read tells which region failed. */
	got = process_vm_readv(tid, local, (unsigned long)n, remote, (unsigned long)n, 0);
	if (got < 0) {
		int err = errno == ESRCH ? -ESRCH : -EFAULT;

		*r1 = l1 ? err : 0;
		*r2 = l2 ? err : 0;
		return;
	}
	if (l1 && (size_t)got < l1) {
		*r1 = -EFAULT;
		*r2 = l2 ? -EFAULT : 0;
	} else if (l2 && (size_t)got < l1 + l2) {
		*r2 = -EFAULT;
	}
}

/* ---- namespaces ---- */

int tgt_ns_open(int pidfd, pid_t tid, enum tgt_ns_type type, bool by_pidfd)
{
	static const unsigned long ioctls[] = { PIDFD_GET_IPC_NAMESPACE, PIDFD_GET_USER_NAMESPACE,
						PIDFD_GET_PID_NAMESPACE };
	static const char *const names[] = { "ipc", "user", "pid" };
	char path[64];
	int fd;

	if (by_pidfd && pidfd >= 0) {
		fd = ioctl(pidfd, ioctls[type], 0);
		return fd >= 0 ? fd : -errno;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)tid, names[type]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : errno == ENOENT ? -ESRCH : -errno;
}

int tgt_ns_ident(int nsfd, bool with_id, struct tgt_nsid *out)
{
	struct stat sb;
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + sizeof(out->handle.f)];
	} h;
	int mnt;

	memset(out, 0, sizeof(*out));
	if (fstat(nsfd, &sb))
		return -errno;
	out->ino = (uint64_t)sb.st_ino;
	if (!with_id)
		return 0;
	if (ioctl(nsfd, NS_GET_ID, &out->id))
		return -errno;
	h.fh.handle_bytes = sizeof(out->handle.f);
	if (name_to_handle_at(nsfd, "", &h.fh, &mnt, AT_EMPTY_PATH) == 0 &&
	    h.fh.handle_bytes <= sizeof(out->handle.f)) {
		out->has_handle = true;
		out->handle.bytes = h.fh.handle_bytes;
		out->handle.type = h.fh.handle_type;
		memcpy(out->handle.f, h.fh.f_handle, h.fh.handle_bytes);
	}
	return 0;
}

/* An fd of the IPC namespace whose id is given, or -errno (-ESTALE: it is gone). */
int tgt_ns_reopen(const struct tgt_nsid *id)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + sizeof(id->handle.f)];
	} h;
	int fd;

	if (!id->has_handle)
		return -EOPNOTSUPP;
	h.fh.handle_bytes = id->handle.bytes;
	h.fh.handle_type = id->handle.type;
	memcpy(h.fh.f_handle, id->handle.f, id->handle.bytes);
	fd = open_by_handle_at(FD_NSFS_ROOT, &h.fh, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

int tgt_ns_alive(const struct tgt_nsid *id)
{
	int fd = tgt_ns_reopen(id);

	if (fd >= 0) {
		/* Held for an instant only: if it was the last holder, the namespace ends now. */
		close(fd);
		return 1;
	}
	if (fd == -ESTALE)
		return 0;
	/* found, but not ours to open: it lives (newer kernels look it up before they refuse) */
	return fd == -EPERM ? 1 : fd;
}

bool tgt_fd_is_other_ipc_ns(pid_t tid, int fd, uint64_t own_ino)
{
	char path[64], link[64];
	unsigned long long ino;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)tid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return sscanf(link, "ipc:[%llu]", &ino) == 1 && ino != own_ino;
}

int tgt_ns_key(int fd, bool with_id, uint64_t *key)
{
	struct stat sb;

	if (with_id)
		return ioctl(fd, NS_GET_ID, key) ? -errno : 0;
	if (fstat(fd, &sb))
		return -errno;
	*key = (uint64_t)sb.st_ino;
	return 0;
}

int tgt_userns_chain(int ipc_nsfd, bool with_id, struct tgt_userns_link *chain, int max)
{
	int fd = ioctl(ipc_nsfd, NS_GET_USERNS), n = 0, err = 0;

	if (fd < 0)
		return -errno;
	while (n < max) {
		uid_t owner;
		int up;

		if ((err = tgt_ns_key(fd, with_id, &chain[n].id)))
			break;
		chain[n].owner = ioctl(fd, NS_GET_OWNER_UID, &owner) ? UINT32_MAX : owner;
		n++;
		/* EPERM past the top we may see, or at the initial namespace */
		up = ioctl(fd, NS_GET_PARENT);
		close(fd);
		fd = up;
		if (fd < 0)
			break;
	}
	if (fd >= 0)
		close(fd);
	return err ? err : n;
}

int tgt_pidns_chain(int pid_nsfd, bool with_id, int levels, uint64_t *ids)
{
	int fd = dup(pid_nsfd), err = 0;

	if (fd < 0)
		return -errno;
	for (int level = levels - 1; level >= 0; level--) {
		int up;

		if ((err = tgt_ns_key(fd, with_id, &ids[level])))
			break;
		if (level == 0)
			break;
		up = ioctl(fd, NS_GET_PARENT);
		if (up < 0) {
			err = -errno;
			break;
		}
		close(fd);
		fd = up;
	}
	close(fd);
	return err;
}

int tgt_read_idmap(pid_t tid, const char *which, struct tgt_idmap *m)
{
	char path[64], buf[16384];
	const char *line;
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)tid, which);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	m->n = 0;
	for (line = buf; *line && m->n < (int)(sizeof(m->e) / sizeof(m->e[0]));) {
		uint32_t v[3];

		if (parse_u32_list(line + strspn(line, " "), v, 3) == 3)
			m->e[m->n++] = (typeof(m->e[0])){ v[0], v[1], v[2] };
		line = strchr(line, '\n');
		if (!line)
			break;
		line++;
	}
	return 0;
}

bool tgt_idmap_to_inside(const struct tgt_idmap *m, uint32_t outside, uint32_t *inside)
{
	for (int i = 0; i < m->n; i++) {
		if (outside >= m->e[i].outside && outside - m->e[i].outside < m->e[i].count) {
			*inside = m->e[i].inside + (outside - m->e[i].outside);
			return true;
		}
	}
	return false;
}

bool tgt_idmap_to_outside(const struct tgt_idmap *m, uint32_t inside, uint32_t *outside)
{
	for (int i = 0; i < m->n; i++) {
		if (inside >= m->e[i].inside && inside - m->e[i].inside < m->e[i].count) {
			*outside = m->e[i].outside + (inside - m->e[i].inside);
			return true;
		}
	}
	return false;
}

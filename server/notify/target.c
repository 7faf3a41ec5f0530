/* SPDX-License-Identifier: MIT */
/*
 * Reading a confined thread from outside. See target.h for the trust rule (NOTIF_ID_VALID
 * afterwards).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "notify/target.h"

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
			return -err;
		}
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

static int parse_u32_list(const char *p, uint32_t *out, int max)
{
	int n = 0;

	while (*p && *p != '\n' && n < max) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p)
			break;
		out[n++] = (uint32_t)v;
		p = end;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	return n;
}

int tgt_read_status(pid_t tid, struct tgt_status *st)
{
	char path[64], buf[4096];
	const char *line;
	ssize_t len;
	unsigned int seen = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	memset(st, 0, sizeof(*st));
	for (line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		const char *v = strchr(line, ':');

		if (!v)
			continue;
		v++;
		while (*v == ' ' || *v == '\t')
			v++;
		if (!strncmp(line, "Tgid:", 5)) {
			st->tgid = (int32_t)strtol(v, NULL, 10);
			seen |= 1;
		} else if (!strncmp(line, "Uid:", 4)) {
			seen |= parse_u32_list(v, st->uid, 4) == 4 ? 2 : 0;
		} else if (!strncmp(line, "Gid:", 4)) {
			seen |= parse_u32_list(v, st->gid, 4) == 4 ? 4 : 0;
		} else if (!strncmp(line, "Groups:", 7)) {
			st->ngroups = parse_u32_list(v, st->groups, TGT_MAX_GROUPS);
		} else if (!strncmp(line, "Threads:", 8)) {
			st->threads = (int)strtol(v, NULL, 10);
		} else if (!strncmp(line, "CapEff:", 7)) {
			st->cap_eff = strtoull(v, NULL, 16);
			seen |= 8;
		} else if (!strncmp(line, "NSpid:", 6)) {
			uint32_t tmp[TGT_MAX_LEVELS];

			st->nspid_levels = parse_u32_list(v, tmp, TGT_MAX_LEVELS);
			for (int i = 0; i < st->nspid_levels; i++)
				st->nspid[i] = (int32_t)tmp[i];
			seen |= 16;
		}
	}
	/* A zombie or a half-exited thread lacks some of these: as good as gone. */
	return seen == 31 ? 0 : -ESRCH;
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

bool tgt_fd_is_other_ipc_ns(pid_t tid, int fd, uint64_t own_ipc)
{
	char path[64], link[64];
	unsigned long long ino;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)tid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return sscanf(link, "ipc:[%llu]", &ino) == 1 && ino != own_ipc;
}

static int ns_inode(pid_t tid, const char *name, uint64_t *ino)
{
	char path[64];
	struct stat sb;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)tid, name);
	if (stat(path, &sb) < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	*ino = (uint64_t)sb.st_ino;
	return 0;
}

int tgt_read_ns(pid_t tid, struct tgt_ns *ns)
{
	char path[64];
	struct stat sb;
	int fd, ufd, err;

	if ((err = ns_inode(tid, "ipc", &ns->ipc)) || (err = ns_inode(tid, "pid", &ns->pid)) ||
	    (err = ns_inode(tid, "user", &ns->user)))
		return err;

	/* The owner of the IPC namespace decides where CAP_IPC_OWNER counts. */
	ns->ipc_owner = 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ufd = ioctl(fd, NS_GET_USERNS);
	if (ufd >= 0) {
		if (fstat(ufd, &sb) == 0)
			ns->ipc_owner = (uint64_t)sb.st_ino;
		close(ufd);
	}
	close(fd);
	return 0;
}

bool tgt_userns_covers(pid_t tid, uint64_t ancestor)
{
	char path[64];
	struct stat sb;
	bool found = false;
	int fd, up;

	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	up = ioctl(fd, NS_GET_USERNS);
	close(fd);
	/* Walk from the owner towards the root; EPERM once we leave what we may see. */
	for (fd = up; fd >= 0; fd = up) {
		if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_ino == ancestor) {
			found = true;
			close(fd);
			break;
		}
		up = ioctl(fd, NS_GET_PARENT);
		close(fd);
	}
	return found;
}

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

int tgt_mem_open(pid_t tgid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int tgt_mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	/* Offsets are signed: the top half of the address space is never user memory anyway. */
	if (addr > (uint64_t)INT64_MAX - len)
		return -EFAULT;
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EFAULT;
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

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/usock.h"

static int make_parent(const char *path, const char *what, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) && errno != EEXIST) {
		int e = errno;

		snprintf(err, errlen, "cannot create %s for the %s: %s", dir, what, strerror(e));
		return -e;
	}
	return 0;
}

/* What is at the path now: nothing (0), a stale socket removed (0), or -errno. */
static int clear_path(const struct sockaddr_un *sa, const char *what, char *err, size_t errlen)
{
	const char *path = sa->sun_path;
	struct stat sb;
	int fd, rc, e;

	if (lstat(path, &sb)) {
		if (errno == ENOENT)
			return 0;
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (!S_ISSOCK(sb.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket: not replacing it (the %s)",
			 path, what);
		return -EEXIST;
	}
	/* Somebody answering there is a live instance; a refusal means a stale file. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	e = errno;
	close(fd);
	if (rc == 0 || e == EAGAIN || e == EINPROGRESS) {
		snprintf(err, errlen, "another server is already listening on %s", path);
		return -EADDRINUSE;
	}
	if (e != ECONNREFUSED) {
		snprintf(err, errlen, "%s: cannot tell whether a server listens there: %s", path,
			 strerror(e));
		return -e;
	}
	if (unlink(path) && errno != ENOENT) {
		e = errno;
		snprintf(err, errlen, "cannot remove the stale socket %s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int usock_listen(struct usock *u, const char *path, mode_t mode, gid_t group, int backlog,
		 const char *what, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	mode_t old;
	int rc, e;

	u->fd = -1;
	u->path[0] = '\0';
	if (!path || !*path) {
		snprintf(err, errlen, "no path given for the %s", what);
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s path too long: %.200s", what, path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((rc = make_parent(path, what, err, errlen)) ||
	    (rc = clear_path(&sa, what, err, errlen)))
		return rc;

	u->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	/* Born 0600 (the umask is the process's: nothing else here creates files meanwhile). */
	old = umask(0177);
	rc = bind(u->fd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	umask(old);
	if (rc) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		goto fail;
	}
	memcpy(u->path, path, strlen(path) + 1);
	if (stat(path, &sb)) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		goto fail;
	}
	u->dev = sb.st_dev;
	u->ino = sb.st_ino;
	u->owner = sb.st_uid;
	if (chmod(path, mode)) {
		e = errno;
		snprintf(err, errlen, "chmod %s: %s", path, strerror(e));
		goto fail;
	}
	if (group != (gid_t)-1 && chown(path, (uid_t)-1, group)) {
		e = errno;
		snprintf(err, errlen, "chown %s to group %u: %s", path, (unsigned)group,
			 strerror(e));
		goto fail;
	}
	if (listen(u->fd, backlog)) {
		e = errno;
		snprintf(err, errlen, "listen on %s: %s", path, strerror(e));
		goto fail;
	}
	return 0;
fail:
	usock_close(u);
	return -e;
}

void usock_close(struct usock *u)
{
	struct stat sb;

	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	if (u->path[0] && lstat(u->path, &sb) == 0 && sb.st_dev == u->dev && sb.st_ino == u->ino)
		unlink(u->path);
	u->path[0] = '\0';
}

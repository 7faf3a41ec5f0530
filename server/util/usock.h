/* SPDX-License-Identifier: MIT */
/*
 * A listening AF_UNIX stream socket at a path, bound with care, for the agent socket and the
 * control socket alike:
 *  - something at the path that is not a socket (a file, a directory, a symlink) is refused,
 *    never replaced: a typo in a configuration must not delete a file;
 *  - a socket somebody answers on belongs to a live instance: refused (EADDRINUSE);
 *  - a socket nobody answers on is a dead instance's: removed, then ours bound in its place;
 *  - ours is born 0600 (under a tight umask) and only then widened to the mode asked for, so
 *    it is never reachable by more peers than intended;
 *  - at the end it is removed only if the file at the path is still the one we bound (a newer
 *    instance may have replaced it).
 */
#ifndef SV_USOCK_H
#define SV_USOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

struct usock {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev; /* the file we bound */
	ino_t ino;
	uid_t owner;
};

/*
 * Bind and listen at path, creating its directory (one level, 0755) if missing; the socket
 * is non-blocking and close-on-exec. group (gid_t)-1 leaves the group as it comes; what
 * names the socket in messages is `what` ("agent socket"). 0, or -errno with a sentence.
 */
int usock_listen(struct usock *u, const char *path, mode_t mode, gid_t group, int backlog,
		 const char *what, char *err, size_t errlen);
/* Close the socket and remove its file if it is still ours. */
void usock_close(struct usock *u);

#endif

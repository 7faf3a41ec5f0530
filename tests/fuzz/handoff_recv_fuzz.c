/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ho_recv (server/handoff/xfer.c): the same bytes as handoff_fuzz, but
 * through a socketpair, so the completeness scan, the reassembly of reads and the fd bookkeeping
 * see them too. The first input byte picks where the first sendmsg (the one carrying the fd)
 * ends; the rest is the message. The fd sent is a pipe, so no message may be accepted, and each
 * must get as far as the fd check exactly when ho_parse accepts it.
 *
 * Built and run by tests/fuzz/run.sh (make fuzz), linked with the instrumented server library;
 * to run it longer afterwards:
 *   build/fuzz/handoff_recv_fuzz -max_total_time=600 -dict=tests/fuzz/handoff.dict NEW_CORPUS_DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handoff/xfer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "handoff_recv_fuzz: %s:%d: %s\n", __FILE__, __LINE__,      \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void send_part(int sock, const uint8_t *buf, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		ctl.h.cmsg_level = SOL_SOCKET;
		ctl.h.cmsg_type = SCM_RIGHTS;
		ctl.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&ctl.h), &fd, sizeof(int));
	}
	CHECK(sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ho_info info;
	char err[256];
	int sv[2], p[2], lfd, idx, rc, parsed, lowest;
	size_t split;

	if (size < 2 || size > HO_MAX_MESSAGE + 1)
		return 0;
	split = 1 + data[0] % (size - 1);
	data++;
	size--;
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	CHECK(!pipe2(p, O_CLOEXEC));
	send_part(sv[0], data, split, p[0]);
	if (split < size)
		send_part(sv[0], data + split, size - split, -1);
	close(sv[0]); /* EOF after the message: nothing waits for the timeout */
	close(p[0]);
	lowest = fcntl(p[1], F_DUPFD_CLOEXEC, 0);
	close(lowest); /* where the received fd lands */

	rc = ho_recv(sv[1], &lfd, &info, 5000, err, sizeof(err));
	/* an object still open at the limit is too long, whatever else is wrong with it */
	CHECK(rc == -EPROTO || (rc == -EMSGSIZE && size == HO_MAX_MESSAGE));
	CHECK(lfd == -1 && info.pid == 0);
	CHECK(err[0] != '\0');
	CHECK(fcntl(lowest, F_GETFD) == -1 && errno == EBADF);

	parsed = ho_parse((const char *)data, size, &info, &idx, NULL, 0);
	if (parsed == 0)
		CHECK(strstr(err, "not a seccomp listener") || strstr(err, "SCM_RIGHTS slot"));
	close(sv[1]);
	close(p[1]);
	return 0;
}

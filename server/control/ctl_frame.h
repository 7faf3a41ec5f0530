/* SPDX-License-Identifier: MIT */
/*
 * Frames of the control protocol (proto/semvisor.proto): a 4-byte big-endian length, then one
 * protobuf message. Splitting a byte stream into frames, unpacking and checking requests (the
 * server's side) and replies (the client's side), and packing either. No I/O and no state, so the
 * fuzzer (tests/fuzz/control_fuzz.c), the server and semvisorctl share exactly this code.
 *
 * Errors at this boundary are the protocol's Status values (SEMVISOR__STATUS__*), never errnos.
 */
#ifndef SV_CTL_FRAME_H
#define SV_CTL_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "semvisor.pb-c.h"

#define CTL_PROTO_VERSION 1 /* the version this build speaks, and the only one */
#define CTL_FRAME_HEADER  4
/* Requests are small; the server's default bound on a request frame's payload. */
#define CTL_MAX_REQUEST_DEFAULT (64 * 1024)
/* The largest reply payload a client accepts (every set of a large namespace fits). */
#define CTL_MAX_REPLY	(256u * 1024 * 1024)
#define CTL_NS_NAME_MAX 63 /* namespace names, as the supervisor keeps them */

/* Watch intervals the server accepts. */
#define CTL_WATCH_MIN_MS 100
#define CTL_WATCH_MAX_MS 3600000

/*
 * Look at the front of a byte stream. 0: not a whole frame yet. 1: a whole frame, its payload of
 * *payload_len bytes at buf + CTL_FRAME_HEADER. -1: the length prefix is over max_payload (the
 * stream cannot be resynchronised; *payload_len gets the announced length).
 */
int ctl_frame_peek(const uint8_t *buf, size_t len, size_t max_payload, size_t *payload_len);

/*
 * Unpack and check one request payload. Returns a Status: OK, or why the request is refused
 * (MALFORMED, VERSION_UNSUPPORTED, UNKNOWN_REQUEST, INVALID_ARGUMENT, LIMIT_OUT_OF_RANGE) with a
 * sentence in why. *reqp gets the unpacked request whenever it could be unpacked, refused or
 * not, so that the reply can echo its id; NULL for MALFORMED. Free it with ctl_request_free().
 */
int ctl_request_decode(const uint8_t *payload, size_t len, Semvisor__Request **reqp, char *why,
		       size_t whylen);
void ctl_request_free(Semvisor__Request *req);

/* Reset, RemoveSet, SetLimits: for uid 0 and the socket's owner only. */
bool ctl_request_privileged(const Semvisor__Request *req);
/* The short name of a request kind ("stats", "remove_set", ...; "none"). */
const char *ctl_request_name(const Semvisor__Request *req);

/* After a reply with this status the server closes the connection. */
bool ctl_status_closes(int status);
/* "permission denied", "no such set", ...: for messages. */
const char *ctl_status_text(int status);

/*
 * Unpack and check one reply payload (the client's side): 0 with *replyp set, or -1 with a
 * sentence in why (not a Reply, another version, a status or body outside the protocol).
 */
int ctl_reply_decode(const uint8_t *payload, size_t len, Semvisor__Reply **replyp, char *why,
		     size_t whylen);
void ctl_reply_free(Semvisor__Reply *reply);

/* Bytes a frame holding msg takes, header included. */
size_t ctl_frame_size(const ProtobufCMessage *msg);
/* Write that frame to out (ctl_frame_size(msg) bytes). Returns the bytes written. */
size_t ctl_frame_pack(const ProtobufCMessage *msg, uint8_t *out);

#endif

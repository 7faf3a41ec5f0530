/* SPDX-License-Identifier: MIT */
/*
 * Control protocol frames: see ctl_frame.h. Everything a peer sends passes through here before
 * anything acts on it, so every check a handler might otherwise forget (version, body present,
 * ranges, string lengths) is made once, in ctl_request_decode().
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "control/ctl_frame.h"

int ctl_frame_peek(const uint8_t *buf, size_t len, size_t max_payload, size_t *payload_len)
{
	uint32_t n;

	*payload_len = 0;
	if (len < CTL_FRAME_HEADER)
		return 0;
	n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
	*payload_len = n;
	if (n > max_payload)
		return -1;
	return len - CTL_FRAME_HEADER >= n ? 1 : 0;
}

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!why || !whylen)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

static int check_ns(const char *ns, char *why, size_t whylen)
{
	if (ns && strlen(ns) > CTL_NS_NAME_MAX) {
		say(why, whylen, "namespace name longer than %d bytes", CTL_NS_NAME_MAX);
		return SEMVISOR__STATUS__INVALID_ARGUMENT;
	}
	return SEMVISOR__STATUS__OK;
}

static int check_id(int32_t id, char *why, size_t whylen)
{
	if (id < 0) {
		say(why, whylen, "set id %d is negative", id);
		return SEMVISOR__STATUS__INVALID_ARGUMENT;
	}
	return SEMVISOR__STATUS__OK;
}

/* The ranges proto/semvisor.proto documents for each request's fields. */
static int check_body(const Semvisor__Request *req, char *why, size_t whylen)
{
	int st;

	switch (req->body_case) {
	case SEMVISOR__REQUEST__BODY_STATS:
	case SEMVISOR__REQUEST__BODY_LIST_CLIENTS:
	case SEMVISOR__REQUEST__BODY_RESET:
		return SEMVISOR__STATUS__OK;
	case SEMVISOR__REQUEST__BODY_LIST_SETS:
		return check_ns(req->list_sets->ns, why, whylen);
	case SEMVISOR__REQUEST__BODY_SHOW_SET:
		st = check_ns(req->show_set->ns, why, whylen);
		return st ? st : check_id(req->show_set->id, why, whylen);
	case SEMVISOR__REQUEST__BODY_REMOVE_SET:
		st = check_ns(req->remove_set->ns, why, whylen);
		return st ? st : check_id(req->remove_set->id, why, whylen);
	case SEMVISOR__REQUEST__BODY_SET_LIMITS: {
		const Semvisor__SetLimitsRequest *l = req->set_limits;

		st = check_ns(l->ns, why, whylen);
		if (st)
			return st;
		if (l->semmsl < 1 || l->semmns < 1 || l->semopm < 1) {
			say(why, whylen,
			    "limits must be at least 1 (semmsl %d, semmns %d, semopm %d)",
			    l->semmsl, l->semmns, l->semopm);
			return SEMVISOR__STATUS__INVALID_ARGUMENT;
		}
		/* as the kernel refuses it when /proc/sys/kernel/sem is written */
		if (l->semmni < 0 || l->semmni > 32768) {
			say(why, whylen, "semmni %d is outside 0..32768", l->semmni);
			return SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE;
		}
		return SEMVISOR__STATUS__OK;
	}
	case SEMVISOR__REQUEST__BODY_WATCH:
		if (req->watch->interval_ms < CTL_WATCH_MIN_MS ||
		    req->watch->interval_ms > CTL_WATCH_MAX_MS) {
			say(why, whylen, "watch interval %u ms is outside %d..%d ms",
			    req->watch->interval_ms, CTL_WATCH_MIN_MS, CTL_WATCH_MAX_MS);
			return SEMVISOR__STATUS__INVALID_ARGUMENT;
		}
		return SEMVISOR__STATUS__OK;
	case SEMVISOR__REQUEST__BODY__NOT_SET:
	default:
		/* a kind added after this server was built arrives as an unknown field */
		say(why, whylen, "no request this server knows (protocol version %d)",
		    CTL_PROTO_VERSION);
		return SEMVISOR__STATUS__UNKNOWN_REQUEST;
	}
}

/*
 * protobuf-c keeps, as an unknown field, a tag sent in an over-long encoding of 0 (field number
 * 0 does not exist), and would pack it back as a bare 0 that no decoder accepts. Such a message
 * is malformed wherever the field sits: look through every sub-message (for a oneof, only the
 * member that is set; the others share its memory).
 */
static bool has_field_zero(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;

	for (unsigned int i = 0; i < m->n_unknown_fields; i++)
		if (m->unknown_fields[i].tag == 0)
			return true;
	for (unsigned int i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(const void *)(base + f->quantifier_offset) != f->id)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(const void *)(base + f->quantifier_offset);
			ProtobufCMessage *const *sub =
			    *(ProtobufCMessage *const *const *)(const void *)(base + f->offset);

			for (size_t j = 0; j < n; j++)
				if (sub[j] && has_field_zero(sub[j]))
					return true;
		} else {
			const ProtobufCMessage *sub =
			    *(ProtobufCMessage *const *)(const void *)(base + f->offset);

			if (sub && has_field_zero(sub))
				return true;
		}
	}
	return false;
}

int ctl_request_decode(const uint8_t *payload, size_t len, Semvisor__Request **reqp, char *why,
		       size_t whylen)
{
	Semvisor__Request *req;

	say(why, whylen, "%s", "");
	*reqp = NULL;
	req = semvisor__request__unpack(NULL, len, payload);
	if (!req) {
		say(why, whylen, "the frame (%zu bytes) is not a request message", len);
		return SEMVISOR__STATUS__MALFORMED;
	}
	if (has_field_zero(&req->base)) {
		semvisor__request__free_unpacked(req, NULL);
		say(why, whylen, "the frame (%zu bytes) holds a field numbered 0", len);
		return SEMVISOR__STATUS__MALFORMED;
	}
	*reqp = req;
	/* The version first: a newer client's fields may mean things this server cannot know. */
	if (req->version != CTL_PROTO_VERSION) {
		if (req->version == 0)
			say(why, whylen,
			    "the request carries no protocol version: this server speaks version "
			    "%d",
			    CTL_PROTO_VERSION);
		else
			say(why, whylen,
			    "protocol version %u is not supported: this server speaks version %d",
			    req->version, CTL_PROTO_VERSION);
		return SEMVISOR__STATUS__VERSION_UNSUPPORTED;
	}
	return check_body(req, why, whylen);
}

void ctl_request_free(Semvisor__Request *req)
{
	if (req)
		semvisor__request__free_unpacked(req, NULL);
}

bool ctl_request_privileged(const Semvisor__Request *req)
{
	switch (req->body_case) {
	case SEMVISOR__REQUEST__BODY_RESET:
	case SEMVISOR__REQUEST__BODY_REMOVE_SET:
	case SEMVISOR__REQUEST__BODY_SET_LIMITS:
		return true;
	default:
		return false;
	}
}

const char *ctl_request_name(const Semvisor__Request *req)
{
	switch (req->body_case) {
	case SEMVISOR__REQUEST__BODY_STATS:
		return "stats";
	case SEMVISOR__REQUEST__BODY_LIST_SETS:
		return "list_sets";
	case SEMVISOR__REQUEST__BODY_SHOW_SET:
		return "show_set";
	case SEMVISOR__REQUEST__BODY_LIST_CLIENTS:
		return "list_clients";
	case SEMVISOR__REQUEST__BODY_RESET:
		return "reset";
	case SEMVISOR__REQUEST__BODY_REMOVE_SET:
		return "remove_set";
	case SEMVISOR__REQUEST__BODY_SET_LIMITS:
		return "set_limits";
	case SEMVISOR__REQUEST__BODY_WATCH:
		return "watch";
	default:
		return "none";
	}
}

bool ctl_status_closes(int status)
{
	/* after these the byte stream cannot be trusted, or the peer was never let in */
	return status == SEMVISOR__STATUS__MALFORMED ||
	       status == SEMVISOR__STATUS__FRAME_TOO_LARGE || status == SEMVISOR__STATUS__BUSY;
}

const char *ctl_status_text(int status)
{
	switch (status) {
	case SEMVISOR__STATUS__OK:
		return "ok";
	case SEMVISOR__STATUS__VERSION_UNSUPPORTED:
		return "protocol version not supported";
	case SEMVISOR__STATUS__MALFORMED:
		return "malformed request";
	case SEMVISOR__STATUS__FRAME_TOO_LARGE:
		return "request too large";
	case SEMVISOR__STATUS__UNKNOWN_REQUEST:
		return "unknown request";
	case SEMVISOR__STATUS__PERMISSION_DENIED:
		return "permission denied";
	case SEMVISOR__STATUS__NO_SUCH_NAMESPACE:
		return "no such namespace";
	case SEMVISOR__STATUS__NO_SUCH_SET:
		return "no such set";
	case SEMVISOR__STATUS__AMBIGUOUS:
		return "ambiguous: the set exists in several namespaces";
	case SEMVISOR__STATUS__INVALID_ARGUMENT:
		return "invalid argument";
	case SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE:
		return "limit out of range";
	case SEMVISOR__STATUS__BUSY:
		return "server busy: too many connections";
	case SEMVISOR__STATUS__REPLY_TOO_LARGE:
		return "reply too large";
	case SEMVISOR__STATUS__INTERNAL:
		return "internal server error";
	default:
		return "unknown error";
	}
}

int ctl_reply_decode(const uint8_t *payload, size_t len, Semvisor__Reply **replyp, char *why,
		     size_t whylen)
{
	Semvisor__Reply *r;

	say(why, whylen, "%s", "");
	*replyp = NULL;
	r = semvisor__reply__unpack(NULL, len, payload);
	if (!r) {
		say(why, whylen, "the server's frame (%zu bytes) is not a reply message", len);
		return -1;
	}
	if (r->version != CTL_PROTO_VERSION) {
		say(why, whylen, "the server speaks protocol version %u, this client version %d",
		    r->version, CTL_PROTO_VERSION);
		semvisor__reply__free_unpacked(r, NULL);
		return -1;
	}
	*replyp = r;
	return 0;
}

void ctl_reply_free(Semvisor__Reply *reply)
{
	if (reply)
		semvisor__reply__free_unpacked(reply, NULL);
}

size_t ctl_frame_size(const ProtobufCMessage *msg)
{
	return CTL_FRAME_HEADER + protobuf_c_message_get_packed_size(msg);
}

size_t ctl_frame_pack(const ProtobufCMessage *msg, uint8_t *out)
{
	size_t n = protobuf_c_message_pack(msg, out + CTL_FRAME_HEADER);

	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	return CTL_FRAME_HEADER + n;
}

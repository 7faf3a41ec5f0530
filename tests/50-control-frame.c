/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's frame and request decoder (server/control/ctl_frame.c) on its own: what
 * every byte a peer sends goes through before the server acts on it. Short, oversized, garbage
 * and out-of-range input must each get its documented Status, never a crash; valid requests of
 * every kind must survive a pack/peek/decode round trip unchanged.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_frame.h"

TestSuite(frame, .timeout = 60);

/* ---- helpers ---- */

static size_t pack(const ProtobufCMessage *m, uint8_t *buf, size_t cap)
{
	size_t n = ctl_frame_size(m);

	cr_assert_leq(n, cap);
	cr_assert_eq(ctl_frame_pack(m, buf), n);
	return n;
}

static void put_len(uint8_t *b, uint32_t n)
{
	b[0] = (uint8_t)(n >> 24);
	b[1] = (uint8_t)(n >> 16);
	b[2] = (uint8_t)(n >> 8);
	b[3] = (uint8_t)n;
}

/* Decode a payload; the request (if any) is freed, the status and sentence returned. */
static int decode(const uint8_t *p, size_t len, char *why, size_t whylen, uint64_t *id)
{
	Semvisor__Request *req = (Semvisor__Request *)0x1;
	int st = ctl_request_decode(p, len, &req, why, whylen);

	if (st == SEMVISOR__STATUS__MALFORMED)
		cr_assert_null(req, "MALFORMED must not hand back a request");
	else
		cr_assert_not_null(req, "status %d without the request", st);
	if (id)
		*id = req ? req->id : 0;
	ctl_request_free(req);
	return st;
}

/* A request frame's payload for req; returns its length. */
static size_t payload(Semvisor__Request *req, uint8_t *buf, size_t cap)
{
	size_t n = protobuf_c_message_get_packed_size(&req->base);

	cr_assert_leq(n, cap);
	return protobuf_c_message_pack(&req->base, buf);
}

/* ---- framing ---- */

Test(frame, peek_needs_a_whole_header_and_payload)
{
	uint8_t b[16] = { 0 };
	size_t plen = 99;

	for (size_t len = 0; len < CTL_FRAME_HEADER; len++) {
		cr_expect_eq(ctl_frame_peek(b, len, 1024, &plen), 0, "len %zu", len);
		cr_expect_eq(plen, 0);
	}
	put_len(b, 5);
	for (size_t len = 4; len < 9; len++)
		cr_expect_eq(ctl_frame_peek(b, len, 1024, &plen), 0, "len %zu", len);
	cr_expect_eq(plen, 5);
	cr_expect_eq(ctl_frame_peek(b, 9, 1024, &plen), 1);
	cr_expect_eq(ctl_frame_peek(b, 16, 1024, &plen), 1,
		     "bytes after a frame belong to the next");
	cr_expect_eq(plen, 5);

	/* an empty frame is a frame (an empty message: no version) */
	put_len(b, 0);
	cr_expect_eq(ctl_frame_peek(b, 4, 1024, &plen), 1);
	cr_expect_eq(plen, 0);
}

Test(frame, oversized_length_is_refused_from_the_header_alone)
{
	uint8_t b[4];
	size_t plen;

	put_len(b, 1025);
	cr_expect_eq(ctl_frame_peek(b, 4, 1024, &plen), -1);
	cr_expect_eq(plen, 1025, "the announced length is reported");
	put_len(b, 1024);
	cr_expect_eq(ctl_frame_peek(b, 4, 1024, &plen), 0, "exactly the limit is allowed");
	put_len(b, 0xffffffffu);
	cr_expect_eq(ctl_frame_peek(b, 4, CTL_MAX_REQUEST_DEFAULT, &plen), -1);
	cr_expect_eq(plen, 0xffffffffu);
}

/* ---- requests ---- */

Test(frame, garbage_is_malformed)
{
	static const struct {
		const char *what;
		const uint8_t bytes[8];
		size_t len;
	} cases[] = {
		{ "truncated varint", { 0x08 }, 1 },
		{ "varint never ending", { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, 8 },
		{ "field 1 as bytes", { 0x0a, 0x01, 0x00 }, 3 },
		{ "length past the end", { 0x52, 0x7f, 0x00 }, 3 },
		{ "body with a wrong wire type", { 0x08, 0x01, 0x50, 0x01 }, 4 },
		{ "field number 0", { 0x00, 0x01 }, 2 },
		{ "end group without start", { 0x0c }, 1 },
		{ "wire type 7", { 0x0f, 0x00 }, 2 },
	};
	char why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = decode(cases[i].bytes, cases[i].len, why, sizeof(why), NULL);

		cr_expect_eq(st, SEMVISOR__STATUS__MALFORMED, "%s: status %d", cases[i].what, st);
		cr_expect(why[0], "%s: a sentence", cases[i].what);
	}
	cr_expect(ctl_status_closes(SEMVISOR__STATUS__MALFORMED));
	cr_expect(ctl_status_closes(SEMVISOR__STATUS__FRAME_TOO_LARGE));
}

Test(frame, version_is_checked_first)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	uint8_t buf[256] = { 0 };
	char why[256];
	uint64_t id;
	size_t n;

	/* no version at all: an empty message */
	cr_expect_eq(decode(buf, 0, why, sizeof(why), NULL), SEMVISOR__STATUS__VERSION_UNSUPPORTED);
	cr_expect(strstr(why, "no protocol version"), "%s", why);

	/* a future version, even with a body this server knows (its meaning may have changed) */
	req.version = 2;
	req.id = 77;
	req.body_case = SEMVISOR__REQUEST__BODY_REMOVE_SET;
	req.remove_set = &rm;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), &id), SEMVISOR__STATUS__VERSION_UNSUPPORTED);
	cr_expect_eq(id, 77, "the id is kept for the reply");
	cr_expect(strstr(why, "version 2") && strstr(why, "version 1"), "%s", why);
	cr_expect_not(ctl_status_closes(SEMVISOR__STATUS__VERSION_UNSUPPORTED),
		      "a well-formed frame of another version keeps the connection");

	req.version = 0xffffffffu;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__VERSION_UNSUPPORTED);
}

Test(frame, missing_or_unknown_body)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	uint8_t buf[64];
	char why[256];
	size_t n;

	req.version = CTL_PROTO_VERSION;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__UNKNOWN_REQUEST);

	/* a request kind from a newer client: field 99, an empty message */
	buf[n++] = ((99 << 3 | 2) & 0x7f) | 0x80;
	buf[n++] = (99 << 3 | 2) >> 7;
	buf[n++] = 0;
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__UNKNOWN_REQUEST);
	cr_expect(why[0]);
}

Test(frame, field_ranges)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	char longname[CTL_NS_NAME_MAX + 2];
	uint8_t buf[512];
	char why[256];
	size_t n;

	req.version = CTL_PROTO_VERSION;
	req.body_case = SEMVISOR__REQUEST__BODY_SHOW_SET;
	req.show_set = &sh;
	sh.id = -1;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__INVALID_ARGUMENT);
	sh.id = 0;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__OK);

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	req.body_case = SEMVISOR__REQUEST__BODY_LIST_SETS;
	req.list_sets = &ls;
	ls.ns = longname;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__INVALID_ARGUMENT);
	longname[CTL_NS_NAME_MAX] = '\0';
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__OK);

	req.body_case = SEMVISOR__REQUEST__BODY_SET_LIMITS;
	req.set_limits = &sl;
	sl = (Semvisor__SetLimitsRequest)SEMVISOR__SET_LIMITS_REQUEST__INIT;
	sl.semmsl = 250, sl.semmns = 32000, sl.semopm = 32, sl.semmni = 32768;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__OK);
	sl.semmni = 32769;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE);
	sl.semmni = -1;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE);
	sl.semmni = 0;
	sl.semopm = 0;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__INVALID_ARGUMENT);

	req.body_case = SEMVISOR__REQUEST__BODY_WATCH;
	req.watch = &w;
	w.interval_ms = CTL_WATCH_MIN_MS - 1;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__INVALID_ARGUMENT);
	w.interval_ms = CTL_WATCH_MAX_MS + 1;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__INVALID_ARGUMENT);
	w.interval_ms = CTL_WATCH_MIN_MS;
	n = payload(&req, buf, sizeof(buf));
	cr_expect_eq(decode(buf, n, why, sizeof(why), NULL), SEMVISOR__STATUS__OK);
}

Test(frame, every_kind_round_trips)
{
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__ListClientsRequest lc = SEMVISOR__LIST_CLIENTS_REQUEST__INIT;
	Semvisor__ResetRequest rs = SEMVISOR__RESET_REQUEST__INIT;
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	struct {
		Semvisor__Request__BodyCase kind;
		void *body;
		bool privileged;
		const char *name;
	} k[] = {
		{ SEMVISOR__REQUEST__BODY_STATS, &st, false, "stats" },
		{ SEMVISOR__REQUEST__BODY_LIST_SETS, &ls, false, "list_sets" },
		{ SEMVISOR__REQUEST__BODY_SHOW_SET, &sh, false, "show_set" },
		{ SEMVISOR__REQUEST__BODY_LIST_CLIENTS, &lc, false, "list_clients" },
		{ SEMVISOR__REQUEST__BODY_RESET, &rs, true, "reset" },
		{ SEMVISOR__REQUEST__BODY_REMOVE_SET, &rm, true, "remove_set" },
		{ SEMVISOR__REQUEST__BODY_SET_LIMITS, &sl, true, "set_limits" },
		{ SEMVISOR__REQUEST__BODY_WATCH, &w, false, "watch" },
	};
	uint8_t buf[512];

	st.with_clients = true;
	ls.ns = (char *)"ipc:[4026531839]";
	sh.ns = (char *)"a";
	sh.id = 32768 * 3 + 7;
	rm.id = 5;
	sl.semmsl = 1, sl.semmns = 2, sl.semopm = 3, sl.semmni = 4;
	w.interval_ms = 250;
	w.count = 3;
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		Semvisor__Request req = SEMVISOR__REQUEST__INIT, *out;
		char why[256];
		size_t n, plen;
		int st2;

		req.version = CTL_PROTO_VERSION;
		req.id = 1000 + i;
		req.body_case = k[i].kind;
		req.stats = k[i].body; /* a union: every member is a pointer */
		n = pack(&req.base, buf, sizeof(buf));
		cr_assert_eq(ctl_frame_peek(buf, n, CTL_MAX_REQUEST_DEFAULT, &plen), 1);
		cr_assert_eq(plen + CTL_FRAME_HEADER, n);
		st2 = ctl_request_decode(buf + CTL_FRAME_HEADER, plen, &out, why, sizeof(why));
		cr_assert_eq(st2, SEMVISOR__STATUS__OK, "%s: %s", k[i].name, why);
		cr_expect_eq(out->id, 1000 + i);
		cr_expect_eq(out->body_case, k[i].kind);
		cr_expect_eq(ctl_request_privileged(out), k[i].privileged, "%s", k[i].name);
		cr_expect_str_eq(ctl_request_name(out), k[i].name);
		switch (k[i].kind) {
		case SEMVISOR__REQUEST__BODY_SHOW_SET:
			cr_expect_str_eq(out->show_set->ns, "a");
			cr_expect_eq(out->show_set->id, sh.id);
			break;
		case SEMVISOR__REQUEST__BODY_SET_LIMITS:
			cr_expect(out->set_limits->semmsl == 1 && out->set_limits->semmns == 2 &&
				  out->set_limits->semopm == 3 && out->set_limits->semmni == 4);
			break;
		case SEMVISOR__REQUEST__BODY_WATCH:
			cr_expect(out->watch->interval_ms == 250 && out->watch->count == 3);
			break;
		default:
			break;
		}
		ctl_request_free(out);
	}
}

Test(frame, replies_are_checked_by_the_client)
{
	Semvisor__Reply r = SEMVISOR__REPLY__INIT, *out;
	uint8_t buf[256];
	char why[256];
	size_t n;

	r.version = CTL_PROTO_VERSION;
	r.id = 9;
	r.status = SEMVISOR__STATUS__NO_SUCH_SET;
	r.message = (char *)"no set with id 9";
	n = protobuf_c_message_pack(&r.base, buf);
	cr_assert_eq(ctl_reply_decode(buf, n, &out, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(out->status, SEMVISOR__STATUS__NO_SUCH_SET);
	cr_expect_str_eq(out->message, "no set with id 9");
	ctl_reply_free(out);

	r.version = 3;
	n = protobuf_c_message_pack(&r.base, buf);
	cr_expect_eq(ctl_reply_decode(buf, n, &out, why, sizeof(why)), -1);
	cr_expect_null(out);
	cr_expect(strstr(why, "version 3"), "%s", why);

	buf[0] = 0x0f;
	cr_expect_eq(ctl_reply_decode(buf, 1, &out, why, sizeof(why)), -1);
	cr_expect_null(out);
}

Test(frame, every_status_has_a_text)
{
	for (int st = SEMVISOR__STATUS__OK; st <= SEMVISOR__STATUS__INTERNAL; st++) {
		cr_expect_str_neq(ctl_status_text(st), "unknown error", "status %d", st);
		cr_expect(protobuf_c_enum_descriptor_get_value(&semvisor__status__descriptor, st),
			  "status %d is in the .proto", st);
	}
	cr_expect_str_eq(ctl_status_text(1000), "unknown error");
}

/*
 * Random bytes, and random mutations of valid frames, through the same path the server uses:
 * peek, then decode whatever a whole frame holds. The decoder must always give one of the
 * documented statuses and a terminated sentence. (tests/fuzz/control_fuzz.c does this with
 * coverage guidance; this keeps a cheap version in every test run.)
 */
Test(frame, random_input_never_crashes)
{
	static const int allowed[] = {
		SEMVISOR__STATUS__OK,
		SEMVISOR__STATUS__VERSION_UNSUPPORTED,
		SEMVISOR__STATUS__MALFORMED,
		SEMVISOR__STATUS__UNKNOWN_REQUEST,
		SEMVISOR__STATUS__INVALID_ARGUMENT,
		SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE,
	};
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	uint8_t seed[64], buf[300];
	size_t seedlen;
	unsigned int r = 12345;

	req.version = CTL_PROTO_VERSION;
	req.body_case = SEMVISOR__REQUEST__BODY_SET_LIMITS;
	req.set_limits = &sl;
	sl.ns = (char *)"ns";
	sl.semmsl = sl.semmns = sl.semopm = sl.semmni = 5;
	seedlen = payload(&req, seed, sizeof(seed));

	for (int iter = 0; iter < 200000; iter++) {
		size_t len, plen;
		char why[64];
		int st, pk;
		bool ok = false;

		r = r * 1103515245 + 12345;
		if (iter & 1) {
			len = (r >> 8) % sizeof(buf);
			for (size_t i = 0; i < len; i++) {
				r = r * 1103515245 + 12345;
				buf[i] = (uint8_t)(r >> 16);
			}
		} else {
			/* a valid frame with a few bytes changed, cut short or grown */
			len = seedlen;
			memcpy(buf + 4, seed, seedlen);
			put_len(buf, (uint32_t)seedlen);
			len += 4;
			for (int k = 0; k < 3; k++) {
				r = r * 1103515245 + 12345;
				buf[4 + (r >> 8) % seedlen] = (uint8_t)(r >> 20);
			}
			r = r * 1103515245 + 12345;
			if ((r >> 10) % 4 == 0)
				len = (r >> 12) % len;
		}
		pk = ctl_frame_peek(buf, len, 256, &plen);
		cr_assert(pk >= -1 && pk <= 1);
		if (pk != 1)
			continue;
		cr_assert_leq(plen + 4, len);
		st = decode(buf + 4, plen, why, sizeof(why), NULL);
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			ok |= st == allowed[i];
		cr_assert(ok, "status %d", st);
		cr_assert(memchr(why, '\0', sizeof(why)));
	}
}

/*
 * A tag sent as an over-long encoding of 0 names field number 0, which does not exist.
 * protobuf-c would keep it as an unknown field and pack it back as a bare 0 it cannot read
 * again (found by tests/fuzz/control_fuzz.c): the decoder must refuse it as malformed.
 */
Test(frame, field_number_zero_is_malformed)
{
	/* version 1, id 0, then tag 0x80 0x00 (field 0, varint) = 0x0400, then watch {} */
	static const uint8_t payload[] = { 0x08, 0x01, 0x10, 0x00, 0x80,
					   0x00, 0x80, 0x08, 0x62, 0x00 };
	Semvisor__Request *req = (Semvisor__Request *)1;
	char why[128] = "";

	cr_assert_eq(ctl_request_decode(payload, sizeof(payload), &req, why, sizeof(why)),
		     SEMVISOR__STATUS__MALFORMED);
	cr_assert_null(req);
	cr_assert(strstr(why, "numbered 0"), "%s", why);
}

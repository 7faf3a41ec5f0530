/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control protocol's decoder (server/control/ctl_frame.c): the bytes any
 * process that can connect to the control socket sends, and (for semvisorctl) the bytes a server
 * sends back.
 *
 * Built and run by tests/fuzz/run.sh (make fuzz), linked with the instrumented server library;
 * to run it longer afterwards:
 *   build/fuzz/control_fuzz -max_total_time=600 NEW_CORPUS_DIR
 *
 * The first input byte picks what the rest is:
 *   even: a byte stream as a connection delivers it, cut into reads at points the input
 *         chooses, split into frames and decoded the way the server does;
 *   odd:  the recipe of a valid request (kind and field values), packed, then damaged at
 *         places the input chooses: this reaches the checks behind a successful unpack
 *         without a seed corpus.
 * Every payload is also decoded as a reply, as semvisorctl would.
 *
 * Beyond "no crash, no sanitizer report", it checks what ctl_frame.h promises: a status from the
 * documented list; MALFORMED exactly when there is no request; a terminated sentence, non-empty
 * on refusal; requests that pass meet every range the .proto documents; the same answer every
 * time and whatever the read sizes; a request that passes packs and decodes back to the same
 * bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FRAME 4096 /* small, so oversized frames are easy to reach */

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "control_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static bool ns_ok(const char *ns)
{
	return ns && strlen(ns) <= CTL_NS_NAME_MAX;
}

/* What a request that passed must satisfy (the .proto's documented ranges). */
static void check_accepted(const Semvisor__Request *req)
{
	CHECK(req->version == CTL_PROTO_VERSION);
	switch (req->body_case) {
	case SEMVISOR__REQUEST__BODY_STATS:
		CHECK(req->stats);
		break;
	case SEMVISOR__REQUEST__BODY_LIST_CLIENTS:
		CHECK(req->list_clients);
		break;
	case SEMVISOR__REQUEST__BODY_RESET:
		CHECK(req->reset && ctl_request_privileged(req));
		break;
	case SEMVISOR__REQUEST__BODY_LIST_SETS:
		CHECK(req->list_sets && ns_ok(req->list_sets->ns));
		break;
	case SEMVISOR__REQUEST__BODY_SHOW_SET:
		CHECK(req->show_set && ns_ok(req->show_set->ns) && req->show_set->id >= 0);
		break;
	case SEMVISOR__REQUEST__BODY_REMOVE_SET:
		CHECK(req->remove_set && ns_ok(req->remove_set->ns) && req->remove_set->id >= 0);
		CHECK(ctl_request_privileged(req));
		break;
	case SEMVISOR__REQUEST__BODY_SET_LIMITS: {
		const Semvisor__SetLimitsRequest *l = req->set_limits;

		CHECK(l && ns_ok(l->ns));
		CHECK(l->semmsl >= 1 && l->semmns >= 1 && l->semopm >= 1);
		CHECK(l->semmni >= 0 && l->semmni <= 32768);
		CHECK(ctl_request_privileged(req));
		break;
	}
	case SEMVISOR__REQUEST__BODY_WATCH:
		CHECK(req->watch && req->watch->interval_ms >= CTL_WATCH_MIN_MS &&
		      req->watch->interval_ms <= CTL_WATCH_MAX_MS);
		break;
	default:
		CHECK(!"an accepted request of no known kind");
	}
	if (req->body_case != SEMVISOR__REQUEST__BODY_RESET &&
	    req->body_case != SEMVISOR__REQUEST__BODY_REMOVE_SET &&
	    req->body_case != SEMVISOR__REQUEST__BODY_SET_LIMITS)
		CHECK(!ctl_request_privileged(req));
	CHECK(strcmp(ctl_request_name(req), "none"));
}

/* Decode one payload as the server does; returns the status. */
static int decode_request(const uint8_t *p, size_t len)
{
	Semvisor__Request *req, *again;
	char why[256], why2[256], tiny[2];
	int st, st2;

	memset(why, 0xa5, sizeof(why));
	st = ctl_request_decode(p, len, &req, why, sizeof(why));
	CHECK(terminated(why, sizeof(why)));
	switch (st) {
	case SEMVISOR__STATUS__OK:
		CHECK(req);
		CHECK(why[0] == '\0');
		check_accepted(req);
		break;
	case SEMVISOR__STATUS__MALFORMED:
		CHECK(!req);
		CHECK(why[0]);
		break;
	case SEMVISOR__STATUS__VERSION_UNSUPPORTED:
		CHECK(req && req->version != CTL_PROTO_VERSION);
		CHECK(why[0]);
		break;
	case SEMVISOR__STATUS__UNKNOWN_REQUEST:
	case SEMVISOR__STATUS__INVALID_ARGUMENT:
	case SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE:
		CHECK(req && req->version == CTL_PROTO_VERSION);
		CHECK(why[0]);
		break;
	default:
		CHECK(!"a status the decoder never gives");
	}
	CHECK(!ctl_status_closes(st) || st == SEMVISOR__STATUS__MALFORMED);

	/* the same answer again, and with error buffers too small or absent */
	st2 = ctl_request_decode(p, len, &again, why2, sizeof(why2));
	CHECK(st2 == st && !strcmp(why, why2) && !again == !req);
	ctl_request_free(again);
	CHECK(ctl_request_decode(p, len, &again, tiny, sizeof(tiny)) == st);
	CHECK(terminated(tiny, sizeof(tiny)));
	ctl_request_free(again);
	CHECK(ctl_request_decode(p, len, &again, NULL, 0) == st);
	ctl_request_free(again);

	/* an accepted request packs to bytes that decode to the same request and bytes */
	if (st == SEMVISOR__STATUS__OK) {
		size_t n = ctl_frame_size(&req->base), plen;
		uint8_t *f = malloc(n), *g;

		CHECK(f);
		CHECK(ctl_frame_pack(&req->base, f) == n);
		CHECK(ctl_frame_peek(f, n, n, &plen) == 1 && plen + CTL_FRAME_HEADER == n);
		CHECK(ctl_request_decode(f + CTL_FRAME_HEADER, plen, &again, NULL, 0) ==
		      SEMVISOR__STATUS__OK);
		CHECK(ctl_frame_size(&again->base) == n);
		g = malloc(n);
		CHECK(g);
		ctl_frame_pack(&again->base, g);
		CHECK(!memcmp(f, g, n));
		free(f);
		free(g);
		ctl_request_free(again);
	}
	ctl_request_free(req);
	return st;
}

/* Decode a payload as semvisorctl does with a reply. */
static void decode_reply(const uint8_t *p, size_t len)
{
	Semvisor__Reply *r;
	char why[128];
	int rc;

	memset(why, 0xa5, sizeof(why));
	rc = ctl_reply_decode(p, len, &r, why, sizeof(why));
	CHECK(rc == 0 || rc == -1);
	CHECK(terminated(why, sizeof(why)));
	if (rc) {
		CHECK(!r && why[0]);
		return;
	}
	CHECK(r && r->version == CTL_PROTO_VERSION);
	CHECK(ctl_status_text(r->status) != NULL);
	ctl_reply_free(r);
}

/*
 * A connection's bytes, arriving in reads of the sizes in cuts[] (cycled), through a buffer the
 * way control.c handles it. Returns the statuses seen, in order, in st[] (at most cap).
 */
static int stream(const uint8_t *data, size_t size, const uint8_t *cuts, size_t ncuts, int *st,
		  int cap)
{
	uint8_t *buf = malloc(size ? size : 1);
	size_t have = 0, fed = 0, k = 0;
	int n = 0;

	CHECK(buf);
	while (fed < size || have) {
		size_t step = ncuts ? (size_t)cuts[k++ % ncuts] + 1 : size - fed, plen;
		int pk;

		if (step > size - fed)
			step = size - fed;
		memcpy(buf + have, data + fed, step);
		have += step;
		fed += step;
		for (;;) {
			pk = ctl_frame_peek(buf, have, MAX_FRAME, &plen);
			CHECK(pk >= -1 && pk <= 1);
			if (pk < 0) {
				CHECK(plen > MAX_FRAME);
				if (n < cap)
					st[n++] = SEMVISOR__STATUS__FRAME_TOO_LARGE;
				free(buf);
				return n; /* the server hangs up here */
			}
			if (pk == 0) {
				CHECK(have < CTL_FRAME_HEADER || have < CTL_FRAME_HEADER + plen);
				break;
			}
			CHECK(plen <= MAX_FRAME && CTL_FRAME_HEADER + plen <= have);
			if (n < cap)
				st[n++] = decode_request(buf + CTL_FRAME_HEADER, plen);
			decode_reply(buf + CTL_FRAME_HEADER, plen);
			memmove(buf, buf + CTL_FRAME_HEADER + plen, have - CTL_FRAME_HEADER - plen);
			have -= CTL_FRAME_HEADER + plen;
			if (n && st[n - 1] == SEMVISOR__STATUS__MALFORMED) {
				free(buf);
				return n;
			}
		}
		if (fed == size)
			break; /* a partial frame left: the peer went away mid-frame */
	}
	free(buf);
	return n;
}

static uint32_t take(const uint8_t **p, size_t *left, int bytes)
{
	uint32_t v = 0;

	for (int i = 0; i < bytes; i++) {
		v = v << 8 | (*left ? **p : 0);
		if (*left) {
			(*p)++;
			(*left)--;
		}
	}
	return v;
}

/* Build a request from a recipe, pack it as a frame, damage it, and stream it. */
static void from_recipe(const uint8_t *p, size_t left)
{
	Semvisor__Request req = SEMVISOR__REQUEST__INIT;
	Semvisor__StatsRequest st = SEMVISOR__STATS_REQUEST__INIT;
	Semvisor__ListSetsRequest ls = SEMVISOR__LIST_SETS_REQUEST__INIT;
	Semvisor__ShowSetRequest sh = SEMVISOR__SHOW_SET_REQUEST__INIT;
	Semvisor__ListClientsRequest lc = SEMVISOR__LIST_CLIENTS_REQUEST__INIT;
	Semvisor__ResetRequest rs = SEMVISOR__RESET_REQUEST__INIT;
	Semvisor__RemoveSetRequest rm = SEMVISOR__REMOVE_SET_REQUEST__INIT;
	Semvisor__SetLimitsRequest sl = SEMVISOR__SET_LIMITS_REQUEST__INIT;
	Semvisor__WatchRequest w = SEMVISOR__WATCH_REQUEST__INIT;
	char ns[80];
	uint8_t *f;
	size_t n, nslen;
	int sts[8];
	uint32_t kind = take(&p, &left, 1) % 9;

	req.version = take(&p, &left, 1) % 4; /* 0, 1 (ours), 2, 3 */
	req.id = take(&p, &left, 4);
	nslen = take(&p, &left, 1) % sizeof(ns);
	for (size_t i = 0; i < nslen; i++)
		ns[i] = (char)('a' + take(&p, &left, 1) % 26);
	ns[nslen] = '\0';
	switch (kind) {
	case 0:
		st.with_clients = take(&p, &left, 1) & 1;
		req.body_case = SEMVISOR__REQUEST__BODY_STATS;
		req.stats = &st;
		break;
	case 1:
		ls.ns = ns;
		req.body_case = SEMVISOR__REQUEST__BODY_LIST_SETS;
		req.list_sets = &ls;
		break;
	case 2:
		sh.ns = ns;
		sh.id = (int32_t)take(&p, &left, 4);
		req.body_case = SEMVISOR__REQUEST__BODY_SHOW_SET;
		req.show_set = &sh;
		break;
	case 3:
		req.body_case = SEMVISOR__REQUEST__BODY_LIST_CLIENTS;
		req.list_clients = &lc;
		break;
	case 4:
		req.body_case = SEMVISOR__REQUEST__BODY_RESET;
		req.reset = &rs;
		break;
	case 5:
		rm.ns = ns;
		rm.id = (int32_t)take(&p, &left, 4);
		req.body_case = SEMVISOR__REQUEST__BODY_REMOVE_SET;
		req.remove_set = &rm;
		break;
	case 6:
		sl.ns = ns;
		sl.semmsl = (int32_t)take(&p, &left, 4);
		sl.semmns = (int32_t)take(&p, &left, 4);
		sl.semopm = (int32_t)take(&p, &left, 4);
		sl.semmni = (int32_t)take(&p, &left, 4);
		req.body_case = SEMVISOR__REQUEST__BODY_SET_LIMITS;
		req.set_limits = &sl;
		break;
	case 7:
		w.interval_ms = take(&p, &left, 4);
		w.count = take(&p, &left, 2);
		w.with_clients = take(&p, &left, 1) & 1;
		req.body_case = SEMVISOR__REQUEST__BODY_WATCH;
		req.watch = &w;
		break;
	default:
		break; /* no body */
	}
	n = ctl_frame_size(&req.base);
	f = malloc(n);
	CHECK(f);
	ctl_frame_pack(&req.base, f);
	/* an undamaged frame of our version with in-range fields must pass */
	if (!left && req.version == CTL_PROTO_VERSION) {
		int s = decode_request(f + CTL_FRAME_HEADER, n - CTL_FRAME_HEADER);

		if (kind == 8)
			CHECK(s == SEMVISOR__STATUS__UNKNOWN_REQUEST);
		else if (kind == 2 || kind == 5)
			CHECK((s == SEMVISOR__STATUS__OK) ==
			      ((kind == 2 ? sh.id : rm.id) >= 0 && nslen <= CTL_NS_NAME_MAX));
	}
	/* the rest of the input: (offset, xor) pairs */
	while (left >= 2) {
		uint32_t off = take(&p, &left, 1) % n;

		f[off] ^= (uint8_t)take(&p, &left, 1);
	}
	stream(f, n, NULL, 0, sts, 8);
	free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int a[64], b[64], na, nb;
	uint8_t cuts[4];

	if (!size)
		return 0;
	if (data[0] & 1) {
		from_recipe(data + 1, size - 1);
		return 0;
	}
	data++;
	size--;
	/* read sizes from the input itself: one pass in reads of 1..256 bytes, one all at once */
	for (int i = 0; i < 4; i++)
		cuts[i] = size > (size_t)i ? data[size - 1 - (size_t)i] : (uint8_t)(i * 37);
	na = stream(data, size, cuts, 4, a, 64);
	nb = stream(data, size, NULL, 0, b, 64);
	CHECK(na == nb && !memcmp(a, b, (size_t)na * sizeof(a[0])));
	/* and the whole input as a single payload */
	if (size <= MAX_FRAME) {
		decode_request(data, size);
		decode_reply(data, size);
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ho_parse, the reader of agent messages (server/handoff/msg.c): the
 * bytes any process that can connect to the agent socket controls.
 *
 * Built and run by tests/fuzz/run.sh (make fuzz), linked with the instrumented server library;
 * to run it longer afterwards:
 *   build/fuzz/handoff_fuzz -max_total_time=600 -dict=tests/fuzz/handoff.dict \
 *         NEW_CORPUS_DIR tests/fuzz/corpus/handoff
 *
 * jansson, which does the decoding, is the system's library and not instrumented: coverage
 * guides the fuzzer through our checks of the decoded tree, jansson's grammar is exercised by
 * the dictionary and the seeds.
 *
 * Beyond "no crash, no sanitizer report", it checks what the header promises: 0 or -EPROTO (never
 * -ENOMEM: ASan stops the run before an allocation fails); on
 * success a pid in range, a slot index, NUL-terminated strings; on failure a zeroed result and a
 * sentence; the same answer every time; and that the verdict depends on the object alone
 * (trailing whitespace changes nothing, any other trailing byte is refused).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff/meta.h"
#include "handoff/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "handoff_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* A name part of ho_info: "" or graphic ASCII without '/', '"' or '\\', terminated. */
static bool name_or_empty(const char *s, size_t cap)
{
	if (!terminated(s, cap))
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '/' || *s == '"' || *s == '\\')
			return false;
	return true;
}

static int parse(const uint8_t *data, size_t size, struct ho_info *info, int *idx, char *err,
		 size_t errlen)
{
	return ho_parse((const char *)data, size, info, idx, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ho_info zero;
	struct ho_info info, again;
	char err[256], err2[256], tiny[3];
	int idx, idx2, rc, rc2;
	uint8_t *more;

	memset(&info, 0xa5, sizeof(info));
	memset(err, 0xa5, sizeof(err));
	rc = parse(data, size, &info, &idx, err, sizeof(err));
	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(terminated(err, sizeof(err)));
	if (rc == 0) {
		CHECK(err[0] == '\0');
		CHECK(info.pid > 0);
		CHECK(idx >= 0 && idx < 16);
		CHECK(terminated(info.id, sizeof(info.id)));
		CHECK(terminated(info.metadata, sizeof(info.metadata)));
		CHECK(terminated(info.bundle, sizeof(info.bundle)));
		CHECK(terminated(info.name_note, sizeof(info.name_note)));
		/* what may name a client: a name, or nothing (msg.c) */
		CHECK(name_or_empty(info.pod_ns, sizeof(info.pod_ns)));
		CHECK(name_or_empty(info.pod, sizeof(info.pod)));
		CHECK(name_or_empty(info.container, sizeof(info.container)));
		{
			char name[HO_CLIENT_NAME_MAX];
			struct ho_meta m;

			ho_client_name(&info, name, sizeof(name));
			CHECK(terminated(name, sizeof(name)));
			ho_meta_parse(info.metadata, &m);
			CHECK(terminated(m.note, sizeof(m.note)) && terminated(m.ns, sizeof(m.ns)));
			for (const char *p = m.note; *p; p++)
				CHECK(*p >= 0x20 && *p < 0x7f);
			CHECK(!m.ns_bad || !m.ns[0]);
		}
	} else {
		CHECK(err[0] != '\0');
		CHECK(idx == -1);
		CHECK(!memcmp(&info, &zero, sizeof(info)));
	}

	/* deterministic, and the error buffer's size changes only the sentence's length */
	rc2 = parse(data, size, &again, &idx2, err2, sizeof(err2));
	CHECK(rc2 == rc && idx2 == idx && !memcmp(&again, &info, sizeof(info)));
	CHECK(!strcmp(err, err2));
	memset(tiny, 0xa5, sizeof(tiny));
	CHECK(parse(data, size, &again, &idx2, tiny, sizeof(tiny)) == rc);
	CHECK(terminated(tiny, sizeof(tiny)));
	CHECK(parse(data, size, &again, &idx2, NULL, 0) == rc);

	/* one byte more: whitespace keeps the verdict, anything else after an object is refused */
	if (size < HO_MAX_MESSAGE) {
		more = malloc(size + 1);
		CHECK(more);
		if (size)
			memcpy(more, data, size);
		more[size] = '\n';
		CHECK(parse(more, size + 1, &again, &idx2, NULL, 0) == rc);
		more[size] = 'x';
		if (rc == 0)
			CHECK(parse(more, size + 1, &again, &idx2, NULL, 0) == -EPROTO);
		free(more);
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The agent message (SPEC B7): a listener fd and the JSON "container process state" that names
 * it, in one connection; this file reads and writes the JSON, xfer.c moves it and the fds.
 * Whoever connects to the agent socket is outside our trust: the reader below is strict and
 * bounded so that a hostile or broken sender costs one refused connection and never an fd, a
 * crash or unbounded work.
 *
 * The JSON reader
 *   jansson decodes the message, then we take what we need from its tree. jansson holds it to
 *   RFC 8259 with no extensions: one value at the top, then only whitespace. Strings must be
 *   valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF) and contain no raw
 *   control characters; escapes are the eight single-letter ones and \uXXXX, where a surrogate
 *   must come as a high-low pair. Numbers follow the JSON grammar (no leading zeros, no "+", no
 *   ".5", no hex). Before it decodes we check what it would not: the message is at most
 *   HO_MAX_MESSAGE bytes, its top is an object, and containers nest at most HO_MAX_DEPTH deep
 *   (jansson's own bound is 2048; ours is found by a scan, so a message too deep costs no tree).
 *   What we extract:
 *     pid              integer in 1..INT32_MAX (1234.0 or 1e3 are refused: not integers)
 *     metadata         string, fits ho_info.metadata
 *     fds              array of at most HO_MAX_FDS strings; "seccompFd" exactly once
 *     state.id         string, fits ho_info.id
 *     state.bundle     string, fits ho_info.bundle
 *     state.pid        as pid; used only when the top-level "pid" is absent
 *     state.annotations  Kubernetes' names for the container, each from the first key present:
 *                      pod_ns     io.kubernetes.cri.sandbox-namespace, io.kubernetes.pod.namespace
 *                      pod        io.kubernetes.cri.sandbox-name, io.kubernetes.pod.name
 *                      container  io.kubernetes.cri.container-name, io.kubernetes.container.name
 *                      (containerd's CRI plugin writes the first of each, dockershim and CRI-O
 *                      the second). They only name the client for people to read, so one that
 *                      is not a name is ignored, not refused: a string of 1 to the field's size
 *                      less one bytes, each graphic ASCII other than '/' (the separator of
 *                      "NAMESPACE/POD/CONTAINER"), '"' and '\'. What was ignored, and why, goes
 *                      to name_note, never the value itself: it came from the peer.
 *   null stands for "absent" in each of them (encoding/json, which runc uses, reads it so).
 *   A string that does not fit its buffer, or holds \u0000, is refused rather than cut: a
 *   truncated id or metadata could name someone else's namespace. (JSON_ALLOW_NUL lets \u0000
 *   through to us, so that it is refused where it matters and passes where we do not look.)
 *   Duplicate keys are refused (JSON_REJECT_DUPLICATES), since two parsers picking different
 *   copies is the classic way to smuggle a value past a check.
 *   Any other key and its value are skipped (after full validation).
 *
 *   jansson cannot be told to accept three things the hand-written reader before it accepted
 *   where it did not look, so these are now refused: a duplicate key in an object we skip; a
 *   key holding \u0000; a number that fits neither a 64-bit integer (when it has no fraction or
 *   exponent) nor a double. runc never sends any of them (encoding/json writes neither
 *   duplicate nor NUL keys, and the only number in the state is the pid), and refusing more
 *   of a hostile sender is safe.
 *
 * Errors name what was wrong and, where the text still says it, the byte offset where it was
 * noticed, for the log of a daemon that drops the connection and keeps serving everyone else.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "handoff/msg.h"

void ho_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Where the refusal goes. */
struct rd {
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int rd_fail(struct rd *r, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ho_err(r->err, r->errlen, "malformed agent message: %s", what);
	return -EPROTO;
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * The offset of the bracket that opens a container HO_MAX_DEPTH + 1 deep, or len if none does.
 * Strings are skipped by their quotes and escapes, which is exact for valid JSON; on anything
 * else jansson refuses the message anyway.
 */
static size_t too_deep(const char *s, size_t len)
{
	bool in_str = false, esc = false;
	int depth = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > HO_MAX_DEPTH)
				return i;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return len;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	default:
		return "a number";
	}
}

/* obj's member key, or NULL when it is absent or null. */
static json_t *member(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* A string field of ho_info: copied whole, or refused if it does not fit, never cut. */
static int get_string(struct rd *r, const json_t *obj, const char *key, const char *name, char *buf,
		      size_t cap)
{
	json_t *v = member(obj, key);
	size_t n;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return rd_fail(r, "\"%s\" must be a string, not %s", name, type_name(v));
	n = json_string_length(v);
	if (memchr(json_string_value(v), '\0', n))
		return rd_fail(r, "\"%s\" contains a NUL character (\\u0000)", name);
	if (n >= cap)
		return rd_fail(r, "\"%s\" is %zu bytes long, more than the %zu allowed", name, n,
			       cap - 1);
	memcpy(buf, json_string_value(v), n + 1);
	return 0;
}

/* A process id: *pid stays 0 when it is absent. */
static int get_pid(struct rd *r, const json_t *obj, const char *key, const char *name, int32_t *pid)
{
	json_t *v = member(obj, key);
	json_int_t n;

	if (!v)
		return 0;
	/* jansson keeps "1234.0" and "1e3" apart from "1234": they decode as reals */
	if (json_is_real(v))
		return rd_fail(r, "\"%s\" is not an integer", name);
	if (!json_is_integer(v))
		return rd_fail(r, "\"%s\" must be a number, not %s", name, type_name(v));
	n = json_integer_value(v);
	if (n <= 0 || n > INT32_MAX)
		return rd_fail(r, "\"%s\" is not a process id (1 to %d)", name, INT32_MAX);
	*pid = (int32_t)n;
	return 0;
}

/* "fds": *fd_index gets the slot named "seccompFd" (compared whole: a NUL inside differs). */
static int get_fds(struct rd *r, const json_t *root, int *fd_index)
{
	static const char want[] = "seccompFd";
	json_t *fds = member(root, "fds"), *v;
	size_t i;

	if (!fds)
		return 0;
	if (!json_is_array(fds))
		return rd_fail(r, "\"fds\" must be an array of strings, not %s", type_name(fds));
	json_array_foreach(fds, i, v)
	{
		if (i >= HO_MAX_FDS)
			return rd_fail(r, "fds names more than %d descriptors", HO_MAX_FDS);
		if (!json_is_string(v))
			return rd_fail(r, "fds[%zu] is not a string", i);
		if (json_string_length(v) != sizeof(want) - 1 ||
		    memcmp(json_string_value(v), want, sizeof(want) - 1))
			continue;
		if (*fd_index >= 0)
			return rd_fail(r, "fds names \"seccompFd\" twice");
		*fd_index = (int)i;
	}
	return 0;
}

/* A name fit to show: see the design comment. */
static bool name_ok(const char *s, size_t n, size_t cap)
{
	if (!n || n >= cap)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c >= 0x7f || c == '/' || c == '"' || c == '\\')
			return false;
	}
	return true;
}

/* One part of the name, from the first of keys[] that holds a name; the others are noted. */
static void get_name(struct ho_info *info, const json_t *ann, const char *const keys[2], char *buf,
		     size_t cap)
{
	size_t nl;

	for (int i = 0; i < 2; i++) {
		json_t *v = json_object_get(ann, keys[i]);
		char why[80];

		if (!v)
			continue;
		if (!json_is_string(v)) {
			snprintf(why, sizeof(why), "not a string");
		} else if (!name_ok(json_string_value(v), json_string_length(v), cap)) {
			snprintf(why, sizeof(why), "not 1 to %zu printable ASCII bytes without '/'",
				 cap - 1);
		} else {
			/* a valid older key, when the CRI one already named it, is not used */
			if (!buf[0])
				memcpy(buf, json_string_value(v), json_string_length(v) + 1);
			continue;
		}
		nl = strlen(info->name_note);
		snprintf(info->name_note + nl, sizeof(info->name_note) - nl, "%s%s ignored: %s",
			 nl ? "; " : "", keys[i], why);
	}
}

/* Kubernetes' names from state.annotations, when it has them. */
static void get_names(struct ho_info *info, const json_t *state)
{
	static const char *const ns_keys[2] = { "io.kubernetes.cri.sandbox-namespace",
						"io.kubernetes.pod.namespace" };
	static const char *const pod_keys[2] = { "io.kubernetes.cri.sandbox-name",
						 "io.kubernetes.pod.name" };
	static const char *const ctr_keys[2] = { "io.kubernetes.cri.container-name",
						 "io.kubernetes.container.name" };
	const json_t *ann = member(state, "annotations");

	if (!ann)
		return;
	if (!json_is_object(ann)) {
		snprintf(info->name_note, sizeof(info->name_note),
			 "state.annotations ignored: not an object");
		return;
	}
	get_name(info, ann, ns_keys, info->pod_ns, sizeof(info->pod_ns));
	get_name(info, ann, pod_keys, info->pod, sizeof(info->pod));
	get_name(info, ann, ctr_keys, info->container, sizeof(info->container));
}

void ho_client_name(const struct ho_info *info, char *buf, size_t cap)
{
	const char *part[3] = { info->pod_ns, info->pod, info->container };
	size_t n = 0;

	if (!cap)
		return;
	buf[0] = '\0';
	for (int i = 0; i < 3; i++) {
		if (!part[i][0])
			continue;
		/* snprintf returns what it would have written: clamp, so n never passes cap */
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "/" : "", part[i]);
		if (n >= cap)
			return;
	}
	if (n)
		return;
	if (info->id[0])
		snprintf(buf, cap, "%s (pid %d)", info->id, (int)info->pid);
	else
		snprintf(buf, cap, "pid %d", (int)info->pid);
}

/* The fields of a decoded message, in info and *fd_index. */
static int extract(struct rd *r, const json_t *root, struct ho_info *info, int *fd_index)
{
	int32_t pid = 0, state_pid = 0;
	const json_t *state;

	if (get_pid(r, root, "pid", "pid", &pid) ||
	    get_string(r, root, "metadata", "metadata", info->metadata, sizeof(info->metadata)) ||
	    get_fds(r, root, fd_index))
		return -EPROTO;
	state = member(root, "state");
	if (state && !json_is_object(state))
		return rd_fail(r, "\"state\" must be an object, not %s", type_name(state));
	if (state &&
	    (get_string(r, state, "id", "state.id", info->id, sizeof(info->id)) ||
	     get_string(r, state, "bundle", "state.bundle", info->bundle, sizeof(info->bundle)) ||
	     get_pid(r, state, "pid", "state.pid", &state_pid)))
		return -EPROTO;
	if (state)
		get_names(info, state);
	if (*fd_index < 0) {
		ho_err(r->err, r->errlen, "the agent message names no \"seccompFd\" in \"fds\"");
		return -EPROTO;
	}
	info->pid = pid ? pid : state_pid;
	if (!info->pid) {
		ho_err(r->err, r->errlen,
		       "the agent message has neither \"pid\" nor \"state.pid\"");
		return -EPROTO;
	}
	return 0;
}

int ho_parse(const char *json, size_t len, struct ho_info *info, int *fd_index, char *err,
	     size_t errlen)
{
	struct rd r = { err, errlen };
	json_error_t je;
	json_t *root;
	size_t at = 0;
	int rc = -EPROTO;

	memset(info, 0, sizeof(*info));
	*fd_index = -1;
	ho_err(err, errlen, "%s", "");
	if (len > HO_MAX_MESSAGE) {
		ho_err(err, errlen, "the agent message is %zu bytes long, more than the %d allowed",
		       len, HO_MAX_MESSAGE);
		goto fail;
	}
	while (at < len && is_ws(json[at]))
		at++;
	if (at == len) {
		rd_fail(&r, "the message is empty at byte %zu", at);
		goto fail;
	}
	if (json[at] != '{') {
		rd_fail(&r, "the message is not a JSON object at byte %zu", at);
		goto fail;
	}
	at = too_deep(json, len);
	if (at < len) {
		rd_fail(&r, "objects and arrays nest deeper than %d at byte %zu", HO_MAX_DEPTH, at);
		goto fail;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!root) {
		if (json_error_code(&je) == json_error_out_of_memory) {
			ho_err(err, errlen, "out of memory for the agent message");
			rc = -ENOMEM;
		} else {
			rd_fail(&r, "%s at byte %d", je.text, je.position);
		}
		goto fail;
	}
	rc = extract(&r, root, info, fd_index);
	json_decref(root);
	if (!rc)
		return 0;
fail:
	memset(info, 0, sizeof(*info));
	*fd_index = -1;
	return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/*
 * The message runc would send for this process (runc omits an empty metadata, so do we). A
 * string that is unterminated or not UTF-8 is -EINVAL here, since the receiver would refuse the
 * message anyway and the sender is the one who can say why.
 */
int ho_build(const struct ho_info *info, char *buf, size_t cap, size_t *len)
{
	json_error_t je;
	json_t *msg;
	size_t n;

	if (info->pid <= 0 || !terminated(info->id, sizeof(info->id)) ||
	    !terminated(info->metadata, sizeof(info->metadata)) ||
	    !terminated(info->bundle, sizeof(info->bundle)))
		return -EINVAL;
	msg = json_pack_ex(&je, 0, "{s:s, s:[s], s:i, s:s*, s:{s:s, s:s, s:s, s:i, s:s}}",
			   "ociVersion", "1.0.2", "fds", "seccompFd", "pid", (int)info->pid,
			   "metadata", info->metadata[0] ? info->metadata : NULL, "state",
			   "ociVersion", "1.0.2", "id", info->id, "status", "creating", "pid",
			   (int)info->pid, "bundle", info->bundle);
	if (!msg)
		return json_error_code(&je) == json_error_out_of_memory ? -ENOMEM : -EINVAL;
	n = json_dumpb(msg, buf, cap, JSON_COMPACT);
	json_decref(msg);
	if (!n)
		return -ENOMEM;
	if (n > cap)
		return -EOVERFLOW; /* HO_BUILD_MAX is wrong */
	*len = n;
	return 0;
}

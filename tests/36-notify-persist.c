/* SPDX-License-Identifier: MIT */
/*
 * The state one supervisor process hands the next (server/notify/persist.c):
 *  - a round trip: sets, values, permissions, ids, keys and counters of a named namespace come
 *    back whole in a new supervisor, and the next new set gets the id it would have had;
 *  - a state from the build before (tests/data/state-v1.bin, kept in the tree) is still read:
 *    an upgrade must not lose a running system's semaphores;
 *  - a state that cannot be read is refused whole, with a reason: another file, a newer format,
 *    any byte damaged, any length cut short. Nothing is applied then, and nothing crashes.
 *
 * Parked calls, undo entries of live processes and listeners are carried over too; they need
 * confined processes and are tested through the daemon (64-daemon-restart.c).
 *
 * SV_WRITE_STATE=FILE makes the round trip also write the state it saved to FILE: how
 * tests/data/state-v1.bin was made (by the build whose format it is).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/runner.h"

#include "notify/notify.h"
#include "notify/nsreg.h"
#include "notify/super.h"
#include "tests/lib/fixture.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:nt_super_new\nleak:nsreg_named\nleak:nsreg_init\n";
}

TestSuite(persist, .timeout = 60);

#define NS_NAME "persist"

static struct nt_super *super_new(void)
{
	struct nt_config cfg = { .nworkers = 1 };
	char err[256];
	struct nt_super *s = nt_super_new(&cfg, err, sizeof(err));

	cr_assert(s, "nt_super_new: %s", err);
	return s;
}

/* The named namespace of s (made if it is not there), as the engine's. */
static struct sv_ns *named(struct nt_super *s)
{
	struct nt_ns *n = nsreg_named(&s->reg, NS_NAME);

	cr_assert(n);
	return n->ns; /* the registry keeps it listed */
}

/*
 * What the fixture holds, made again here: three sets (one removed in between, so ids have a
 * hole and a sequence past 0), values and permissions of their own.
 */
static void populate(struct sv_ns *ns)
{
	struct fx_caller *c = fx_caller_new(ns, 4242, 1000, 100);
	struct sv_wakeq wq;
	uint16_t vals[3] = { 7, 0, 32767 };
	int a, b, x;

	sv_wakeq_init(&wq);
	a = (int)sv_semget(&c->c, 0x5e36, 3, SV_IPC_CREAT | 0640);
	x = (int)sv_semget(&c->c, SV_IPC_PRIVATE, 1, 0600);
	b = (int)sv_semget(&c->c, 0x5e37, 2, SV_IPC_CREAT | 0600);
	cr_assert(a >= 0 && x >= 0 && b >= 0);
	cr_assert_eq(fx_semctl(c, a, 0, SV_SETALL, (uint64_t)(uintptr_t)vals, &wq), 0);
	cr_assert_eq(fx_semctl(c, b, 1, SV_SETVAL, 5, &wq), 0);
	cr_assert_eq(fx_semctl(c, x, 0, SV_IPC_RMID, 0, &wq), 0);
	cr_assert_eq(fx_semop(c, b, NULL, &wq, 1, &(struct sv_sembuf){ 1, -2, 0 }), 0);
	fx_caller_exit(c, NULL); /* it made no undo entry: its exit changes nothing */
}

struct seen {
	int n;
	struct sv_set_info info[8];
};

static int collect(const struct sv_set_info *si, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8)
		s->info[s->n] = *si;
	s->n++;
	return 0;
}

/* Both namespaces hold the same sets, field by field, values included. */
static void assert_same(struct sv_ns *want, struct sv_ns *got)
{
	struct seen a = { 0 }, b = { 0 };
	struct sv_ns_info ia, ib;

	sv_ns_for_each_set_ordered(want, collect, &a);
	sv_ns_for_each_set_ordered(got, collect, &b);
	cr_assert_eq(b.n, a.n, "sets: %d, not %d", b.n, a.n);
	for (int i = 0; i < a.n && i < 8; i++) {
		struct sv_sem_info sa[4], sb[4];
		struct sv_set_info tmp;
		const struct sv_set_info *x = &a.info[i], *y = &b.info[i];

		cr_assert(x->id == y->id && x->key == y->key && x->uid == y->uid &&
			      x->gid == y->gid && x->cuid == y->cuid && x->cgid == y->cgid &&
			      x->mode == y->mode && x->nsems == y->nsems && x->otime == y->otime &&
			      x->ctime == y->ctime,
			  "set %d differs", x->id);
		cr_assert_eq(sv_ns_show_set(want, x->id, &tmp, sa, 4), x->nsems);
		cr_assert_eq(sv_ns_show_set(got, y->id, &tmp, sb, 4), y->nsems);
		for (int k = 0; k < x->nsems && k < 4; k++)
			cr_assert(sa[k].semval == sb[k].semval && sa[k].sempid == sb[k].sempid,
				  "set %d sem %d: %d/%d, not %d/%d", x->id, k, sb[k].semval,
				  sb[k].sempid, sa[k].semval, sa[k].sempid);
	}
	sv_ns_info(want, &ia);
	sv_ns_info(got, &ib);
	cr_assert(!memcmp(&ia.limits, &ib.limits, sizeof(ia.limits)));
}

static void save(struct nt_super *s, void **buf, size_t *len)
{
	cr_assert_eq(nt_super_save(s, buf, len), 0);
	cr_assert_gt(*len, 32);
}

Test(persist, round_trip)
{
	struct nt_super *a = super_new(), *b = super_new();
	struct sv_ns *na, *nb;
	struct fx_caller *ca, *cb;
	const char *out = getenv("SV_WRITE_STATE");
	char err[256];
	void *buf;
	size_t len;

	sv_thread_register();
	na = named(a);
	populate(na);
	save(a, &buf, &len);
	if (out && *out) {
		FILE *f = fopen(out, "wb");

		cr_assert(f && fwrite(buf, 1, len, f) == len && !fclose(f));
	}
	nb = named(b); /* as a listener served from the name would have made it */
	cr_assert_eq(nt_super_restore(b, buf, len, err, sizeof(err)), 0, "%s", err);
	assert_same(na, nb);
	/* the counters count from when the first process started */
	cr_assert_eq(nt_super_counting_since(b), nt_super_counting_since(a));

	/* the next set made in each gets the same id, and keys find the same sets */
	ca = fx_caller_new(na, 77, 1000, 100);
	cb = fx_caller_new(nb, 77, 1000, 100);
	cr_assert_eq(sv_semget(&cb->c, SV_IPC_PRIVATE, 1, 0600),
		     sv_semget(&ca->c, SV_IPC_PRIVATE, 1, 0600));
	cr_assert_eq(sv_semget(&cb->c, 0x5e37, 0, 0), sv_semget(&ca->c, 0x5e37, 0, 0));
	cr_assert_eq(sv_semget(&cb->c, 0x5e37, 1, SV_IPC_CREAT | SV_IPC_EXCL), -EEXIST);
	fx_caller_exit(ca, NULL);
	fx_caller_exit(cb, NULL);
	free(buf);
	sv_thread_unregister();
}

/* The fixture: written by the build whose format is version 1 (see the top). */
Test(persist, reads_the_previous_builds_state)
{
	struct nt_super *s = super_new(), *want = super_new();
	char err[256], path[512];
	struct stat st;
	void *buf;
	int fd;

	sv_thread_register();
	/* from the top of the tree, as `make test` runs the tests */
	snprintf(path, sizeof(path), "tests/data/state-v1.bin");
	fd = open(path, O_RDONLY);
	cr_assert(fd >= 0 && !fstat(fd, &st), "%s: %s", path, strerror(errno));
	buf = malloc((size_t)st.st_size);
	cr_assert(read(fd, buf, (size_t)st.st_size) == st.st_size);
	close(fd);
	named(s);
	cr_assert_eq(nt_super_restore(s, buf, (size_t)st.st_size, err, sizeof(err)), 0, "%s", err);
	/* the same sets as populate() makes now; times aside, which the fixture has from then */
	populate(named(want));
	{
		struct seen a = { 0 }, b = { 0 };

		sv_ns_for_each_set_ordered(named(want), collect, &a);
		sv_ns_for_each_set_ordered(named(s), collect, &b);
		cr_assert_eq(b.n, a.n);
		for (int i = 0; i < a.n; i++) {
			struct sv_sem_info sa[4], sb[4];
			struct sv_set_info tmp;

			cr_assert(a.info[i].id == b.info[i].id && a.info[i].key == b.info[i].key &&
				  a.info[i].mode == b.info[i].mode &&
				  a.info[i].nsems == b.info[i].nsems);
			sv_ns_show_set(named(want), a.info[i].id, &tmp, sa, 4);
			sv_ns_show_set(named(s), b.info[i].id, &tmp, sb, 4);
			for (int k = 0; k < a.info[i].nsems; k++)
				cr_assert_eq(sb[k].semval, sa[k].semval);
		}
	}
	free(buf);
	sv_thread_unregister();
}

/* A state nt_super_restore() must refuse whole: rc, and the namespace still empty. */
static void assert_refused(const void *buf, size_t len, int want_rc, const char *what)
{
	struct nt_super *s = super_new();
	struct sv_ns_info info;
	char err[256] = "";
	int rc;

	rc = nt_super_restore(s, buf, len, err, sizeof(err));
	if (want_rc)
		cr_assert_eq(rc, want_rc, "%s: %d (%s)", what, rc, err);
	else
		cr_assert_lt(rc, 0, "%s: accepted", what);
	cr_assert(err[0], "%s: refused without a reason", what);
	sv_ns_info(named(s), &info);
	cr_assert_eq(info.nsets, 0, "%s: half-applied", what);
	nt_super_free(s);
}

Test(persist, refuses_what_it_cannot_read)
{
	struct nt_super *a = super_new();
	unsigned char *buf, *bad;
	uint32_t version;
	size_t len;

	sv_thread_register();
	populate(named(a));
	save(a, (void **)&buf, &len);
	bad = malloc(len);

	assert_refused("not a state at all", 18, -EINVAL, "garbage");
	memcpy(bad, buf, len);
	memcpy(&version, bad + 8, 4);
	version++;
	memcpy(bad + 8, &version, 4);
	assert_refused(bad, len, -EPROTONOSUPPORT, "a newer version");

	/* cut short anywhere */
	for (size_t cut = 0; cut < len; cut += cut < 64 ? 1 : 7)
		assert_refused(buf, cut, 0, "truncated");
	/* any byte damaged: the checksum, or the header's own checks, say so */
	for (size_t at = 0; at < len; at += at < 64 ? 1 : 5) {
		memcpy(bad, buf, len);
		bad[at] ^= 0x5a;
		if (at >= 8 && at < 12) /* the version: older is fine, newer says so */
			continue;
		assert_refused(bad, len, 0, "damaged");
	}
	free(bad);
	free(buf);
	sv_thread_unregister();
}

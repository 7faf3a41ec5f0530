/* SPDX-License-Identifier: MIT */
/*
 * Credentials on demand and the caller's last word (sem.h: struct sv_cred's missing,
 * sv_caller_ops.cred_fill and .committing). For a confined program, reading the supplementary
 * groups and the capabilities costs more than the rest of a call, so the engine asks for them
 * only when a decision depends on them; and before any change that cannot be undone it asks
 * whether the caller still waits, doing nothing if not.
 *
 * What must hold: the decisions are the kernel's whatever is missing; groups are asked for only
 * when they choose between the group and the other class and the two grant differently;
 * capabilities only when the mode refuses, or for IPC_SET/IPC_RMID by a non-owner; a caller
 * that cannot be asked (cred_fill fails) gets -SV_EGONE and nothing changes; a change refused
 * at the last moment (committing fails) leaves no trace: no value, no set, no removal, no id.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "tests/lib/fixture.h"

#define PTR(p) ((uint64_t)(uintptr_t)(p))

/* A caller whose groups and capabilities are filled in on demand, from these. */
struct lazy {
	struct fx_caller *fc;
	uint32_t groups[4];
	int ngroups;
	bool ipc_owner, sys_admin;
	int fills_groups, fills_caps, commits;
	bool gone;    /* cred_fill says the caller is gone */
	int fail;     /* cred_fill fails with this -errno */
	bool abandon; /* committing fails */
};

static struct lazy L;

static int fill(const struct sv_caller *c, unsigned int what)
{
	struct sv_cred *cr = &L.fc->cred;

	(void)c;
	if (L.gone)
		return -SV_EGONE;
	if (L.fail)
		return L.fail;
	if (what & SV_CRED_GROUPS & cr->missing) {
		L.fills_groups++;
		memcpy(L.fc->groups, L.groups, sizeof(L.groups));
		cr->ngroups = L.ngroups;
	}
	if (what & SV_CRED_CAPS & cr->missing) {
		L.fills_caps++;
		cr->cap_ipc_owner = L.ipc_owner;
		cr->cap_sys_admin = L.sys_admin;
	}
	cr->missing &= ~what;
	return 0;
}

static int committing(const struct sv_caller *c)
{
	(void)c;
	L.commits++;
	return L.abandon ? -ESRCH : 0;
}

static const struct sv_caller_ops lazy_ops = { .cred_fill = fill, .committing = committing };

static struct fx_caller *root;

/* A new call of L's caller: nothing known but the ids, counters zeroed. */
static struct fx_caller *call(void)
{
	L.fc->cred.missing = SV_CRED_GROUPS | SV_CRED_CAPS;
	L.fc->cred.ngroups = 0;
	L.fc->cred.cap_ipc_owner = L.fc->cred.cap_sys_admin = false;
	L.fills_groups = L.fills_caps = L.commits = 0;
	return L.fc;
}

static void setup(void)
{
	fx_setup();
	root = fx_caller_new(fx_ns, 100, 0, 0);
	memset(&L, 0, sizeof(L));
	L.fc = fx_caller_new(fx_ns, 200, 1000, 1000);
	L.fc->c.ops = &lazy_ops;
}

static void teardown(void)
{
	fx_caller_exit(L.fc, NULL);
	fx_caller_exit(root, NULL);
	fx_teardown();
}

TestSuite(engine_lazy_creds, .init = setup, .fini = teardown, .timeout = 30);

/* A set of root's with this mode and group (IPC_SET as root). */
static int set_of(uint32_t mode, uint32_t gid)
{
	unsigned char ds[104] = { 0 };
	int id = (int)sv_semget(&root->c, SV_IPC_PRIVATE, 2, 0600);
	cr_assert_geq(id, 0);
	memcpy(ds + 8, &gid, 4);
	memcpy(ds + 20, &mode, 4);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_SET, PTR(ds), NULL), 0);
	return id;
}

Test(engine_lazy_creds, owner_needs_neither)
{
	struct fx_caller *me = call();
	int id = (int)sv_semget(&me->c, SV_IPC_PRIVATE, 1, 0600);

	cr_assert_geq(id, 0);
	me = call();
	cr_expect_eq(fx_getval(me, id, 0), 0);
	cr_expect_eq(fx_semop(me, id, NULL, NULL, SOPS({ 0, 1, 0 })), 0);
	cr_expect_eq(fx_semctl(me, id, 0, SV_IPC_RMID, 0, NULL), 0);
	cr_expect_eq(L.fills_groups + L.fills_caps, 0, "the owner's access needs nothing more");
}

Test(engine_lazy_creds, groups_only_when_they_decide)
{
	int id = set_of(0640, 2000); /* group may read, others nothing */

	/* fsgid is not the set's group: whether 2000 is a supplementary group decides */
	L.groups[0] = 2000;
	L.ngroups = 1;
	cr_expect_eq(fx_getval(call(), id, 0), 0);
	cr_expect_eq(L.fills_groups, 1);
	cr_expect_eq(L.fills_caps, 0);
	L.ngroups = 0;
	cr_expect_eq(fx_getval(call(), id, 0), -EACCES);
	cr_expect_eq(L.fills_groups, 1);
	cr_expect_eq(L.fills_caps, 1, "refused by the mode: the capabilities are asked too");

	/* group and other grant the same: the groups are not asked for */
	id = set_of(0644, 2000);
	cr_expect_eq(fx_getval(call(), id, 0), 0);
	cr_expect_eq(L.fills_groups + L.fills_caps, 0);
	id = set_of(0600, 2000);
	cr_expect_eq(fx_getval(call(), id, 0), -EACCES);
	cr_expect_eq(L.fills_groups, 0, "group and other both refuse: no need to know which");

	/* fsgid matching decides without the list */
	id = set_of(0640, 1000);
	cr_expect_eq(fx_getval(call(), id, 0), 0);
	cr_expect_eq(L.fills_groups + L.fills_caps, 0);
}

Test(engine_lazy_creds, capabilities_only_when_refused)
{
	int id = set_of(0600, 0);

	L.ipc_owner = true;
	cr_expect_eq(fx_getval(call(), id, 0), 0, "CAP_IPC_OWNER overrides the mode");
	cr_expect_eq(L.fills_caps, 1);
	L.ipc_owner = false;
	cr_expect_eq(fx_getval(call(), id, 0), -EACCES);
	/* IPC_RMID by a non-owner: CAP_SYS_ADMIN decides */
	cr_expect_eq(fx_semctl(call(), id, 0, SV_IPC_RMID, 0, NULL), -EPERM);
	cr_expect_eq(L.fills_caps, 1);
	L.sys_admin = true;
	cr_expect_eq(fx_semctl(call(), id, 0, SV_IPC_RMID, 0, NULL), 0);
	cr_expect_eq(fx_getval(root, id, 0), -EINVAL);
}

Test(engine_lazy_creds, a_caller_that_cannot_be_asked_changes_nothing)
{
	int id = set_of(0660, 2000);

	cr_assert_eq(fx_semctl(root, id, 0, SV_SETVAL, 3, NULL), 0);
	L.gone = true;
	cr_expect_eq(fx_semop(call(), id, NULL, NULL, SOPS({ 0, 1, 0 })), -SV_EGONE);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_SETVAL, 7, NULL), -SV_EGONE);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_IPC_RMID, 0, NULL), -SV_EGONE);
	cr_expect_eq(sv_semget(&call()->c, 0x1234, 0, 0660), -ENOENT);
	cr_expect_eq(fx_getval(root, id, 0), 3, "nothing changed");

	/* credentials that could not be read: the call is answered with why */
	L.gone = false;
	L.fail = -ENOMEM;
	cr_expect_eq(fx_semop(call(), id, NULL, NULL, SOPS({ 0, 1, 0 })), -ENOMEM);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_SETVAL, 7, NULL), -ENOMEM);
	cr_expect_eq(fx_getval(root, id, 0), 3, "nothing changed");
}

Test(engine_lazy_creds, an_abandoned_change_leaves_no_trace)
{
	unsigned char ds[104] = { 0 };
	uint16_t vals[2] = { 9, 9 };
	struct fx_caller *me = call();
	int id = (int)sv_semget(&me->c, SV_IPC_PRIVATE, 2, 0600), next;

	cr_assert_geq(id, 0);
	cr_expect_eq(L.commits, 1, "a new set is committed once");
	cr_assert_eq(fx_semctl(me, id, 0, SV_SETVAL, 4, NULL), 0);

	L.abandon = true;
	cr_expect_eq(fx_semctl(call(), id, 0, SV_SETVAL, 5, NULL), -SV_EGONE);
	cr_expect_eq(L.commits, 1);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_SETALL, PTR(vals), NULL), -SV_EGONE);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_IPC_SET, PTR(ds), NULL), -SV_EGONE);
	cr_expect_eq(fx_semctl(call(), id, 0, SV_IPC_RMID, 0, NULL), -SV_EGONE);
	cr_expect_eq(sv_semget(&call()->c, 0x4321, 1, SV_IPC_CREAT | 0600), -SV_EGONE);
	/* what is only read or can be undone is not asked about */
	cr_expect_eq(fx_getval(call(), id, 0), 4);
	cr_expect_eq(fx_semop(call(), id, NULL, NULL, SOPS({ 1, 1, 0 })), 0);
	cr_expect_eq(L.commits, 0);
	L.abandon = false;

	struct fx_stat st;

	cr_assert_eq(fx_ipc_stat(root, id, &st), 0, "IPC_RMID went through");
	cr_expect_eq(st.mode, 0600, "IPC_SET went through");
	cr_expect_eq(fx_getval(root, id, 0), 4, "SETVAL or SETALL went through");
	cr_expect_eq(fx_getval(root, id, 1), 1);
	cr_expect_eq(sv_semget(&root->c, 0x4321, 0, 0), -ENOENT, "the abandoned set exists");
	/* and it did not take an id: the next set gets the one it would have */
	next = (int)sv_semget(&root->c, SV_IPC_PRIVATE, 1, 0600);
	cr_expect_eq(next, id + 1, "an abandoned creation consumed id %d", id + 1);
}

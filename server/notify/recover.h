/* SPDX-License-Identifier: MIT */
/*
 * Crash safety inside the supervisor (recover.c): the calls' slots, and what persist.c lends
 * it. The public part is in notify.h (nt_super_journal_*(), nt_super_recover()).
 */
#ifndef SV_NOTIFY_RECOVER_H
#define SV_NOTIFY_RECOVER_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "notify/durable.h"
#include "notify/listener.h"
#include "notify/super.h"

/*
 * Where the worker receives its next call from l: its slot, armed (wk->jid set), when the
 * supervisor is crash-safe and l can be found again (it has a key); else wk->notif (jid 0).
 * (Inline: the receiving and serving files below recover.c use them.)
 */
static inline struct seccomp_notif *nt_slot_arm(struct nt_worker *wk, struct nt_listener *l)
{
	struct dur *d = wk->super->dur;

	wk->jid = 0;
	if (!d || !l->key)
		return wk->notif;
	if (wk->slot < 0 && (wk->slot = dur_slot_take(d)) < 0)
		return wk->notif; /* every slot holds a call: this one is not crash-safe */
	return dur_slot_arm(d, wk->slot, l->key, &wk->jid);
}

/* The call just received into the armed slot came at now. */
static inline void nt_slot_received(struct nt_worker *wk, int64_t now)
{
	if (wk->jid)
		dur_slot_received(wk->super->dur, wk->slot, now);
}

/*
 * persist.c: restore a saved state, its parked calls served again only if parked_too. gone
 * (may be NULL) is offered each process that exited while no supervisor ran, with its undo
 * entries and its key in the journal: fn returns true to keep it (with a reference of its own), and its exit is then the
 * keeper's to apply; false (or no gone) applies it at once.
 */
struct persist_gone {
	bool (*fn)(struct persist_gone *g, struct sv_proc *svp, uint64_t key);
};
int persist_restore(struct nt_super *s, const void *buf, size_t len, bool parked_too,
		    struct persist_gone *gone, char *err, size_t errlen);
/* persist.c: the listener with this key, with a reference; NULL if there is none. */
struct nt_listener *persist_listener(struct nt_super *s, uint64_t key);

#endif

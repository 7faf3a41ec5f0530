/* SPDX-License-Identifier: MIT */
/*
 * What survives a crash (durable.c): one memfd that the service manager's fd store keeps, with
 * the calls received and not yet answered, a checkpoint of the whole state, and the journal of
 * the changes made since (engine/journal.c). A process that takes the memfd over after a crash
 * applies the checkpoint, then the journal, then answers or serves again the calls in it.
 *
 * Calls. A worker receives each notification straight into a slot of the memfd, which it armed
 * first with the listener's key and the call's journal id; the kernel's copy into it is done
 * before NOTIF_RECV returns, so no call is received that a crash could lose. The slot stays the
 * call's until it is answered (a parked call takes its worker's slot with it). A slot whose
 * notification the kernel no longer holds is answered already: NOTIF_ID_VALID tells.
 *
 * Layout: a header page; the slots; then the checkpoint and the journal after it, each at an
 * offset that only grows, behind holes punched where older ones were.
 */
#ifndef SV_NOTIFY_DURABLE_H
#define SV_NOTIFY_DURABLE_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sem.h"

struct dur;

/* The notification part of a slot: big enough for this kernel's struct seccomp_notif? */
#define DUR_NOTIF_MAX 96

/*
 * A new memfd (fd -1: closed by dur_close()), or the one a previous process left (fd, checked:
 * -EINVAL when it is not one, -EPROTONOSUPPORT when a newer build wrote it; it stays the
 * caller's; an empty one is made new). The slots of a taken-over one stay as they were until
 * dur_calls_done().
 */
int dur_open(int fd, struct dur **out);
/* Made by dur_open(-1), so nothing is in it from before. */
bool dur_fresh(const struct dur *d);
void dur_close(struct dur *d);
int dur_fd(const struct dur *d);

/* ---- calls ---- */

/* A free slot, or -1 (every slot is in use: the call is then received outside the memfd). */
int dur_slot_take(struct dur *d);
void dur_slot_put(struct dur *d, int slot);
/* Arm slot for the next call of the listener key: its notification buffer, zeroed; *jid set. */
struct seccomp_notif *dur_slot_arm(struct dur *d, int slot, uint64_t key, uint64_t *jid);
/* The call in slot was received at now (CLOCK_MONOTONIC ns). */
void dur_slot_received(struct dur *d, int slot, int64_t now);

/* A call found in the memfd by dur_for_each_call(). */
struct dur_call {
	int slot;
	uint64_t key, jid;
	int64_t received_ns;
	const struct seccomp_notif *n;
};
/* Every slot holding a call received (answered or not: the caller asks the kernel). */
int dur_for_each_call(struct dur *d, int (*fn)(const struct dur_call *c, void *arg), void *arg);
/*
 * Take slot over as a call being served again: kept (not free) until dur_slot_put(). Slots
 * not taken over are freed by dur_calls_done().
 */
void dur_slot_keep(struct dur *d, int slot);
void dur_calls_done(struct dur *d);

/* ---- the checkpoint and the journal ---- */

/* The sink for sv_journal_attach(): appends to the journal after the checkpoint. */
const struct sv_journal *dur_sink(struct dur *d);
/* Append one record of the notify layer's own (its own magic); len a multiple of 8. */
void dur_append(struct dur *d, const void *rec, size_t len);
/*
 * Make blob the checkpoint and start an empty journal after it, atomically: a crash before
 * leaves the previous checkpoint and journal, after, these. Nothing may append meanwhile.
 * 0 or -ENOMEM / -ENOSPC.
 */
int dur_checkpoint(struct dur *d, const void *blob, size_t len);
/* The current checkpoint and journal (len 0: none yet). Valid until the next checkpoint. */
void dur_current(const struct dur *d, const void **ckpt, size_t *ckpt_len, const void **log,
		 size_t *log_len);
/* Bytes appended since the checkpoint. */
size_t dur_log_size(const struct dur *d);

#endif

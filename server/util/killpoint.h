/* SPDX-License-Identifier: MIT */
/*
 * Kill points, for the tests of crash safety (tests/64-daemon-restart.c): a process armed with
 * "POINT:N" kills itself with SIGKILL the Nth time it passes POINT, so that a test can make the
 * daemon die exactly where a crash is hardest to survive, as often as it likes. Unarmed (every
 * run that is not such a test) a point costs one predictable branch.
 */
#ifndef SV_KILLPOINT_H
#define SV_KILLPOINT_H

#include <stdatomic.h>
#include <stdbool.h>

enum sv_kp {
	SV_KP_RECEIVED,	  /* a call is in its slot, nothing done for it yet */
	SV_KP_COMMITTED,  /* a call decided (its change journaled), not answered yet */
	SV_KP_JOURNAL,	  /* a journal record's body written, not its header */
	SV_KP_CHECKPOINT, /* a checkpoint written, not yet the current one */
	SV_KP_NPOINTS
};

extern atomic_bool sv_kp_armed;

/* Arm from spec ("received:40", ...): 0, or -1 if it names no point (nothing armed). */
int sv_kp_arm(const char *spec);
void sv_kp_pass(enum sv_kp p);

static inline void sv_kp(enum sv_kp p)
{
	if (__builtin_expect(atomic_load_explicit(&sv_kp_armed, memory_order_relaxed), 0))
		sv_kp_pass(p);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The RCU flavour the project links (liburcu's memb flavour, -lurcu-memb: <urcu.h> maps the
 * rcu_*() names to urcu_memb_*() unless told otherwise), and the check for the rule "call under
 * rcu_read_lock()".
 *
 * sv_rcu_reader(): is the calling thread inside a read-side critical section? liburcu's
 * rcu_read_ongoing(), exact for the calling thread (0 for a thread that is not registered, which
 * cannot be a reader). sv_rcu_assert_reader() checks it in debug builds (make DEBUG=1) and is
 * nothing otherwise. A rule "holds X or is in RCU" is SV_ASSERT(held(X) || sv_rcu_reader()).
 */
#ifndef SV_RCU_H
#define SV_RCU_H

#include <stdbool.h>

#include <urcu.h>

#include "util/debug.h"

static inline bool sv_rcu_reader(void)
{
	return rcu_read_ongoing() != 0;
}

#define sv_rcu_assert_reader() SV_ASSERT(sv_rcu_reader())

#endif /* SV_RCU_H */

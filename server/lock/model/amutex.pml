/*
 * Promela model of server/lock/amutex.c: the three-state futex mutex, the MCS queue of spinners,
 * hand-over of the head position, and unqueueing from the middle of the queue (steps A, B, C).
 * Checked by `make verify` (see the Makefile next to this file).
 *
 * Each thread locks, runs its critical section and unlocks, forever. Every spin budget is
 * modelled as "may run out at any moment" (a nondeterministic choice), so every possible timing
 * of cancels is explored, including two or three adjacent cancels at once.
 *
 * Granularity: one Promela statement per atomic operation of the C code (load, store, CAS, XCHG).
 * A C loop that only re-reads until something changes is modelled as a blocking guard over the
 * same condition; this is equivalent (the loop's failed rounds change nothing) and lets spin
 * report a wait that can never end as an invalid end state (deadlock).
 *
 * What is checked:
 *  - mutual exclusion (assertion in the critical section);
 *  - the queue stays a coherent chain (assertions, the "ghost" variables inq[] and head[]):
 *    a tail or a link only ever names a queued node, at most one node holds the head position,
 *    the head position is handed only to a queued node waiting right behind the giver, and a
 *    tail reset to empty leaves nobody queued;
 *  - no lost wake-up (monitor process): whenever a thread sleeps, the mutex word is 2 or a
 *    wake-up is on its way;
 *  - no deadlock: no reachable state where every thread waits (spin's invalid end states);
 *  - progress (pan -l -f): under weak fairness, every infinite run passes through a critical
 *    section infinitely often (no livelock, no lost wake-up). Starvation of one thread is
 *    allowed: the mutex is not fair by design.
 *
 * Variants (spin -D...):
 *  NPROC=3|4  threads (default 3)
 *  ROUNDS=n   each thread locks n times, then stops (default: forever); ROUNDS1=m gives thread 1
 *             m rounds instead. Bounding the rounds keeps four threads tractable; three threads
 *             run forever, which also covers nodes that re-enter a queue while old neighbours
 *             may still hold stale links to them. Four queued nodes need a fifth lock attempt
 *             (somebody must hold the mutex while they queue): ROUNDS=1 ROUNDS1=2.
 *  BUG_R1     step B tries the tail once, then waits for next alone (the seed's first version):
 *             race R1, order 3A,4A,3B,4B: 4 moves the tail back to 3 while 3 waits for 3->next,
 *             so 3 (and whoever waits behind it for the mutex) waits forever
 *  BUG_R2     step B re-checks the tail but only reads next, leaving it in place (the seed's
 *             second version): race R2, order 2A,2B,3A,2C,3B,3C: 3's step A still succeeds on
 *             2, both unlinks "succeed" and the chain ends up 1 -> 3 (gone) and 2 (gone) -> 4
 *  BUG_R3     the leaving head reads its next link, then hands over (before the fix found by
 *             Jason Low): race R3, next completes step A in between and the head position goes
 *             to a node that has left
 *  BUG_WAKE   unlock reads the state and then stores 0 (two steps instead of one XCHG): a
 *             classic lost wake-up, to show the bounded runs catch one (a sleeper left asleep
 *             after everybody else has finished is an invalid end state)
 *  WITNESS_R1, WITNESS_R2, WITNESS_R3
 *             the fixed model plus an automaton that watches for the seed's order of events and
 *             fails an assertion (wk != ...) once that order has happened AND the algorithm has
 *             come through it; finding this "error" proves the race is reachable here, and the
 *             plain run proves nothing goes wrong in any interleaving.
 *
 * Node numbering: the seed numbers queue positions (1 = oldest, 4 = tail). Here a thread is
 * node `me` (1..NPROC) whatever its position; the witness automata bind positions to threads as
 * the events happen, and the trail (spin -t) prints the events as "P<me>:<step>".
 */

#ifndef NPROC
#define NPROC 3
#endif

#define N1 (NPROC + 1)

byte state;          /* the mutex word: 0 unlocked, 1 locked, 2 locked + maybe sleepers */
byte tail;           /* 0 or the node at the tail of the spin queue */
byte nxt[N1];        /* node->next */
byte prv[N1];        /* node->prev */
bit locked[N1];      /* node->locked: head position handed over */
bit sleeping[N1];    /* waiting in futex_wait */

/* ghosts */
byte incs;           /* threads inside the critical section */
bit inq[N1];         /* queued: from the XCHG on tail until the node has left */
bit head[N1];        /* holds the head position */
byte nheads;
byte wakers;         /* unlockers that saw 2 and have not called futex_wake yet */
bit woken[N1];       /* woken by futex_wake, not yet back at the XCHG(2) */

/*
 * No lost wake-up, as a state invariant: whenever somebody sleeps, either the word says so (2),
 * or a wake-up is on its way (an unlocker that saw 2, or a woken thread about to write 2).
 */
#define SOMEONE_SLEEPS (sleeping[1] || sleeping[2] || sleeping[3] || sleeping[NPROC])
#define WAKE_COVERED (state == 2 || wakers > 0 || woken[1] || woken[2] || woken[3] || woken[NPROC])

/* ---- witnesses of the seed's races ----------------------------------------------------- */
#define EV_A_TRY   1  /* step A: CAS on prev->next attempted; arg = prev */
#define EV_A_DONE  2  /* step A succeeded; arg = prev */
#define EV_A_HEAD  3  /* step A found the head position handed over; arg = prev */
#define EV_B_BEGIN 4
#define EV_B_TAIL  5  /* step B: moved the tail back; arg = prev */
#define EV_B_NEXT  6  /* step B: took next; arg = next */
#define EV_C_DONE  7  /* step C: unlinked; arg = next */
#define EV_R_TAKE  8  /* head leaving: took next; arg = next */
#define EV_R_GIVE  9  /* head leaving: handed over; arg = next */

byte wk, w1, wx, wy, wz;  /* witness automaton: progress, and the threads bound to positions */
bit race_handled;         /* the seed's order happened and the algorithm came through it */
bit seed_failure;         /* the seed's order happened and ended as the seed reports */
bit nextonly[N1];         /* BUG_R1: waiting in step B for next alone */

#if (defined(BUG_R1) || defined(BUG_R2) || defined(BUG_R3)) && \
    (defined(WITNESS_R1) || defined(WITNESS_R2) || defined(WITNESS_R3))
/* A broken variant run to watch one race: only the witness may stop the search. */
#define CHECK(x) skip
#else
#define CHECK(x) assert(x)
#endif

#if defined(WITNESS_R1) || defined(WITNESS_R2) || defined(WITNESS_R3) || defined(TRACE)
inline ev(e, arg)
{
	d_step {
	if
	:: e == EV_A_TRY -> printf("P%d:A? ", me)
	:: e == EV_A_DONE -> printf("P%d:A ", me)
	:: e == EV_A_HEAD -> printf("P%d:A-head ", me)
	:: e == EV_B_BEGIN -> printf("P%d:B( ", me)
	:: e == EV_B_TAIL -> printf("P%d:B-tail ", me)
	:: e == EV_B_NEXT -> printf("P%d:B-next ", me)
	:: e == EV_C_DONE -> printf("P%d:C ", me)
	:: e == EV_R_TAKE -> printf("P%d:R-take ", me)
	:: e == EV_R_GIVE -> printf("P%d:R-give ", me)
	:: else -> skip
	fi;
#if defined(WITNESS_R1)
	/*
	 * Seed positions 3 = wx, 4 = wy (queued right behind wx). 3A, 4A, 3B begins, 4B moves the
	 * tail back to 3. Fixed: 3B then sees the tail is its own and leaves by it. Seed failure:
	 * 3 waits for 3->next although it is the tail, so nobody will ever set it.
	 */
	if
	:: wk == 0 && e == EV_A_DONE -> wx = me; wk = 1
	:: wk == 1 && e == EV_A_DONE && arg == wx -> wy = me; wk = 2
	:: wk == 2 && e == EV_B_BEGIN && me == wx -> wk = 3
	:: wk == 3 && e == EV_B_TAIL && me == wy ->
		wk = 4;
		seed_failure = (nextonly[wx] && tail == wx && nxt[wx] == 0)
	:: wk == 4 && e == EV_B_TAIL && me == wx -> wk = 5; race_handled = 1
	:: else -> skip
	fi;
#elif defined(WITNESS_R2)
	/*
	 * Seed positions 1 = w1, 2 = wx, 3 = wy, 4 = wz. 2A, 2B takes 3, 3A tries on 2, 2C, 3B
	 * takes 4, 3C. Fixed: 3A fails on 2 (2's next link is 0), 3 retries on its new prev 1
	 * after 2C, and the chain ends 1 <-> 4 with 2 and 3 gone. Seed failure: 3A succeeds on 2,
	 * and the chain ends 1 -> 3 (gone), 2 (gone) <-> 4.
	 */
	if
	:: wk == 0 && e == EV_A_DONE -> w1 = arg; wx = me; wk = 1
	:: wk == 1 && e == EV_B_NEXT && me == wx -> wy = arg; wk = 2
	:: wk == 2 && e == EV_A_TRY && me == wy && arg == wx -> wk = 3
	:: wk == 3 && e == EV_C_DONE && me == wx -> wk = 4
	:: wk == 4 && e == EV_B_NEXT && me == wy -> wz = arg; wk = 5
	:: wk == 5 && e == EV_C_DONE && me == wy ->
		wk = 6;
		race_handled = (nxt[w1] == wz && prv[wz] == w1 && !inq[wx] && !inq[wy]);
		seed_failure = (nxt[w1] == wy && nxt[wx] == wz && prv[wz] == wx)
	:: else -> skip
	fi;
#elif defined(WITNESS_R3)
	/*
	 * Head wx leaves and takes its next link wy; wy, cancelling, tries step A on wx; wx hands
	 * over. Fixed: wy's step A fails and it finds the head position (A-head). Seed failure:
	 * wy's step A succeeded (it has left its place) before wx handed it the head position.
	 */
	if
	:: wk == 0 && e == EV_R_TAKE -> wx = me; wy = arg; wk = 1
	:: wk == 1 && e == EV_A_TRY && me == wy && arg == wx -> wk = 2
	:: wk == 2 && e == EV_A_DONE && me == wy && arg == wx -> wk = 10
	:: wk == 2 && e == EV_R_GIVE && me == wx -> wk = 3
	:: wk == 3 && e == EV_A_HEAD && me == wy -> wk = 4; race_handled = 1
	:: wk == 10 && e == EV_R_GIVE && me == wx -> wk = 11; seed_failure = 1
	:: else -> skip
	fi;
#endif
	assert(!seed_failure);
	assert(!race_handled)
	}
}
#else
#define ev(e, arg) skip
#endif

/* ---- the futex ------------------------------------------------------------------------- */

/* FUTEX_WAKE, 1: wakes one sleeper, any one, if there is one. */
inline futex_wake_one()
{
	if
	:: sleeping[1] -> sleeping[1] = 0; woken[1] = 1
	:: sleeping[2] -> sleeping[2] = 0; woken[2] = 1
	:: sleeping[3] -> sleeping[3] = 0; woken[3] = 1
#if NPROC >= 4
	:: sleeping[4] -> sleeping[4] = 0; woken[4] = 1
#endif
	:: else -> skip
	fi
}

/* ---- the queue ------------------------------------------------------------------------- */

inline take_head()
{
	d_step {
		CHECK(inq[me] && !head[me]);
		CHECK(nheads == 0);
		head[me] = 1;
		nheads++
	}
}

/* Ghost bookkeeping when a node leaves by moving the tail back to @to (0: queue now empty). */
inline leave_by_tail(to)
{
	CHECK(to == 0 || inq[to]);
	inq[me] = 0;
	if
	:: head[me] -> head[me] = 0; nheads--
	:: else -> skip
	fi;
	if
	:: to == 0 ->
		CHECK(nheads == 0 && !inq[1] && !inq[2] && !inq[3]);
#if NPROC >= 4
		CHECK(!inq[4]);
#endif
	:: else -> skip
	fi
}

/*
 * queue_wait_next(): until tail == me (then move it to @to) or next != 0 (then take it).
 * Result in next (0 = moved the tail).
 */
inline wait_next_fixed(to)
{
	if
	:: atomic { tail == me -> tail = to; next = 0; leave_by_tail(to) }
	:: atomic { nxt[me] != 0 -> next = nxt[me]; nxt[me] = 0 }
	fi
}

/* The head leaves the queue (it owns the mutex, or gave up): queue_release(). */
inline queue_release()
{
	if
	:: atomic { tail == me -> tail = 0; leave_by_tail(0) }
	:: else ->
#ifndef BUG_R3
		atomic { next = nxt[me]; nxt[me] = 0 };
		if
		:: next == 0 -> wait_next_fixed(0)
		:: else -> skip
		fi;
#else
		/* the old unlock: loop { CAS tail; next = READ(me->next); if next break } */
		do
		:: atomic { tail == me -> tail = 0; next = 0; leave_by_tail(0) }; break
		:: atomic { nxt[me] != 0 -> next = nxt[me] }; break
		od;
#endif
		if
		:: next != 0 ->
			ev(EV_R_TAKE, next);
			atomic {
				/* the receiver must be queued, waiting right behind us */
				CHECK(inq[next] && !head[next] && prv[next] == me);
				locked[next] = 1;
				head[me] = 0; nheads--; inq[me] = 0
			};
			ev(EV_R_GIVE, next)
		:: else -> skip /* left by the tail */
		fi
	fi;
	next = 0
}

proctype thread(byte me)
{
	byte prev, next, c;
	bit ok;
#ifdef ROUNDS
	byte rounds = 0;
#endif
#ifndef ROUNDS1
#define ROUNDS1 ROUNDS
#endif
#define maxrounds (me == 1 -> ROUNDS1 : ROUNDS)

	do
#ifdef ROUNDS
	:: rounds == maxrounds -> break
	:: rounds < maxrounds -> rounds++;
#else
	::
#endif
		/* ---------------- lock ---------------- */
		/* fast path: CAS 0 -> 1 */
		if
		:: atomic { state == 0 -> state = 1 }; goto acquired
		:: else -> skip
		fi;

		/* budget 0 (never spin) or spin */
		if
		:: goto sleep_phase
		:: skip
		fi;

		/* enqueue */
		d_step { locked[me] = 0 };
		nxt[me] = 0;
		atomic {
			prev = tail; tail = me;
			CHECK(!inq[me]);
			inq[me] = 1;
			CHECK(prev == 0 || inq[prev])
		};
		if
		:: prev == 0 -> take_head(); goto is_head
		:: else -> skip
		fi;
		prv[me] = prev;
		atomic { CHECK(inq[prev]); nxt[prev] = me };

		/* wait for the head position, or run out of budget */
		if
		:: atomic { locked[me] -> take_head() }; goto is_head
		:: goto unqueue
		fi;

unqueue:
		/* Step A: stabilise prev */
		do
		:: ev(EV_A_TRY, prev);
		   atomic {
			if
			:: nxt[prev] == me -> nxt[prev] = 0; ok = 1
			:: else -> ok = 0
			fi
		   };
		   if
		   :: ok -> ev(EV_A_DONE, prev); break
		   :: else ->
			if
			:: atomic { locked[me] -> take_head() };
			   ev(EV_A_HEAD, prev);
			   /* the head position arrived: one look at the mutex, then leave as head */
			   if
			   :: atomic { state == 0 -> state = 1 }; queue_release(); goto acquired
			   :: else -> queue_release(); goto sleep_phase
			   fi
			:: else -> prev = prv[me]
			fi
		   fi
		od;
		ok = 0;

		/* Step B: stabilise next */
		ev(EV_B_BEGIN, 0);
#if !defined(BUG_R1) && !defined(BUG_R2)
		wait_next_fixed(prev);
#else
		if
		:: atomic { tail == me -> tail = prev; next = 0; leave_by_tail(prev) }
#ifdef BUG_R1
		:: else ->	/* tail tried once; from now on wait for next alone */
			nextonly[me] = 1;
#else
		::		/* both conditions, every round */
#endif
			atomic {
				nxt[me] != 0 -> next = nxt[me];
#ifndef BUG_R2
				nxt[me] = 0;	/* taken */
#endif
				nextonly[me] = 0
			}
		fi;
#endif
		if
		:: next == 0 ->
			ev(EV_B_TAIL, prev);
			prev = 0;
			goto sleep_phase
		:: else -> ev(EV_B_NEXT, next)
		fi;

		/* Step C: unlink */
		prv[next] = prev;
		atomic {
			CHECK(inq[prev] && inq[next]);
			nxt[prev] = next;
			inq[me] = 0
		};
		ev(EV_C_DONE, next);
		prev = 0; next = 0;
		goto sleep_phase;

is_head:
		/* spin on the mutex word, or give up */
		if
		:: atomic { state == 0 -> state = 1 }; queue_release(); goto acquired
		:: queue_release(); goto sleep_phase
		fi;

sleep_phase:
		prev = 0;
		/* one more CAS 0 -> 1, as on the fast path */
		if
		:: atomic { state == 0 -> state = 1 }; goto acquired
		:: else -> skip
		fi;
		atomic { c = state; state = 2 };
		do
		:: c == 0 -> break
		:: else ->
			/* futex_wait(&state, 2): sleep only if the word is still 2 */
			atomic {
				if
				:: state == 2 -> sleeping[me] = 1
				:: else -> skip
				fi
			};
			!sleeping[me];
			atomic { c = state; state = 2; woken[me] = 0 }
		od;

acquired:
		/* ---------------- critical section ---------------- */
		atomic { incs++; CHECK(incs == 1); ok = 0; c = 0; prev = 0 };
progress:
		atomic { incs-- };

		/* ---------------- unlock ---------------- */
#ifdef BUG_WAKE
		c = state;	/* look, then release: a sleeper arriving in between is never woken */
		atomic { state = 0; wakers = wakers + (c == 2 -> 1 : 0) };
#else
		atomic { c = state; state = 0; wakers = wakers + (c == 2 -> 1 : 0) };
#endif
		if
		:: c == 2 -> atomic { futex_wake_one(); wakers-- }
		:: c == 1 -> skip
		:: else -> CHECK(false)
		fi;
		c = 0
	od
}

/* Watches the no-lost-wake-up invariant in every state. */
proctype monitor()
{
end:	atomic { !(!SOMEONE_SLEEPS || WAKE_COVERED) -> CHECK(!SOMEONE_SLEEPS || WAKE_COVERED) }
}

init
{
	byte i = 1;

	atomic {
		run monitor();	/* first: a process can only end after those started after it */
		do
		:: i <= NPROC -> run thread(i); i++
		:: else -> break
		od
	};
#ifdef ROUNDS
	/* Everybody finished: the mutex is free and the spin queue empty, no node lost in it. */
	_nr_pr == 2;
	CHECK(state == 0 && tail == 0 && nheads == 0 && !SOMEONE_SLEEPS);
	CHECK(!inq[1] && !inq[2] && !inq[3] && !inq[NPROC])
#endif
}

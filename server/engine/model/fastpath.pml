/*
 * The fast path's protocol, and its Promela model. Checked by `make verify` (see the Makefile
 * next to this file).
 *
 * The fast path lets a program change a semaphore's value without a trapped call, with atomic
 * operations on memory it shares with the supervisor. It enters the trapped call only to wait,
 * to wake a waiter, or when the supervisor holds the semaphore. This file is the protocol's
 * specification. The code that implements it must follow it step for step. The steps in C, for
 * both sides, are in server/engine/fastword.h. tests/25-engine-stress-fastword.c checks them
 * with threads and with a stop before each step.
 *
 * MEMORY
 *   Storage of a set: one 64-bit word per semaphore. Every process given fast access to the
 *   set maps it, writable.
 *       val    the value, while the supervisor does not hold the word
 *       SLOW   the supervisor holds the word: its val is stale, and no fast operation may change it
 *       own    0, or (process page, pending slot) of the fast operation that holds the word (BUSY)
 *       count  fast operations since the supervisor gave the word, for statistics only: A5
 *              adds one, each take reads it, give sets 0, and a full count is A1's failure.
 *              It decides nothing, so the model leaves it out
 *   Published: what the supervisor says about the set, in a sealed memfd that every process
 *   with fast access maps read-only, so that none can forge it. Written by the supervisor
 *   only while it holds the word concerned, so stable while a fast operation holds it.
 *       gen[i]     the SETVAL generation of semaphore i
 *       tag[i]     the private page of the process that is semaphore i's sempid, or none
 *       otime      the set's sem_otime, which only moves forward
 *   Private page: one per (process, set), shared only by the process's threads and the
 *   supervisor. A process that shares its undo list with another process (CLONE_SYSVSEM
 *   without CLONE_THREAD) gets none: a page, its tag and a sempid name one process.
 *       entry[i]   {gen, adj}: the semadj of semaphore i that fast operations made. It counts
 *                  only while its gen is gen[i]. An older gen counts as 0, so SETVAL clears
 *                  every process's entry by bumping one number.
 *       copy[i]    {gen, adj}: a copy of the supervisor's undo list's semadj of semaphore i,
 *                  for A2's range check only. The supervisor writes it while it holds word i,
 *                  each time it changes the list, and never reads it back.
 *       pending[k] one per thread: {seq, i, gen, adj}. An odd seq means valid: semaphore i's
 *                  entry before the thread's operation on it, in flight. (One 64-bit word:
 *                  seq 8 bits, i 16, gen 24, adj 16.)
 *       epoch      bumped by the supervisor each time it moves the set's storage
 *   The supervisor keeps its own undo list for the semadj of slow operations (the engine's, as
 *   today). A process's semadj is that list's value plus its valid entry.
 *
 * A FAST OPERATION by thread k of process X: sem_op d on semaphore i, with or without SEM_UNDO
 *   A1  CAS word: {v, !SLOW, own 0} -> {v, own (X,k)}, only if v + d is in [0, SEMVMX].
 *       A word owned by another thread is retried a bounded number of times (its owner is
 *       tens of nanoseconds from A5, and the trapped call would doom its operation); any
 *       other failure -> the trapped call
 *   E1  read epoch; if it is not the epoch of this mapping -> abandon (that storage is no
 *       longer read, so the word needs no release)
 *   A2  read gen[i], tag[i], otime, entry[i] and copy[i]: all stable while the word is held
 *       (only the holder of word i writes entry[i]), but otime, which only grows. Release the
 *       word (own 0, value unchanged) and make the trapped call if the operation would change
 *       more than the value and the semadj: if tag[i] is not this process's page (sempid
 *       changes) or the time now, read with the coarse real-time clock, is past otime
 *       (otime changes). The same if the semadj, copy[i] + entry[i] - d, leaves
 *       [-SEMAEM - 1, SEMAEM] (the call answers ERANGE), or the entry's part leaves its 16
 *       bits (the call applies it to the undo list)
 *   A3  pending[k] = {seq odd, i, entry}                        (one store)
 *   A4  entry[i] = {gen[i], entry's semadj - d}                 (one store)
 *   A5  CAS word: {v, !SLOW, own (X,k)} -> {v + d, own 0, count + 1}: the operation's
 *       linearization point
 *   E2  read epoch; if it changed, ask the supervisor (a trapped call) whether A5 counted
 *   A6  pending[k].seq++ (even): done
 *   If A5 fails, or E1 or the answer to E2 says abandon, the operation did not happen. Restore
 *   entry[i] from pending[k], make pending[k] even, then make the trapped call. That call is
 *   the moment the supervisor may consider the operation resolved. The question of E2 is not:
 *   it comes before the restore.
 *   An operation without SEM_UNDO leaves out A2's semadj part, A3, A4 and the restore.
 *
 * WAITING FIRST (fastlib.c's wait_here()). A decrement that found no value (or was sent to the
 *   trapped call) and may wait does not make its call at once: a bounded number of times,
 *   it reads the word (one load: value only, held or not), and if the value would let it
 *   through it makes a probe, the trapped call with IPC_NOWAIT, which the supervisor serves
 *   as the call but answers AGAIN where the call would park; otherwise it lets time pass.
 *   Then it tries the fast operation again from A1. When the tries are spent it makes its
 *   call. A probe is the thread's call: it resolves a doomed operation as any call does,
 *   since the operation it follows is over (done or restored) when it is made.
 *
 * THE SUPERVISOR, on word i, under the set's lock
 *   take    fetch_or(SLOW). Its old value gives val and own. If own names (X,k) of a live
 *           process, that operation is DOOMED: its A5 must fail now. (An owner naming no live
 *           process is a program's forgery: nothing would ever end it, so it is ignored.) The supervisor notes it and keeps the
 *           word until X's thread k makes a trapped call (other than E2's question), or X
 *           exits.
 *   give    publish gen[i] and tag[i] (and otime), then one store {val, !SLOW, own 0}, only
 *           when no parked operation names the semaphore and no doomed operation is
 *           unresolved. While a waiter is parked every operation on the semaphore goes to the
 *           supervisor, which does the wake-up. An operation of several sops names each of
 *           its semaphores: a change to any of them may let it through, so none is given.
 *   copy    each change of a process's undo list's semadj of semaphore i is written to its
 *           page's copy[i], under the word (a new page gets all of them before it is handed
 *           out).
 *   SETVAL  take, set the value, gen++, clear the slow semadj of every undo list, give.
 *           gen has 24 bits and wraps, so each bump also refreshes one page in turn: its
 *           entry[i] and copy[i] of an older gen (which count as 0) become 0 of this gen.
 *           No entry is then older than the number of pages in generations, and none can
 *           count again when gen comes back to its number.
 *   exit    of the last process of an undo list: take (which marks the operation doomed if
 *           the word still shows own (X,k)). For each valid pending[k] that names i: if its
 *           operation is doomed, it never happened, so restore the entry from it. Otherwise A5
 *           came first, and the entry is right. Then apply semadj (the slow list plus the
 *           valid entry), wake, give. A tag[i] that names the page is published as none
 *           before the page's index is given to another process.
 *   revoke  (IPC_SET that takes away a process's alter permission, IPC_RMID) bump the epoch
 *           of every private page of the set, take, freeze the private page of each process
 *           that lost access (below), and move the set to new storage. The old storage is
 *           never read again, so whatever is written there changes nothing. Only an answer to
 *           a caller that may alter the set hands out the new storage. A call parked before
 *           the revocation still completes, as natively (permission is checked when a call is
 *           made), but its answer maps nothing.
 *           A supervisor that hands its state to a successor first revokes every process's
 *           access to every set, which folds every private page into its undo lists: no
 *           program keeps writing storage the successor does not read, and the state it hands
 *           over holds every semadj.
 *   freeze  reads a live process's entry once: s0 = seq, e = entry, s1 = seq. If the
 *           process's operation is doomed, an odd s1 gives pending's entry, an even s1 == s0
 *           gives e, and a changed even s1 means the restore is done, so it reads the entry
 *           again. Otherwise e is stable: no operation of the process can hold the word. The
 *           result goes into the supervisor's undo list, and the page is not read again.
 *
 * WHY EACH STEP
 *   - A1 before A2: a thread reads its entry only while it holds the word. So no other thread,
 *     and not the supervisor, changes the entry between that read and A4.
 *   - A3 before A4: a kill after A4 would leave an entry no one could undo.
 *   - A4 before A5: once A5 happens, the value and semadj are both changed. A kill before A5 is
 *     undone from pending. A kill after it needs nothing.
 *   - Resolution only at the thread's own call: between A1 and A3 a doomed thread's pending
 *     record is still even. A supervisor that took "even" for "resolved" would give the word
 *     back. It would then count the operation as done if the thread is killed after A4.
 *     (BUG_PEEK shows the lost value.)
 *   - The word stays held while a doomed operation is unresolved. Otherwise another thread of
 *     the same process could take the word and commit to the same entry, and the doomed
 *     thread's restore would then overwrite it. (BUG_DOOMED)
 *   - E1 and E2: a process that lost access still maps the old storage and can write anything
 *     there, including a word that looks free. The epoch is in the private page, where it
 *     cannot. The supervisor bumps it before its take. So E1 == mapping epoch means A1 came
 *     before the take: the take saw own (X,k) and marked the operation doomed, unless A5 came
 *     first. An unchanged E2 means A5 came before the take and counted. If E2 changed, only
 *     the supervisor's doomed mark can tell. (BUG_EPOCH shows the lost value.)
 *   - A fast operation changes only what the kernel's would change and nothing a reader sees
 *     besides the value: sempid and otime stay exactly as the supervisor keeps them, because
 *     an operation that would change them is the supervisor's (A2). So readers (GETPID,
 *     IPC_STAT) need not look at the storage, and a process's first operation after another
 *     process's, or in a new second, costs one trapped call. The clock is read while the
 *     word is held, as the kernel reads it while it holds the semaphore's lock.
 *   - The ERANGE check needs the whole semadj, and part of it is in the supervisor's list:
 *     hence copy[i]. A copy that a program overwrote misleads only its own range checks.
 *   - Published facts are read-only to programs: a forged tag or otime would let one process
 *     hide another's operations from sempid and otime, which no system call can do.
 *   - What a process that can write the storage can do with it: set any value, corrupt its own
 *     semadj, make others' fast operations fail, or make one vanish (a forged word with SLOW
 *     clear while the supervisor holds it). A forged owner naming a live thread keeps the
 *     word held until that thread's next call or exit: the fast path is lost meanwhile, not
 *     the semantics. Another process's semadj is out of its reach: it lives in that
 *     process's page, and its entry changes only with that process's own A5. With alter permission it could do the same with
 *     SETVAL. Everything the supervisor reads from shared memory is clamped (value to SEMVMX)
 *     or range-checked (slots, semadj entries are 16 bits). It never waits for a word to
 *     change, and never loops on one more than a fixed number of times.
 *   - Mappings are not inherited: the library maps with MADV_DONTFORK, so a child (which has
 *     no undo list of its own yet) never writes its parent's page; exec drops them anyway.
 *
 * THE MODEL
 *   One semaphore, starting at 1, used as a lock with SEM_UNDO: each thread locks (-1) and
 *   unlocks (+1) ROUNDS times, fast path first. Processes 1 and 2 have one thread each, or
 *   with THREADS process 1 has two, which share its private page and undo list. The
 *   supervisor is one process: the set's lock serializes it. Between any two steps of a
 *   thread, KILLS kills may happen in total, and also in a call, parked or not. A kill stops
 *   every thread of the process before its next step. The supervisor can take and give the
 *   word for an unmodelled caller (TOUCHES), or run SETVAL to 1 (SETVALS).
 *   REVOKE: the supervisor may at any moment take away process 2's alter permission. Once
 *   process 2 has lost it, and has finished its rounds or had a call refused, it writes
 *   anything into the storage it maps and into its private page (SCRIBBLES times).
 *   Checked:
 *    - conservation. When every process has exited and its undo has been applied, the value
 *      is what it started at, or what SETVAL set. An exit never needs clamping, so nothing is
 *      lost or made up, whatever kill and whichever scribbles;
 *    - mutual exclusion, where nothing but the threads' own operations sets the value (no
 *      SETVAL, no scribbles): a thread that returned from its -1 is alone until it makes its
 *      +1, or until its process's exit gave the unit back. Conservation alone does not see a
 *      lock taken twice: SEM_UNDO gives the made-up unit back at the exit;
 *    - no lost wake-up (a monitor): whenever the supervisor is between operations, a parked
 *      call waits on a word the supervisor holds, for a value that does not let it through;
 *    - no hang: a call never answered, or a supervisor waiting on memory, is an invalid end
 *      state. The supervisor's statements never wait on shared memory;
 *    - with REVOKE: whatever process 2 writes after losing access changes nothing;
 *    - with SEMPID: sempid is kept by the supervisor and published as tag; a fast operation
 *      goes ahead only on its own process's tag. A monitor checks that whenever the
 *      supervisor is between operations, its sempid names the process whose operation came
 *      last (a ghost set at each linearization point: A5, a served or woken call, an exit
 *      that applies a semadj, SETVAL).
 *   Not modelled: several semaphores and sops (fast operations are one sop on one semaphore;
 *   the others go to the supervisor), semadj ranges (ERANGE: copy[i] is written and read
 *   under the word, like entry[i]; tests/25 checks the edges against the kernel's rule), and
 *   otime, which the same gate as sempid keeps (a monotonic value instead of a tag).
 *
 * Variants (spin -D...), each expected to fail:
 *  BUG_NOPENDING   no pending record (A3): a kill between A4 and A5 leaves an entry for an
 *                  operation that never happened
 *  BUG_PEEK        the take treats an even pending record as "no operation in flight"
 *  BUG_NOGEN       SETVAL does not bump gen: entries made before it still count
 *  BUG_PARKED      give ignores parked waiters: an unlock on the fast path wakes nobody
 *  BUG_DOOMED      give ignores a doomed operation (with THREADS): the other thread of its
 *                  process takes the word, commits, and the doomed one's restore overwrites it
 *  BUG_FREEZE      freeze reads the entry alone, not pending (with REVOKE)
 *  BUG_NOMOVE      revoke does not move the storage (with REVOKE)
 *  BUG_EPOCH       no E1/E2: a fast operation on the old storage counts as done (with REVOKE)
 *  BUG_NOTAG       A2 ignores tag (with SEMPID): a fast operation leaves sempid naming another
 *  BUG_PROBEOK     the waiting takes a probe answered AGAIN for done (with WAITS): a lock it
 *                  never had is unlocked, a unit made up
 *
 * WAITS (default 0): the tries of WAITING FIRST, for each decrement.
 */

#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef KILLS
#define KILLS 1
#endif
#ifndef TOUCHES
#define TOUCHES 1
#endif
#ifndef SETVALS
#define SETVALS 0
#endif
#ifndef SCRIBBLES
#define SCRIBBLES 2
#endif
#ifndef WAITS
#define WAITS 0
#endif
#ifdef REVOKE
#define REVOKES 1
#else
#define REVOKES 0
#endif

/*
 * Threads are numbered 1..NT; PROC(t) is thread t's process. With THREADS, process 1 has
 * threads 1 and 2, which share its undo list, and process 2 has thread 3.
 */
#ifdef THREADS
#define NT 3
#define PROC(t) (t <= 2 -> 1 : 2)
#define T2 3
#else
#define NT 2
#define PROC(t) (t)
#define T2 2
#endif

#define SEMVMX 3

/* SEMPID: who operated last, kept by the supervisor and by a ghost, and compared by a monitor. */
#ifdef SEMPID
#define OPERATED(q) e_pid = q; last_pid = q
#define FAST_OPERATED(q) last_pid = q
#else
#define OPERATED(q) skip
#define FAST_OPERATED(q) skip
#endif

/* Storage: index 0 is the set's first, 1 where a revocation moves it. */
byte w_val[2];
bit w_slow[2];
byte w_own[2];       /* 0, or the thread whose fast operation holds the word */
/* What the supervisor publishes with each storage, read-only to the processes. */
byte pub_gen[2];
byte pub_tag[2];     /* SEMPID: the process that is sempid, 0 for none */

/* Private pages, one per process (index 0 unused); the pending records, one per thread. */
byte u_gen[3];
short u_adj[3];
byte epoch[3];
byte p_seq[NT + 1];
byte p_gen[NT + 1];
short p_adj[NT + 1];

/* The supervisor's own state. */
byte cur;            /* the live storage */
bit held;            /* it holds the live word */
byte e_val;          /* the value while it holds the word */
byte e_gen;
byte e_pid;          /* sempid: a process, 3 for an unmodelled caller, 0 for none yet */
short e_adj[3];      /* semadj of slow operations, and of a frozen private page */
bit frozen[3];       /* the private page is not read any more */
bit access[3];
bit doomed[NT + 1];  /* the take found this thread's fast operation holding the word */
short parked[NT + 1];/* 0, or the sem_op of a parked call */

/* Calls, per thread; lives, per process. */
short req[NT + 1];   /* 0, or the sem_op of a trapped semop; ASK: "did my A5 count?" */
bit probe[NT + 1];   /* the trapped semop is a probe (IPC_NOWAIT) */
byte ans[NT + 1];    /* 0 none yet, DONE, REFUSED (EACCES), COUNTED, NOT_COUNTED, AGAIN */
bit killed[3];       /* SIGKILL: every thread of the process stops before its next step */
byte fin[3];         /* threads of the process that have stopped */
bit reaped[3];
byte map[3];         /* the storage a process has mapped */
byte mapepoch[3];    /* the epoch of its mapping */

#define NTHREADS(q) (NT == 3 && q == 1 -> 2 : 1)
#define DEAD(q) (fin[q] == NTHREADS(q))

#define ASK 9
#define DONE 1
#define REFUSED 2
#define COUNTED 3
#define NOT_COUNTED 4
#define AGAIN 5

/* ghosts */
byte C = 1;          /* the value every semadj adds up to: the start, or the last SETVAL */
byte last_pid;       /* the process whose operation on the semaphore came last */
bit busy;            /* the supervisor is in the middle of an operation (holds the set's lock) */
byte kills;
byte final_value;
bit in_cs[NT + 1];   /* the thread's -1 returned and its +1 has not begun */
byte inside;         /* how many threads are in_cs */

#if SETVALS == 0 && !defined(REVOKE)
#define MUTEX_CHECK assert(inside <= 1)
#else
#define MUTEX_CHECK skip
#endif

/* ---- processes -------------------------------------------------------------------------- */

/* A kill here stops every thread of the process at once (the unless of `thread`). */
inline maybe_die()
{
	if
	:: kills < KILLS -> kills++; killed[p] = 1
	:: true -> skip
	fi
}

/* The trapped call. Ends in `c`; REFUSED sends the thread to its scribbling. */
inline call(d)
{
	req[t] = d;
	if
	:: ans[t] != 0 -> c = ans[t]; ans[t] = 0
	:: kills < KILLS -> kills++; killed[p] = 1
	fi;
	if
	:: c == REFUSED -> goto hostile
	:: else -> skip
	fi
}

inline restore()
{
	d_step { u_gen[p] = o_gen; u_adj[p] = o_adj };
	maybe_die();
	p_seq[t]++
}

/* The fast operation: ok when done, else !ok and nothing done (the call's to make). */
inline fast_op(d)
{
	m = map[p];
	/* A1 */
	atomic {
		if
		:: !w_slow[m] && w_own[m] == 0 && w_val[m] + d >= 0 && w_val[m] + d <= SEMVMX ->
			w_own[m] = t; ok = 1
		:: else -> ok = 0
		fi
	};
	if
	:: ok -> maybe_die()
	:: else -> skip
	fi;
#ifndef BUG_EPOCH
	/* E1: abandoned before anything is written */
	if
	:: ok && epoch[p] != mapepoch[p] -> ok = 0; g = 0
	:: else -> skip
	fi;
#endif
#if defined(SEMPID) && !defined(BUG_NOTAG)
	/* A2, first part: an operation that would change sempid is the supervisor's */
	if
	:: ok && pub_tag[m] != p ->
		atomic {
			if
			:: !w_slow[m] && w_own[m] == t -> w_own[m] = 0
			:: else -> skip
			fi
		};
		ok = 0
	:: else -> skip
	fi;
#endif
	if
	:: ok ->
		/* A2: stable while the word is held */
		d_step { g = pub_gen[m]; o_gen = u_gen[p]; o_adj = u_adj[p] };
		maybe_die();
#ifndef BUG_NOPENDING
		/* A3 */
		d_step { p_gen[t] = o_gen; p_adj[t] = o_adj; p_seq[t]++ };
		maybe_die();
#endif
		/* A4 */
		d_step { u_gen[p] = g; u_adj[p] = (o_gen == g -> o_adj : 0) - d };
		maybe_die();
		/* A5 */
		atomic {
			if
			:: !w_slow[m] && w_own[m] == t ->
				w_val[m] = w_val[m] + d; w_own[m] = 0; FAST_OPERATED(p); ok = 1
			:: else -> ok = 0
			fi
		};
		maybe_die();
#ifndef BUG_EPOCH
		/* E2 */
		if
		:: ok && epoch[p] != mapepoch[p] ->
			call(ASK);
			ok = (c == COUNTED)
		:: else -> skip
		fi;
#endif
		if
		:: ok ->
#ifndef BUG_NOPENDING
			p_seq[t]++	/* A6 */
#else
			skip
#endif
		:: else ->
#ifndef BUG_NOPENDING
			restore()
#else
			d_step { u_gen[p] = o_gen; u_adj[p] = o_adj }
#endif
		fi
	:: else -> skip
	fi
}

inline sem_op(d)
{
	fast_op(d);
	/* WAITING FIRST: tries before the call, for a decrement */
	w = 0;
	do
	:: !ok && d < 0 && w < WAITS ->
		w++;
		if
		:: w_val[map[p]] + d >= 0 ->
			probe[t] = 1;
			call(d);
			probe[t] = 0;
#ifndef BUG_PROBEOK
			ok = (c == DONE)
#else
			ok = (c == DONE || c == AGAIN)
#endif
		:: else -> skip
		fi;
		if
		:: !ok -> d_step { c = 0; g = 0; o_gen = 0; o_adj = 0 }; fast_op(d)
		:: else -> skip
		fi
	:: else -> break
	od;
	if
	:: !ok -> call(d)
	:: else -> skip
	fi;
	d_step { ok = 0; c = 0; g = 0; o_gen = 0; o_adj = 0; w = 0 }
}

proctype thread(byte t)
{
	byte p = PROC(t);
	byte m, g, o_gen, c, r, w;
	short o_adj;
	bit ok;

	{
		do
		:: r < ROUNDS ->
			sem_op(-1);
			d_step { in_cs[t] = 1; inside++; MUTEX_CHECK };
			d_step { in_cs[t] = 0; inside-- };
			sem_op(1);
			r++
		:: else -> break
		od;
hostile:
#ifdef REVOKE
		/* Lost access (or finished): from now on it writes anything where it can. */
		r = 0;
		do
		:: p == 2 && !access[p] && r < SCRIBBLES ->
			r++;
			atomic {
				m = map[p];
				if :: w_val[m] = 0 :: w_val[m] = SEMVMX fi;
				if :: w_slow[m] = 0 :: w_slow[m] = 1 fi;
				if :: w_own[m] = 0 :: w_own[m] = 1 :: w_own[m] = NT fi;
				if :: u_gen[p] = pub_gen[m] :: skip fi;
				if :: u_adj[p] = -SEMVMX :: u_adj[p] = SEMVMX fi;
				if :: p_seq[t] = 0 :: p_seq[t] = 1 fi;
				if :: p_adj[t] = -SEMVMX :: p_adj[t] = SEMVMX fi
			}
		:: true -> break
		od;
#endif
		skip
	} unless { killed[p] };
	fin[p]++
}

/* ---- the supervisor ----------------------------------------------------------------------- */

inline take()
{
	if
	:: !held ->
		atomic {
			w_slow[cur] = 1;
			e_val = (w_val[cur] > SEMVMX -> SEMVMX : w_val[cur]);
			if
#ifdef BUG_PEEK
			:: w_own[cur] >= 1 && w_own[cur] <= NT && (p_seq[w_own[cur]] & 1) ->
#else
			:: w_own[cur] >= 1 && w_own[cur] <= NT ->
#endif
				doomed[w_own[cur]] = 1
			:: else -> skip
			fi
		};
		held = 1
	:: else -> skip
	fi
}

#ifdef THREADS
#define NONE_DOOMED (!doomed[1] && !doomed[2] && !doomed[3])
#define NONE_PARKED (parked[1] == 0 && parked[2] == 0 && parked[3] == 0)
#else
#define NONE_DOOMED (!doomed[1] && !doomed[2])
#define NONE_PARKED (parked[1] == 0 && parked[2] == 0)
#endif

inline give()
{
	if
#if defined(BUG_PARKED)
	:: held && NONE_DOOMED ->
#elif defined(BUG_DOOMED)
	:: held && NONE_PARKED ->
#else
	:: held && NONE_DOOMED && NONE_PARKED ->
#endif
		atomic {
			pub_gen[cur] = e_gen; pub_tag[cur] = e_pid;
			w_val[cur] = e_val; w_own[cur] = 0; w_slow[cur] = 0
		};
		held = 0
	:: else -> skip
	fi
}

/*
 * An answer carries the live storage to a caller that may alter the set. A call parked before a
 * revocation still completes, as natively (the permission is checked when the call is made), but
 * its answer gives no new mapping to a process that has lost access.
 */
inline remap(q)
{
	if
	:: access[q] -> map[q] = cur; mapepoch[q] = epoch[q]
	:: else -> skip
	fi
}

inline wake_one(u)
{
	if
	:: parked[u] != 0 && e_val + parked[u] >= 0 ->
		e_val = e_val + parked[u]; e_adj[PROC(u)] = e_adj[PROC(u)] - parked[u]; parked[u] = 0;
		OPERATED(PROC(u));
		remap(PROC(u));
		ans[u] = DONE
	:: else -> skip
	fi
}

inline wake()
{
	wake_one(1);
	wake_one(2);
#ifdef THREADS
	wake_one(3)
#else
	skip
#endif
}

inline serve(u)
{
	d = req[u];
	req[u] = 0;
	take();
	/*
	 * Any other call of thread u comes after its fast operation is over (done or restored).
	 * ASK comes before the restore: the mark stays until the next call, or the exit.
	 */
	if
	:: d == ASK ->
		/* Only a doomed operation can have done its A5 after the take, on a forged word. */
		ans[u] = (doomed[u] -> NOT_COUNTED : COUNTED)
	:: else -> doomed[u] = 0
	fi;
	if
	:: d == ASK -> skip
	:: d != ASK && !access[PROC(u)] -> ans[u] = REFUSED
	:: d != ASK && access[PROC(u)] && e_val + d >= 0 && e_val + d <= SEMVMX ->
		e_val = e_val + d; e_adj[PROC(u)] = e_adj[PROC(u)] - d;
		OPERATED(PROC(u));
		remap(PROC(u));
		ans[u] = DONE
	:: else ->
		if
		:: probe[u] -> ans[u] = AGAIN	/* IPC_NOWAIT: changes nothing */
		:: else -> parked[u] = d
		fi
	fi;
	wake();
	give();
	d = 0
}

/* The semadj of process 2's private page, read once (see "freeze" above). */
inline freeze()
{
	d_step { s0 = p_seq[T2]; f_gen = u_gen[2]; f_adj = u_adj[2] };
	if
	:: doomed[T2] ->
		atomic {
			s1 = p_seq[T2];
			if
#ifndef BUG_FREEZE
			:: s1 & 1 -> f_gen = p_gen[T2]; f_adj = p_adj[T2]
			:: !(s1 & 1) && s1 != s0 -> f_gen = u_gen[2]; f_adj = u_adj[2]
#endif
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	e_adj[2] = e_adj[2] + (f_gen == e_gen -> f_adj : 0);
	frozen[2] = 1;
	s0 = 0; s1 = 0; f_gen = 0; f_adj = 0
}

inline revoke()
{
	epoch[1]++;
	epoch[2]++;
	take();
	freeze();
	access[2] = 0;
#ifndef BUG_NOMOVE
	atomic { cur = 1; w_val[1] = e_val; w_own[1] = 0; w_slow[1] = 1 };
#endif
	give()
}

/* Thread u of a dead process: its call goes, and its operation in flight, if doomed, never happened. */
inline reap_thread(u)
{
	if
	:: in_cs[u] -> in_cs[u] = 0; inside--	/* killed holding the lock: its undo gives it back */
	:: else -> skip
	fi;
	req[u] = 0;
	parked[u] = 0;
	if
	:: (p_seq[u] & 1) && doomed[u] -> f_gen = p_gen[u]; f_adj = p_adj[u]
	:: else -> skip
	fi;
	doomed[u] = 0
}

inline reap(q)
{
	take();
	d_step { f_gen = u_gen[q]; f_adj = u_adj[q] };
	if
	:: q == 1 ->
		reap_thread(1);
#ifdef THREADS
		reap_thread(2)
#else
		skip
#endif
	:: else -> reap_thread(T2)
	fi;
	if
	:: !frozen[q] -> e_adj[q] = e_adj[q] + (f_gen == e_gen -> f_adj : 0)
	:: else -> skip
	fi;
	/* Conservation: applying the semadj never needs clamping. */
	assert(e_val + e_adj[q] >= 0 && e_val + e_adj[q] <= SEMVMX);
	e_val = e_val + e_adj[q];
	if
	:: e_adj[q] != 0 -> OPERATED(q)	/* exit_sem() sets sempid */
	:: else -> skip
	fi;
	e_adj[q] = 0;
	wake();
	give();
	reaped[q] = 1;
	f_gen = 0; f_adj = 0
}

proctype supervisor()
{
	byte touches, setvals, revokes, s0, s1, f_gen;
	short d, f_adj;

	do
	:: req[1] != 0 -> busy = 1; serve(1); busy = 0
	:: req[2] != 0 -> busy = 1; serve(2); busy = 0
#ifdef THREADS
	:: req[3] != 0 -> busy = 1; serve(3); busy = 0
#endif
	:: DEAD(1) && !reaped[1] -> busy = 1; reap(1); busy = 0
	:: DEAD(2) && !reaped[2] -> busy = 1; reap(2); busy = 0
	:: touches < TOUCHES -> touches++; take(); give()
	:: setvals < SETVALS ->
		setvals++;
		busy = 1;
		take();
#ifndef BUG_NOGEN
		e_gen++;
#endif
		e_val = 1; e_adj[1] = 0; e_adj[2] = 0; C = 1;
		OPERATED(3);
		wake();
		give();
		busy = 0
	:: revokes < REVOKES -> revokes++; busy = 1; revoke(); busy = 0
	:: reaped[1] && reaped[2] -> break
	od;
	final_value = (held -> e_val : w_val[cur]);
	assert(final_value == C)
}

/*
 * No lost wake-up, as a state invariant checked whenever the supervisor is between operations:
 * a parked call waits on a word the supervisor holds (so every operation on the semaphore
 * comes to it), for a value that does not let it through yet.
 */
#define WAITS_RIGHT(u) (parked[u] == 0 || (held && e_val + parked[u] < 0))
#ifdef THREADS
#define ALL_WAIT_RIGHT (WAITS_RIGHT(1) && WAITS_RIGHT(2) && WAITS_RIGHT(3))
#else
#define ALL_WAIT_RIGHT (WAITS_RIGHT(1) && WAITS_RIGHT(2))
#endif

proctype monitor()
{
end:	atomic { !busy && !ALL_WAIT_RIGHT -> assert(ALL_WAIT_RIGHT) }
}

/* sempid: whenever the supervisor is between operations, it names the last operator. */
proctype pid_monitor()
{
end:	atomic { !busy && last_pid != e_pid -> assert(last_pid == e_pid) }
}

init
{
	byte u = 1;

	atomic {
		run monitor();
#ifdef SEMPID
		run pid_monitor();
#endif
		w_val[0] = 1;
		access[1] = 1;
		access[2] = 1;
		run supervisor();
		do
		:: u <= NT -> run thread(u); u++
		:: else -> break
		od
	}
}

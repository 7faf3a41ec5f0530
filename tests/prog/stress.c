/* SPDX-License-Identifier: MIT */
/*
 * Stress: worker processes with 2-4 threads each do random operations on the four semaphores of
 * one set (initial total TOTAL units) while the parent kills random workers with SIGKILL (and
 * replaces them), stops and continues others, and interrupts others with signals handled with
 * or without SA_RESTART. At the end every worker is gone and the conservation invariant must
 * hold: the values add up to TOTAL again, and nobody sleeps.
 *
 * Why the bookkeeping is exact whatever instant a kill hits: no unit is ever in a worker's
 * hands except through SEM_UNDO, which the kernel gives back when the process dies.
 *   - takes are SEM_UNDO decrements (one or two semaphores at once); a thread remembers what it
 *     took only after semop returned 0, and gives back (SEM_UNDO increments) only what it
 *     remembers, so a process's semadj is never negative and exit never clamps;
 *   - everything without SEM_UNDO conserves the sum inside one atomic operation: a transfer
 *     {a -1, b +1}, a pair {a -1, a +1}, a wait-for-zero.
 * A supervisor that loses a unit (a killed sleeper consuming one, a rollback gone wrong, an
 * operation applied twice or applied while EINTR was returned for a give-back) breaks the sum.
 *
 * Output is deterministic (yes/no), so the run can be compared with a native run; the native
 * run must pass too, or the design of this test is wrong.
 *
 * Usage: stress [DURATION_MS [WORKERS]]   (defaults 5000, 8)
 */
#include <pthread.h>
#include <sys/mman.h>

#include "prog.h"

#define NSEMS	4
#define TOTAL	16
#define MAXWORK 16
#define NKINDS	7

static const unsigned short initial[NSEMS] = { 6, 5, 3, 2 };
static const char *const kind_names[NKINDS] = { "take", "take two", "give back",  "transfer",
						"pair", "zero",	    "interrupted" };

struct shared {
	int stop;
	long done[NKINDS];  /* completed operations of each kind, all workers */
	long eintr_nosleep; /* EINTR from an increment, which never sleeps */
};

static struct shared *sh;
static int id;

/* xorshift: each thread its own stream */
static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

static void count(int kind)
{
	__atomic_add_fetch(&sh->done[kind], 1, __ATOMIC_RELAXED);
}

/* semop with a random way of waiting: block, short timeout, or IPC_NOWAIT. 0 or errno. */
static int op(uint64_t *s, struct sembuf *sops, int n)
{
	uint32_t how = rnd(s) % 10;
	int r;

	if (how < 1) {
		r = semop(id, sops, (size_t)n); /* may sleep until killed or woken */
	} else if (how < 3) {
		for (int i = 0; i < n; i++)
			sops[i].sem_flg |= IPC_NOWAIT;
		r = (int)syscall(SYS_semop, id, sops, n);
	} else {
		struct timespec ts = { 0, (long)(1 + rnd(s) % 10) * 1000000L };

		r = semtimedop(id, sops, (size_t)n, &ts);
	}
	if (r && errno == EINTR)
		count(6);
	return r ? errno : 0;
}

static void *worker_thread(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg;
	int held[NSEMS] = { 0 };

	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		uint32_t k = rnd(&s) % 100;
		unsigned short a = (unsigned short)(rnd(&s) % NSEMS);
		unsigned short b = (unsigned short)((a + 1 + rnd(&s) % (NSEMS - 1)) % NSEMS);

		if (k < 25) {
			short n = (short)(1 + rnd(&s) % 2);
			struct sembuf t = { a, (short)-n, SEM_UNDO };

			if (op(&s, &t, 1) == 0) {
				held[a] += n;
				count(0);
			}
		} else if (k < 35) {
			struct sembuf t[2] = { { a, -1, SEM_UNDO }, { b, -1, SEM_UNDO } };

			if (op(&s, t, 2) == 0) {
				held[a]++;
				held[b]++;
				count(1);
			}
		} else if (k < 65) {
			for (int i = 0; i < NSEMS; i++) {
				struct sembuf g = { (unsigned short)i, (short)held[i], SEM_UNDO };

				/* an increment never sleeps, so natively no signal can stop it */
				if (!held[i])
					continue;
				if (semop(id, &g, 1) == 0) {
					held[i] = 0;
					count(2);
				} else if (errno == EINTR) {
					__atomic_add_fetch(&sh->eintr_nosleep, 1, __ATOMIC_RELAXED);
				}
			}
		} else if (k < 80) {
			struct sembuf t[2] = { { a, -1, 0 }, { b, 1, 0 } };

			if (op(&s, t, 2) == 0)
				count(3);
		} else if (k < 92) {
			struct sembuf t[2] = { { a, -1, 0 }, { a, 1, 0 } };

			if (op(&s, t, 2) == 0)
				count(4);
		} else {
			struct sembuf z = { a, 0, 0 };
			struct timespec ts = { 0, 2000000 };

			if (semtimedop(id, &z, 1, &ts) == 0)
				count(5);
		}
		if (rnd(&s) % 16 == 0)
			usleep(rnd(&s) % 1000);
	}
	/* asked to stop: give everything back (exit would too; this path tests it explicitly) */
	for (int i = 0; i < NSEMS; i++) {
		struct sembuf g = { (unsigned short)i, (short)held[i], SEM_UNDO };

		while (held[i] && semop(id, &g, 1) && errno == EINTR)
			;
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void worker_main(uint64_t seed)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	int nthreads = 2 + (int)(seed % 3);
	pthread_t th[4];

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = seed % 2 ? SA_RESTART : 0;
	sigaction(SIGUSR1, &sa, NULL);
	for (int t = 0; t < nthreads; t++)
		MUST(pthread_create(&th[t], NULL, worker_thread,
				    (void *)(uintptr_t)(seed * 7919 + (uint64_t)t * 104729 + 1)) ==
		     0);
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	_exit(0);
}

static pid_t spawn(uint64_t seed)
{
	pid_t p = xfork();

	if (p == 0)
		worker_main(seed);
	return p;
}

int main(int argc, char **argv)
{
	int duration_ms = argc > 1 ? atoi(argv[1]) : 5000;
	int nworkers = argc > 2 ? atoi(argv[2]) : 8;
	uint64_t seed = (uint64_t)now_ns() ^ (uint64_t)getpid() << 32;
	pid_t w[MAXWORK];
	unsigned short v[NSEMS];
	int kills = 0, stops = 0, signals = 0, sum = 0, sleepers = 0;
	int64_t end, t_sum;
	bool all_kinds = true;

	prog_init();
	if (nworkers < 1 || nworkers > MAXWORK)
		nworkers = 8;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	MUST(sh != MAP_FAILED);
	id = semget(IPC_PRIVATE, NSEMS, 0600);
	MUST(id >= 0);
	MUST(semctl(id, 0, SETALL, (union semun){ .array = (unsigned short *)initial }) == 0);

	for (int i = 0; i < nworkers; i++)
		w[i] = spawn(rnd(&seed));
	end = now_ns() + (int64_t)duration_ms * 1000000LL;
	while (now_ns() < end) {
		int i = (int)(rnd(&seed) % (uint32_t)nworkers);
		uint32_t what = rnd(&seed) % 100;

		usleep(5000 + rnd(&seed) % 30000);
		if (what < 70) {
			kill(w[i], SIGKILL);
			MUST(waitpid(w[i], NULL, 0) == w[i]);
			w[i] = spawn(rnd(&seed));
			kills++;
		} else if (what < 85) {
			kill(w[i], SIGSTOP);
			usleep(1000 + rnd(&seed) % 10000);
			kill(w[i], SIGCONT);
			stops++;
		} else {
			kill(w[i], SIGUSR1);
			signals++;
		}
	}

	/* stop: most workers give back and exit; those asleep for good are killed */
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	end = now_ns() + 1000000000LL;
	for (int i = 0; i < nworkers; i++) {
		while (waitpid(w[i], NULL, WNOHANG) == 0) {
			if (now_ns() > end) {
				kill(w[i], SIGKILL);
				MUST(waitpid(w[i], NULL, 0) == w[i]);
				break;
			}
			usleep(2000);
		}
	}

	/* every worker is reaped; a supervisor may take a moment to apply the last exits */
	t_sum = now_ns() + WAIT_MS * 1000000LL;
	do {
		MUST(semctl(id, 0, GETALL, (union semun){ .array = v }) == 0);
		sum = 0;
		sleepers = 0;
		for (int i = 0; i < NSEMS; i++) {
			sum += v[i];
			sleepers += semctl(id, i, GETNCNT) + semctl(id, i, GETZCNT);
		}
		if (sum == TOTAL && sleepers == 0)
			break;
		usleep(2000);
	} while (now_ns() < t_sum);

	printf("conserved (sum of values = %d): %s\n", TOTAL, sum == TOTAL ? "yes" : "no");
	printf("nobody left asleep: %s\n", sleepers == 0 ? "yes" : "no");
	if (sum != TOTAL || sleepers)
		printf("values %u %u %u %u, sleepers %d, seed %llu\n", v[0], v[1], v[2], v[3],
		       sleepers, (unsigned long long)seed);
	EXPECT(sum == TOTAL && sleepers == 0, "invariant broken");
	/* coverage: the run did what it was meant to (not printed as numbers: they vary) */
	for (int k = 0; k < NKINDS; k++)
		if (__atomic_load_n(&sh->done[k], __ATOMIC_RELAXED) == 0) {
			printf("never completed: %s\n", kind_names[k]);
			all_kinds = false;
		}
	printf("every kind of operation completed: %s\n", all_kinds ? "yes" : "no");
	printf("EINTR from an increment (which cannot sleep): %s\n",
	       __atomic_load_n(&sh->eintr_nosleep, __ATOMIC_RELAXED) ? "yes" : "no");
	printf("at least %d kills, stops and signals: %s\n", duration_ms / 500,
	       kills >= duration_ms / 500 && stops > 0 && signals > 0 ? "yes" : "no");
	if (getenv("STRESS_VERBOSE"))
		fprintf(stderr, "kills %d stops %d signals %d; ops %ld %ld %ld %ld %ld %ld %ld\n",
			kills, stops, signals, sh->done[0], sh->done[1], sh->done[2], sh->done[3],
			sh->done[4], sh->done[5], sh->done[6]);
	return prog_exit_status();
}

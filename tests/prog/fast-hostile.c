/* SPDX-License-Identifier: MIT */
/*
 * Under `semvisor-run --fast` only: a program that writes what it likes into the fast path's
 * memory it was handed (found through /proc/self/maps), as a hostile program would.
 *
 * 1. While a victim holds 3 units taken with SEM_UNDO, a scribbler writes random words into the
 *    set's words and its own page for 200 ms, and tries fast operations between. It can make
 *    the value anything (it may alter the set: SETVAL could too), but the victim's semadj lives
 *    in the victim's page: the victim's exit gives back exactly 3 to whatever value is there.
 * 2. A process that lost alter permission through IPC_SET (to another user, 0600) writes a value
 *    into its old mapping: nothing changes, and its semop fails with EACCES, as natively.
 * 3. A process whose set was removed writes into its old mapping after a new set took the same
 *    id (sem_next_id): the new set does not see it, and the process's next semop is the new
 *    set's, as natively.
 * Every line printed is what must be printed; a failure prints FAIL and exits 1.
 */
#include <sys/mman.h>

#include "prog.h"

/* The mapping of the memfd called name (fastmem.c's names), or NULL. */
static void *find_map(const char *name, size_t *len)
{
	char line[512], want[64];
	FILE *f = fopen("/proc/self/maps", "r");
	void *found = NULL;

	MUST(f != NULL);
	snprintf(want, sizeof(want), "/memfd:%s ", name);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (strstr(line, want) && sscanf(line, "%lx-%lx", &a, &b) == 2) {
			found = (void *)a;
			*len = b - a;
		}
	}
	fclose(f);
	return found;
}

static struct chan up, down;

/* Two operations on semaphore num (+1, then -1): the second maps the set and goes fast. */
static void map_by_use(int id, unsigned short num)
{
	MUST(sop1(id, num, 1, 0) == 0);
	MUST(sop1(id, num, -1, 0) == 0);
}

static void scribbler(int id)
{
	volatile uint64_t *words;
	unsigned char *page;
	size_t wlen, plen;
	unsigned seed = 7;
	int64_t end;

	map_by_use(id, 0);
	words = find_map("semvisor-words", &wlen);
	page = find_map("semvisor-page", &plen);
	if (!words || !page) {
		printf("scribbler: no fast path mapping\n");
		_exit(3);
	}
	end = now_ns() + 200 * 1000000LL;
	while (now_ns() < end) {
		for (size_t i = 0; i < wlen / 8; i++)
			words[i] = ((uint64_t)rand_r(&seed) << 32) | (uint64_t)rand_r(&seed);
		for (size_t i = 0; i < plen; i += 1 + rand_r(&seed) % 64)
			page[i] = (unsigned char)rand_r(&seed);
		sop1(id, (unsigned short)(rand_r(&seed) % 2), (short)(rand_r(&seed) % 3 - 1),
		     IPC_NOWAIT | (rand_r(&seed) % 2 ? SEM_UNDO : 0));
	}
	_exit(0);
}

static void hostile_words(void)
{
	int id = semget(IPC_PRIVATE, 2, 0666), x;
	pid_t victim, s;

	MUST(id >= 0);
	MUST(setval(id, 1, 10) == 0);
	victim = xfork();
	if (victim == 0) {
		for (int i = 0; i < 3; i++)
			MUST(sop1(id, 1, -1, SEM_UNDO) == 0);
		tell(&up, 'h');
		if (hear(&down) != 'x')
			_exit(10);
		_exit(0);
	}
	HEAR(&up, 'h');
	s = xfork();
	if (s == 0)
		scribbler(id);
	printf("scribbler: %s\n", reap(s));
	x = getval(id, 1);
	EXPECT(x >= 0 && x <= 32767, "a value out of range: %d", x);
	tell(&down, 'x');
	printf("victim: %s\n", reap(victim));
	{
		int want = x + 3 > 32767 ? 32767 : x + 3, y = getval(id, 1);

		EXPECT(y == want, "%d after the victim's exit, not %d + 3", y, x);
		printf("the victim's 3 units came back: %s\n", y == want ? "yes" : "no");
	}
	MUST(semctl(id, 0, IPC_RMID) == 0);
}

static void revoked_by_ipc_set(void)
{
	int id = semget(IPC_PRIVATE, 1, 0666);
	volatile uint64_t *words;
	size_t wlen;
	pid_t r;

	MUST(id >= 0);
	MUST(setval(id, 0, 5) == 0);
	r = xfork();
	if (r == 0) {
		MUST(setresgid(1000, 1000, 1000) == 0 && setresuid(1000, 1000, 1000) == 0);
		map_by_use(id, 0);
		tell(&up, 'm');
		if (hear(&down) != 'g')
			_exit(10);
		words = find_map("semvisor-words", &wlen);
		MUST(words != NULL);
		words[0] = 1000; /* a value, the word free: as the fast path would leave it */
		tell(&up, sop1(id, 0, -1, IPC_NOWAIT) == 0 ? 0 : (char)errno);
		_exit(0);
	}
	HEAR(&up, 'm');
	{
		struct semid_ds ds = { .sem_perm = { .uid = 2000, .gid = 2000, .mode = 0600 } };
		union semun arg = { .buf = &ds };

		MUST(semctl(id, 0, IPC_SET, arg) == 0);
	}
	tell(&down, 'g');
	printf("after IPC_SET to another user's 0600, its semop: %s\n", errname(hear(&up)));
	printf("process: %s\n", reap(r));
	CHECK("its write into the old mapping changed nothing", 5, getval(id, 0));
	MUST(semctl(id, 0, IPC_RMID) == 0);
}

static void revoked_by_rmid(void)
{
	int id = semget(IPC_PRIVATE, 1, 0666), again;
	volatile uint64_t *words;
	size_t wlen;
	FILE *f;
	pid_t q;

	MUST(id >= 0);
	MUST(setval(id, 0, 5) == 0);
	q = xfork();
	if (q == 0) {
		map_by_use(id, 0);
		words = find_map("semvisor-words", &wlen);
		MUST(words != NULL);
		tell(&up, 'm');
		if (hear(&down) != 'g')
			_exit(10);
		words[0] = 1000;
		tell(&up, sop1(id, 0, -1, IPC_NOWAIT) == 0 ? 0 : (char)errno);
		_exit(0);
	}
	HEAR(&up, 'm');
	MUST(semctl(id, 0, IPC_RMID) == 0);
	f = fopen("/proc/sys/kernel/sem_next_id", "w");
	MUST(f != NULL);
	fprintf(f, "%d\n", id);
	MUST(fclose(f) == 0);
	again = semget(IPC_PRIVATE, 1, 0666);
	EXPECT(again == id, "sem_next_id gave %d, not %d", again, id);
	MUST(setval(again, 0, 7) == 0);
	tell(&down, 'g');
	printf("after IPC_RMID and a new set of the same id, its semop: %s\n", errname(hear(&up)));
	printf("process: %s\n", reap(q));
	CHECK("the new set: 7, less that semop's unit", 6, getval(again, 0));
	MUST(semctl(again, 0, IPC_RMID) == 0);
}

int main(void)
{
	prog_init();
	chan_open(&up);
	chan_open(&down);
	hostile_words();
	revoked_by_ipc_set();
	revoked_by_rmid();
	return prog_exit_status();
}

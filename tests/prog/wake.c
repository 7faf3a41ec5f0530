/* SPDX-License-Identifier: MIT */
/*
 * Wake-ups (SPEC A4.9, A4.10): one semop that releases many sleepers completes them all inside
 * the waker's call (GETVAL and GETNCNT right after it already show their decrements); pending
 * operations are served in FIFO order without starvation protection (a later -1 passes an
 * earlier -3 that cannot proceed); wait-for-zero sleepers wake when the value reaches zero,
 * also when it gets there through a woken decrement.
 *
 * Every sleeper is its own process, started only after the previous one is known to sleep
 * (GETNCNT/GETZCNT), so the queue order is the order of creation. Each writes its tag to a pipe
 * when its semop returns; the parent reads the tags of the sleepers one V is expected to wake
 * and prints them sorted (their own order of running after the wake-up is the scheduler's).
 */
#include "prog.h"

static struct chan done;
static int id;

struct sleeper {
	pid_t pid;
	char tag;
};

/* A process that runs semop(sops) and then reports tag; it is asleep when this returns. */
static struct sleeper sleep_on(char tag, int num, short op, int cnt_cmd, int cnt_now)
{
	struct sleeper s = { 0, tag };

	s.pid = xfork();
	if (s.pid == 0) {
		int r = sop1(id, (unsigned short)num, op, 0);
		int e = r ? errno : 0;

		tell(&done, tag);
		_exit(e);
	}
	WAIT_CNT(id, num, cnt_cmd, cnt_now);
	return s;
}

static int cmp_char(const void *a, const void *b)
{
	return *(const char *)a - *(const char *)b;
}

/* Collect n completion tags (bounded wait), print them sorted; then check nothing else woke. */
static void woken(const char *label, int n)
{
	char tags[32];
	int got = 0;

	while (got < n) {
		int c = hear(&done);

		if (c < 0)
			break;
		tags[got++] = (char)c;
	}
	qsort(tags, (size_t)got, 1, cmp_char);
	tags[got] = '\0';
	/* anything woken by mistake shows up within a short while */
	if (hear_ms(&done, 50) >= 0)
		printf("%s: an extra sleeper woke\n", label);
	printf("%s: woken %s\n", label, got ? tags : "none");
	EXPECT(got == n, "%s: %d of %d woke", label, got, n);
}

static void reap_all(struct sleeper *s, int n)
{
	for (int i = 0; i < n; i++)
		printf("sleeper %c: %s\n", s[i].tag, reap_errno(s[i].pid));
}

static void bulk(void)
{
	struct sleeper s[8];

	printf("-- one +8 wakes eight -1 sleepers\n");
	MUST(setval(id, 0, 0) == 0);
	for (int i = 0; i < 8; i++)
		s[i] = sleep_on((char)('A' + i), 0, -1, GETNCNT, i + 1);
	CHECK("GETNCNT", 8, semctl(id, 0, GETNCNT));
	CHECK("+8", 0, sop1(id, 0, 8, 0));
	CHECK("GETVAL right after", 0, getval(id, 0));
	CHECK("GETNCNT right after", 0, semctl(id, 0, GETNCNT));
	woken("+8", 8);
	reap_all(s, 8);

	printf("-- +10 for six -1 sleepers leaves 4\n");
	for (int i = 0; i < 6; i++)
		s[i] = sleep_on((char)('a' + i), 0, -1, GETNCNT, i + 1);
	CHECK("+10", 0, sop1(id, 0, 10, 0));
	CHECK("GETVAL right after", 4, getval(id, 0));
	woken("+10", 6);
	reap_all(s, 6);

	printf("-- +5 for three -2 sleepers wakes the first two\n");
	MUST(setval(id, 0, 0) == 0);
	for (int i = 0; i < 3; i++)
		s[i] = sleep_on((char)('K' + i), 0, -2, GETNCNT, i + 1);
	CHECK("+5", 0, sop1(id, 0, 5, 0));
	CHECK("GETVAL right after", 1, getval(id, 0));
	CHECK("GETNCNT right after", 1, semctl(id, 0, GETNCNT));
	woken("+5", 2);
	CHECK("+1", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL right after", 0, getval(id, 0));
	woken("+1", 1);
	reap_all(s, 3);
}

static void fifo(void)
{
	struct sleeper s[4];

	printf("-- FIFO among equals: four -1 sleepers, +2 then +2\n");
	MUST(setval(id, 0, 0) == 0);
	for (int i = 0; i < 4; i++)
		s[i] = sleep_on((char)('P' + i), 0, -1, GETNCNT, i + 1);
	CHECK("+2", 0, sop1(id, 0, 2, 0));
	woken("first +2", 2);
	CHECK("+2", 0, sop1(id, 0, 2, 0));
	woken("second +2", 2);
	reap_all(s, 4);

	printf("-- no starvation protection: -3, -1, -2 asleep in that order\n");
	s[0] = sleep_on('x', 0, -3, GETNCNT, 1);
	s[1] = sleep_on('y', 0, -1, GETNCNT, 2);
	s[2] = sleep_on('z', 0, -2, GETNCNT, 3);
	CHECK("+1", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL", 0, getval(id, 0));
	CHECK("GETNCNT", 2, semctl(id, 0, GETNCNT));
	woken("+1", 1);
	CHECK("+2", 0, sop1(id, 0, 2, 0));
	CHECK("GETVAL", 0, getval(id, 0));
	CHECK("GETNCNT", 1, semctl(id, 0, GETNCNT));
	woken("+2", 1);
	CHECK("+4", 0, sop1(id, 0, 4, 0));
	CHECK("GETVAL", 1, getval(id, 0));
	CHECK("GETNCNT", 0, semctl(id, 0, GETNCNT));
	woken("+4", 1);
	reap_all(s, 3);
}

static void zero(void)
{
	struct sleeper s[4];

	printf("-- wait-for-zero\n");
	MUST(setval(id, 1, 3) == 0);
	for (int i = 0; i < 3; i++)
		s[i] = sleep_on((char)('0' + i), 1, 0, GETZCNT, i + 1);
	CHECK("GETZCNT", 3, semctl(id, 1, GETZCNT));
	CHECK("GETNCNT", 0, semctl(id, 1, GETNCNT));
	CHECK("-1", 0, sop1(id, 1, -1, 0));
	woken("-1", 0);
	CHECK("GETZCNT", 3, semctl(id, 1, GETZCNT));
	CHECK("-2", 0, sop1(id, 1, -2, 0));
	CHECK("GETZCNT right after", 0, semctl(id, 1, GETZCNT));
	woken("-2", 3);
	reap_all(s, 3);

	printf("-- zero reached through a woken decrement\n");
	MUST(setval(id, 1, 1) == 0);
	s[0] = sleep_on('Z', 1, 0, GETZCNT, 1);
	s[1] = sleep_on('D', 1, -2, GETNCNT, 1);
	CHECK("+1 (D takes 2, then Z sees 0)", 0, sop1(id, 1, 1, 0));
	CHECK("GETVAL right after", 0, getval(id, 1));
	CHECK("GETZCNT right after", 0, semctl(id, 1, GETZCNT));
	CHECK("GETNCNT right after", 0, semctl(id, 1, GETNCNT));
	woken("+1", 2);
	reap_all(s, 2);

	printf("-- SETVAL 0 wakes zero sleepers\n");
	MUST(setval(id, 2, 7) == 0);
	s[0] = sleep_on('s', 2, 0, GETZCNT, 1);
	s[1] = sleep_on('t', 2, 0, GETZCNT, 2);
	CHECK("SETVAL 0", 0, setval(id, 2, 0));
	woken("SETVAL 0", 2);
	reap_all(s, 2);
}

int main(void)
{
	prog_init();
	chan_open(&done);
	id = semget(IPC_PRIVATE, 3, 0600);
	MUST(id >= 0);
	bulk();
	fifo();
	zero();
	return prog_exit_status();
}

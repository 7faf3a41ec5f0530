/* SPDX-License-Identifier: MIT */
/*
 * A call that arrives while another waits takes nothing from it (SPEC A4.10, FIFO among
 * equals): W sleeps in semop(-1) on a semaphore at 0, then S calls semop(-1) as well; the first
 * +1 must complete W, not S, and only the second completes S. Natively S sleeps in the kernel,
 * queued behind W. Under semvisor-run --fast it may still be waiting in the program, not
 * parked (fastlib.c's wait_here()): a call not yet made, which must find W served first all
 * the same, and then take the second +1 through its probe, since the +1 was the parent's and
 * makes S's operation change sempid.
 *
 * W waits with a timeout it never reaches, which under --fast parks at once (the library
 * never reads a program's timeout); S with plain semop. S says when it is about to call; the
 * first +1 comes WINDOW_MS later, while S waits. Each sleeper writes its tag to a pipe when its
 * semop returns. Printed: the order they completed in, the value after each +1, and how each
 * ended.
 */
#include "prog.h"

#define WINDOW_MS 100

static struct chan done, calling;
static int id;

static pid_t sleeper(char tag, bool timed)
{
	pid_t p = xfork();

	if (p == 0) {
		struct sembuf down = { 0, -1, 0 };
		struct timespec far = { 60, 0 };
		int r;

		tell(&calling, tag);
		r = timed ? semtimedop(id, &down, 1, &far) : semop(id, &down, 1);
		tell(&done, tag);
		_exit(r ? errno : 0);
	}
	return p;
}

int main(void)
{
	pid_t w, s;
	int c;

	prog_init();
	chan_open(&done);
	chan_open(&calling);
	id = semget(IPC_PRIVATE, 1, 0600);
	MUST(id >= 0);

	w = sleeper('W', true);
	HEAR(&calling, 'W');
	WAIT_CNT(id, 0, GETNCNT, 1); /* W sleeps: queued first */
	s = sleeper('S', false);
	HEAR(&calling, 'S');
	sleep_ms(WINDOW_MS);

	CHECK("+1", 0, sop1(id, 0, 1, 0));
	c = hear(&done);
	printf("first woken: %c\n", c < 0 ? '-' : c);
	EXPECT(c == 'W', "the +1 went to %c, not to W, which waited first", c < 0 ? '-' : c);
	/* S must still wait: anything it took by mistake shows up within a short while */
	c = hear_ms(&done, WINDOW_MS);
	printf("then, before another +1: %c\n", c < 0 ? '-' : c);
	CHECK("GETVAL", 0, getval(id, 0));

	CHECK("+1 again", 0, sop1(id, 0, 1, 0));
	c = hear(&done);
	printf("woken by it: %c\n", c < 0 ? '-' : c);
	EXPECT(c == 'S', "the second +1 went to %c, not to S", c < 0 ? '-' : c);
	CHECK("GETVAL", 0, getval(id, 0));
	CHECK("GETNCNT", 0, semctl(id, 0, GETNCNT));
	printf("W: %s\n", reap_errno(w));
	printf("S: %s\n", reap_errno(s));
	CHECK("IPC_RMID", 0, semctl(id, 0, IPC_RMID));
	return prog_exit_status();
}

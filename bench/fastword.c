/* SPDX-License-Identifier: MIT */
/*
 * bench/fastword: what the fast path's protocol costs, next to the kernel's semop.
 *
 * One thread, one semaphore, no contention: pairs of sem_op -1 then +1, with and without
 * SEM_UNDO, four rows measured round-robin in one run:
 *   kernel, kernel+undo   semop(2) on a private set (in a private IPC namespace when root)
 *   fast, fast+undo       fw_try() (server/engine/fastword.h) on the memfds of
 *                         server/engine/fastmem.c, mapped as a program maps them (words
 *                         writable, what is published read-only, its private page), with the
 *                         real coarse clock read in every operation
 * Reported: nanoseconds per operation (medians of --reps runs) and each fast row's ratio to
 * its kernel row. Then what a set's fast memory costs, for sets of 1 and 32000 semaphores: the
 * bytes of its words, of what is published and of one process's page, and the time to make
 * them and map them as a program would (the supervisor's part of a mapping request, without
 * the trapped call that carries it). This is the protocol alone: the preloaded library will add its lookup of the
 * set's mapping and of the thread's slot. Every operation is checked: each semop must succeed,
 * and each fast one must end FW_DONE but once a second, when the clock passes the published
 * otime and the bench, as the supervisor would, publishes the new second (counted apart).
 *
 * Output: a table, and with --out FILE tab-separated lines "name value unit".
 */
#include <getopt.h>
#include <sys/ipc.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "engine/fastmem.h"

enum row {
	KERNEL,
	KERNEL_UNDO,
	FAST,
	FAST_UNDO,
	NROWS
};
static const char *const row_name[NROWS] = { "kernel", "kernel_undo", "fast", "fast_undo" };

struct bench {
	int semid;
	struct sv_fastmem m;
	struct sv_fastpage p;
	_Atomic uint64_t *words; /* the program's mappings */
	struct fw_pub *pub;
	struct fw_page *page;
	long seconds_passed; /* fast operations the clock sent to the "supervisor" */
};

static void kernel_pairs(struct bench *b, long n, bool undo)
{
	struct sembuf ops[2] = { { 0, -1, 0 }, { 0, 1, 0 } };

	if (undo)
		ops[0].sem_flg = ops[1].sem_flg = SEM_UNDO;
	for (long i = 0; i < n; i++) {
		if (semop(b->semid, &ops[0], 1) != 0 || semop(b->semid, &ops[1], 1) != 0)
			bu_die("semop: %s", strerror(errno));
	}
}

/* The supervisor's part when the clock passes otime: publish the new second. */
static void new_second(struct bench *b)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	fw_publish_otime(b->m.pub, ts.tv_sec);
	b->seconds_passed++;
}

static void fast_op(struct bench *b, struct fw_op *op, int d)
{
	_Atomic uint64_t *word = fw_word_at(b->m.words, 0);

	op->d = d;
	while (fw_try(op) != FW_DONE) {
		uint64_t w = atomic_load(word);

		if (fw_count(w) == FW_CNT_MAX) {
			/* the trapped call it would make: the take empties the count */
			fw_give(word, fw_take(word).val);
			continue;
		}
		if (fw_slow(w) || fw_own(w) || fw_val(w) != (d < 0 ? 1u : 0u)) {
			fprintf(stderr, "fastword: a fast operation failed on a free word\n");
			exit(1);
		}
		new_second(b);
	}
}

static void fast_pairs(struct bench *b, long n, bool undo)
{
	struct fw_op op = { .word = fw_word_at(b->words, 0),
			    .pub = b->pub,
			    .page = b->page,
			    .owner = fw_owner(0, 0),
			    .tag = fw_tag(0),
			    .undo = undo };

	for (long i = 0; i < n; i++) {
		fast_op(b, &op, -1);
		fast_op(b, &op, 1);
	}
}

static double run(struct bench *b, enum row r, long pairs)
{
	double t0 = (double)bu_now_ns();

	switch (r) {
	case KERNEL:
	case KERNEL_UNDO:
		kernel_pairs(b, pairs, r == KERNEL_UNDO);
		break;
	default:
		fast_pairs(b, pairs, r == FAST_UNDO);
		break;
	}
	return ((double)bu_now_ns() - t0) / (2.0 * (double)pairs);
}

/* Making a set's memfds and one page, and mapping all three as a program does: ns. */
static double map_once(unsigned nsems)
{
	struct sv_fastmem m;
	struct sv_fastpage p;
	void *w, *pub, *pg;
	double t0 = (double)bu_now_ns(), t;

	errno = -sv_fastmem_create(&m, nsems);
	if (errno == 0)
		errno = -sv_fastpage_create(&p, nsems);
	if (errno != 0)
		bu_die("making the memfds: %s", strerror(errno));
	w = mmap(NULL, m.words_len, PROT_READ | PROT_WRITE, MAP_SHARED, m.words_fd, 0);
	pub = mmap(NULL, m.pub_len, PROT_READ, MAP_SHARED, m.pub_fd, 0);
	pg = mmap(NULL, p.len, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
	if (w == MAP_FAILED || pub == MAP_FAILED || pg == MAP_FAILED)
		bu_die("mmap: %s", strerror(errno));
	t = (double)bu_now_ns() - t0;
	munmap(w, m.words_len);
	munmap(pub, m.pub_len);
	munmap(pg, p.len);
	sv_fastpage_destroy(&p);
	sv_fastmem_destroy(&m);
	return t;
}

static void setup(struct bench *b)
{
	if (geteuid() == 0 && unshare(CLONE_NEWIPC) != 0)
		bu_die("unshare(CLONE_NEWIPC): %s", strerror(errno));
	b->semid = semget(IPC_PRIVATE, 1, 0600);
	if (b->semid < 0 || semctl(b->semid, 0, SETVAL, 1) != 0)
		bu_die("semget: %s", strerror(errno));
	errno = -sv_fastmem_create(&b->m, 1);
	if (errno != 0)
		bu_die("sv_fastmem_create: %s", strerror(errno));
	errno = -sv_fastpage_create(&b->p, 1);
	if (errno != 0)
		bu_die("sv_fastpage_create: %s", strerror(errno));
	b->words = mmap(NULL, b->m.words_len, PROT_READ | PROT_WRITE, MAP_SHARED, b->m.words_fd, 0);
	b->pub = mmap(NULL, b->m.pub_len, PROT_READ, MAP_SHARED, b->m.pub_fd, 0);
	b->page = mmap(NULL, b->p.len, PROT_READ | PROT_WRITE, MAP_SHARED, b->p.fd, 0);
	if (b->words == MAP_FAILED || b->pub == MAP_FAILED || b->page == MAP_FAILED)
		bu_die("mmap: %s", strerror(errno));
	/* the supervisor: this process is sempid, the set was operated on now, word free at 1 */
	fw_publish(b->m.pub, 0, 0, fw_tag(0));
	new_second(b);
	b->seconds_passed = 0;
	fw_give(fw_word_at(b->m.words, 0), 1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pairs", required_argument, NULL, 'n' }, { "reps", required_argument, NULL, 'r' },
		{ "out", required_argument, NULL, 'o' },   { "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },	   { NULL, 0, NULL, 0 }
	};
	static struct bench b;
	static const unsigned sizes[2] = { 1, 32000 };
	double map_ns[2];
	double ns[NROWS][31], med[NROWS];
	long pairs = 2000000;
	int reps = 9, c;
	const char *out = NULL;

	bu_prog = "fastword";
	while ((c = getopt_long(argc, argv, "n:r:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			pairs = bu_parse_long("--pairs", optarg, 1, LONG_MAX / 2);
			break;
		case 'r':
			reps = (int)bu_parse_long("--reps", optarg, 1, 31);
			break;
		case 'o':
			out = optarg;
			break;
		case 'q':
			pairs = 200000;
			reps = 3;
			break;
		default:
			printf("usage: fastword [--pairs N] [--reps R] [--quick] [--out FILE]\n"
			       "Uncontended sem_op -1/+1 pairs: the kernel's semop and the fast "
			       "path's\n"
			       "protocol (fw_try), with and without SEM_UNDO; ns per operation, "
			       "medians\n"
			       "of R runs taken round-robin, and the fast/kernel ratios.\n");
			return c == 'h' ? 0 : 2;
		}
	}
	setup(&b);
	for (int r = 0; r < NROWS; r++)
		run(&b, (enum row)r, pairs / 10 + 1); /* warm-up */
	for (int i = 0; i < reps; i++)
		for (int r = 0; r < NROWS; r++)
			ns[r][i] = run(&b, (enum row)r, pairs);
	for (int r = 0; r < NROWS; r++)
		med[r] = bu_stats(ns[r], reps).med;
	for (int k = 0; k < 2; k++) {
		double t[31];

		for (int i = 0; i < reps; i++)
			t[i] = map_once(sizes[k]);
		map_ns[k] = bu_stats(t, reps).med;
	}
	if (semctl(b.semid, 0, GETVAL) != 1 || fw_val(atomic_load(fw_word_at(b.m.words, 0))) != 1) {
		fprintf(stderr, "fastword: the semaphores did not end at 1\n");
		return 1;
	}

	printf("fastword bench: uncontended sem_op -1/+1 pairs, ns per operation, medians of %d "
	       "runs of %ld pairs\n",
	       reps, pairs);
	printf("  kernel semop            %7.1f ns\n", med[KERNEL]);
	printf("  kernel semop, SEM_UNDO  %7.1f ns\n", med[KERNEL_UNDO]);
	printf("  fast path               %7.1f ns  (%.2fx the kernel's)\n", med[FAST],
	       med[FAST] / med[KERNEL]);
	printf("  fast path, SEM_UNDO     %7.1f ns  (%.2fx the kernel's)\n", med[FAST_UNDO],
	       med[FAST_UNDO] / med[KERNEL_UNDO]);
	printf("  (%ld operations waited for a new second to be published)\n", b.seconds_passed);
	for (int k = 0; k < 2; k++)
		printf("  a set of %5u: words %zu B, published %zu B, a process's page %zu B; made "
		       "and "
		       "mapped in %.1f us\n",
		       sizes[k], sv_fastmem_words_len(sizes[k]), sv_fastmem_pub_len(sizes[k]),
		       sv_fastpage_len(sizes[k]), map_ns[k] / 1000);
	if (out) {
		FILE *f = fopen(out, "w");

		if (!f)
			bu_die("%s: %s", out, strerror(errno));
		fprintf(f, "# fastword reps=%d pairs=%ld\n", reps, pairs);
		for (int r = 0; r < NROWS; r++)
			fprintf(f, "ns_%s\t%.1f\tns\n", row_name[r], med[r]);
		fprintf(f, "ratio_fast\t%.3f\tx\nratio_fast_undo\t%.3f\tx\n",
			med[FAST] / med[KERNEL], med[FAST_UNDO] / med[KERNEL_UNDO]);
		for (int k = 0; k < 2; k++)
			fprintf(
			    f, "bytes_set_%u\t%zu\tB\nbytes_page_%u\t%zu\tB\nus_map_%u\t%.1f\tus\n",
			    sizes[k], sv_fastmem_words_len(sizes[k]) + sv_fastmem_pub_len(sizes[k]),
			    sizes[k], sv_fastpage_len(sizes[k]), sizes[k], map_ns[k] / 1000);
		fclose(f);
	}
	semctl(b.semid, 0, IPC_RMID);
	return 0;
}

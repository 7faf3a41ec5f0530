/* SPDX-License-Identifier: MIT */
/*
 * The fast path's memfds (server/engine/fastmem.c), tried as a hostile program would try the
 * fds it is handed: every way of writing what the supervisor publishes must fail with the
 * kernel's error, no resize may make the supervisor's own mappings fault, and what a program
 * may write reaches the supervisor as fastword.h expects.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/fastmem.h"

TestSuite(engine_fastmem, .timeout = 30);

/* The file behind fd opened again, as a program can through /proc: a description of its own. */
static int reopen(int fd, int flags)
{
	char self[32];

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return open(self, flags | O_CLOEXEC);
}

static void assert_fixed_size(int fd, size_t len)
{
	cr_assert_eq(ftruncate(fd, (off_t)len / 2), -1);
	cr_assert_eq(errno, EPERM, "shrink: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)len * 2), -1);
	cr_assert_eq(errno, EPERM, "grow: %s", strerror(errno));
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	cr_assert_eq(errno, EPERM, "a further seal: %s", strerror(errno));
	cr_assert_eq(lseek(fd, 0, SEEK_END), (off_t)len);
}

Test(engine_fastmem, layout)
{
	struct sv_fastmem m;
	struct sv_fastpage p;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	cr_assert_eq(sv_fastmem_create(&m, 0), -EINVAL);
	cr_assert_eq(m.words_fd, -1);
	cr_assert_eq(sv_fastmem_create(&m, 32000), 0);
	cr_assert_eq(m.words_len, 32000 * 64 / pg * pg + (32000 * 64 % pg ? pg : 0),
		     "a cache line per word");
	cr_assert(m.pub_len >= sizeof(struct fw_pub) + 32000 * 8 && m.pub_len % pg == 0);
	for (unsigned i = 0; i < 32000; i++)
		cr_assert_eq(atomic_load(fw_word_at(m.words, i)), fw_word(0, true, 0),
			     "word %u is not held by the supervisor", i);
	cr_assert_eq(atomic_load(&m.pub->otime), 0);
	cr_assert_eq(fcntl(m.words_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	cr_assert_eq(fcntl(m.pub_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	sv_fastmem_destroy(&m);
	cr_assert_eq(m.words, NULL);

	cr_assert_eq(sv_fastpage_create(&p, 3), 0);
	cr_assert(p.len >= sizeof(struct fw_page) + 3 * sizeof(struct fw_adj) && p.len % pg == 0);
	cr_assert_eq(atomic_load(&p.page->epoch), 0);
	sv_fastpage_destroy(&p);
}

/* Whatever a program does with the pub fd, the published facts stay the supervisor's. */
Test(engine_fastmem, pub_is_read_only)
{
	struct sv_fastmem m;
	const size_t len = sv_fastmem_pub_len(4);
	struct fw_pub *ro, *cow;
	void *w;
	int rw, seals;

	cr_assert_eq(sv_fastmem_create(&m, 4), 0);
	seals = fcntl(m.pub_fd, F_GET_SEALS);
	cr_assert_eq(seals & (F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);

	/* the fd itself: read-only */
	w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.pub_fd, 0);
	cr_assert_eq(w, MAP_FAILED);
	cr_assert_eq(errno, EACCES);
	ro = mmap(NULL, len, PROT_READ, MAP_SHARED, m.pub_fd, 0);
	cr_assert_neq(ro, MAP_FAILED);
	cr_assert_eq(mprotect(ro, len, PROT_READ | PROT_WRITE), -1);
	cr_assert_eq(errno, EACCES);

	/*
	 * Opened again for writing, through /proc: a memfd's mode is 0777, so anyone holding the
	 * fd can. Only the seal stands in the way.
	 */
	rw = reopen(m.pub_fd, O_RDWR);
	cr_assert_geq(rw, 0, "%s", strerror(errno));
	w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	cr_assert_eq(w, MAP_FAILED);
	cr_assert_eq(errno, EPERM, "a writable mapping: %s", strerror(errno));
	cr_assert_eq(pwrite(rw, "x", 1, 0), -1);
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)len), -1,
		     "a hole punched in what is published");
	cr_assert_eq(errno, EPERM);
	assert_fixed_size(rw, len);
	close(rw);

	/* a private writable copy: allowed, and nobody else sees it */
	cow = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, m.pub_fd, 0);
	cr_assert_neq(cow, MAP_FAILED);
	atomic_store(&cow->sem[0], fw_pub_sem(9, 9));

	/* the supervisor's mapping still writes, and the program sees it */
	fw_publish(m.pub, 0, 5, fw_tag(2));
	fw_publish_otime(m.pub, 77);
	cr_assert_eq(atomic_load(&ro->sem[0]), fw_pub_sem(5, fw_tag(2)));
	cr_assert_eq(atomic_load(&ro->otime), 77);
	cr_assert_eq(atomic_load(&m.pub->sem[0]), fw_pub_sem(5, fw_tag(2)));
	munmap(cow, len);
	munmap(ro, len);
	sv_fastmem_destroy(&m);
}

/*
 * The words fd: a program maps it writable (that is what it is for) but cannot resize it, so
 * the supervisor's mapping never faults. A hole punched there reads as zeros: a program could
 * write those anyway.
 */
Test(engine_fastmem, words_cannot_be_resized)
{
	struct sv_fastmem m;
	const size_t len = sv_fastmem_words_len(4);
	_Atomic uint64_t *w;
	uint64_t held;

	cr_assert_eq(sv_fastmem_create(&m, 4), 0);
	assert_fixed_size(m.words_fd, len);
	w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.words_fd, 0);
	cr_assert_neq(w, MAP_FAILED);

	/* the supervisor gives word 1; the program's A1 lands in the supervisor's view */
	fw_give(fw_word_at(m.words, 1), 3);
	held = atomic_load(fw_word_at(w, 1));
	cr_assert_eq(held, fw_word(3, false, 0));
	cr_assert(atomic_compare_exchange_strong(fw_word_at(w, 1), &held,
						 fw_word(3, false, fw_owner(0, 1))));
	cr_assert_eq(fw_own(atomic_load(fw_word_at(m.words, 1))), fw_owner(0, 1));

	cr_assert_eq(
	    fallocate(m.words_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)len), 0);
	cr_assert_eq(atomic_load(fw_word_at(m.words, 1)), 0);
	cr_assert_eq(fw_take(fw_word_at(m.words, 3)).val, 0);
	munmap((void *)w, len);
	sv_fastmem_destroy(&m);
}

Test(engine_fastmem, page_cannot_be_resized)
{
	struct sv_fastpage p;

	cr_assert_eq(sv_fastpage_create(&p, 100), 0);
	assert_fixed_size(p.fd, p.len);
	atomic_store(&p.page->adj[99].fast, fw_entry(-4, 0));
	cr_assert_eq(fw_settled_entry(p.page, 99, -1), fw_entry(-4, 0));
	sv_fastpage_destroy(&p);
}

/*
 * One operation from end to end through the mappings a program would have (words writable, pub
 * read-only, its page), against the supervisor's own mappings of the same files.
 */
Test(engine_fastmem, one_operation_through_the_fds)
{
	struct sv_fastmem m;
	struct sv_fastpage p;
	_Atomic uint64_t *words;
	struct fw_pub *pub;
	struct fw_page *page;
	struct fw_op op;

	cr_assert_eq(sv_fastmem_create(&m, 2), 0);
	cr_assert_eq(sv_fastpage_create(&p, 2), 0);
	words = mmap(NULL, m.words_len, PROT_READ | PROT_WRITE, MAP_SHARED, m.words_fd, 0);
	pub = mmap(NULL, m.pub_len, PROT_READ, MAP_SHARED, m.pub_fd, 0);
	page = mmap(NULL, p.len, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
	cr_assert(words != MAP_FAILED && pub != MAP_FAILED && page != MAP_FAILED);

	/* the supervisor: page 0's process is sempid, otime far ahead; word 1 holds 2 */
	fw_publish(m.pub, 1, 0, fw_tag(0));
	fw_publish_otime(m.pub, INT64_MAX);
	fw_give(fw_word_at(m.words, 1), 2);

	op = (struct fw_op){ .word = fw_word_at(words, 1),
			     .pub = pub,
			     .page = page,
			     .owner = fw_owner(0, 0),
			     .tag = fw_tag(0),
			     .semnum = 1,
			     .d = -1,
			     .undo = true };
	cr_assert_eq(fw_try(&op), FW_DONE);
	cr_assert_eq(atomic_load(fw_word_at(m.words, 1)), fw_word(1, false, 0) | FW_CNT_ONE,
		     "the value applied, and counted in the same exchange");
	cr_assert_eq(fw_entry_adj(atomic_load(&p.page->adj[1].fast), 0), 1);
	cr_assert(!fw_pending_valid(atomic_load(&p.page->slot[0].pending)));

	/* a word the supervisor still holds sends the program to the trapped call */
	op.word = fw_word_at(words, 0);
	op.semnum = 0;
	op.d = 1;
	cr_assert_eq(fw_try(&op), FW_CALL);
	cr_assert_eq(atomic_load(fw_word_at(m.words, 0)), fw_word(0, true, 0));

	munmap((void *)words, m.words_len);
	munmap(pub, m.pub_len);
	munmap(page, p.len);
	sv_fastpage_destroy(&p);
	sv_fastmem_destroy(&m);
}

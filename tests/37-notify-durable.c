/* SPDX-License-Identifier: MIT */
/*
 * The memfd a crash leaves behind (server/notify/durable.c), opened again as the next process
 * would: the current checkpoint and exactly the records after it; a checkpoint half made (the
 * writer killed before the switch) is not taken, and what it left past the journal's end is
 * never read as records, now or after later appends; the calls in their slots with their
 * listener key and journal id; ids of a later process never those of an earlier one; a file
 * that is not one, or a newer build's, refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "notify/durable.h"

TestSuite(notify_durable, .timeout = 30);

/* A record of n bytes (a multiple of 8): header, then bytes of value v. */
static void record(struct dur *d, size_t n, unsigned char v)
{
	unsigned char rec[256];
	uint32_t hdr[2] = { (uint32_t)n, 0x31414141 };

	cr_assert(n >= 16 && n % 8 == 0 && n <= sizeof(rec));
	memcpy(rec, hdr, 8);
	memset(rec + 8, v, n - 8);
	dur_sink(d)->append(dur_sink(d)->ctx, rec, n);
}

/* The records in the current journal: how many, each checked for its value. */
static int records(struct dur *d, unsigned char first)
{
	const void *ckpt, *log;
	size_t clen, llen, off = 0;
	int n = 0;

	dur_current(d, &ckpt, &clen, &log, &llen);
	while (off < llen) {
		uint32_t len;

		memcpy(&len, (const char *)log + off, 4);
		cr_assert(len >= 16 && off + len <= llen, "record %d: length %u", n, len);
		cr_assert_eq(((const unsigned char *)log)[off + 8], (unsigned char)(first + n));
		off += len;
		n++;
	}
	return n;
}

static struct dur *reopen(struct dur *d, int fd)
{
	struct dur *again;

	dur_close(d);
	cr_assert_eq(dur_open(fd, &again), 0);
	return again;
}

Test(notify_durable, checkpoint_and_journal_survive)
{
	struct dur *d;
	const void *ckpt, *log;
	size_t clen, llen;
	char blob[5000];
	int fd = memfd_create("t", MFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(dur_open(fd, &d), 0); /* empty: made new */
	for (int i = 0; i < 3; i++)
		record(d, 24, (unsigned char)(10 + i));
	memset(blob, 'A', sizeof(blob));
	cr_assert_eq(dur_checkpoint(d, blob, sizeof(blob)), 0);
	record(d, 32, 1);
	record(d, 16, 2);
	cr_assert_eq(dur_log_size(d), 48);

	d = reopen(d, fd);
	dur_current(d, &ckpt, &clen, &log, &llen);
	cr_assert_eq(clen, sizeof(blob));
	cr_assert(!memcmp(ckpt, blob, clen));
	cr_assert_eq(records(d, 1), 2);

	/* appended to after the reopen: the journal goes on where it ended */
	record(d, 24, 3);
	d = reopen(d, fd);
	cr_assert_eq(records(d, 1), 3);
	dur_close(d);
	close(fd);
}

Test(notify_durable, half_made_checkpoint_is_not_read)
{
	struct dur *d;
	const void *ckpt, *log;
	size_t clen, llen;
	char blob[3000], other[9000];
	unsigned char *map;
	struct stat st;
	int fd = memfd_create("t", MFD_CLOEXEC);

	cr_assert_eq(dur_open(fd, &d), 0);
	memset(blob, 'A', sizeof(blob));
	cr_assert_eq(dur_checkpoint(d, blob, sizeof(blob)), 0);
	record(d, 24, 1);
	/*
	 * A writer killed in a checkpoint left its blob past the journal's end without
	 * switching: here, bytes that look like records (valid lengths).
	 */
	cr_assert_eq(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	dur_current(d, &ckpt, &clen, &log, &llen);
	{
		/* the checkpoint's offset in the file, found by its bytes; the journal's after */
		unsigned char *at = memmem(map, (size_t)st.st_size, blob, sizeof(blob));
		size_t end;
		uint32_t fake[2] = { 16, 0x31414141 };

		cr_assert_not_null(at);
		end = (size_t)(at - map) + (size_t)((const char *)log - (const char *)ckpt) + llen;

		/* (it leaves at least one zero header before what it wrote) */
		for (size_t off = end + 8; off + 16 <= (size_t)st.st_size && off < end + 8192;
		     off += 16) {
			memcpy(map + off, fake, 8);
			memset(map + off + 8, 7, 8);
		}
	}
	munmap(map, (size_t)st.st_size);
	d = reopen(d, fd);
	cr_assert_eq(records(d, 1), 1, "what a half-made checkpoint left was read");
	/* and after records are appended there, still only those */
	record(d, 16, 2);
	record(d, 24, 3);
	d = reopen(d, fd);
	cr_assert_eq(records(d, 1), 3);
	/* a checkpoint taken now starts an empty journal */
	memset(other, 'B', sizeof(other));
	cr_assert_eq(dur_checkpoint(d, other, sizeof(other)), 0);
	d = reopen(d, fd);
	dur_current(d, &ckpt, &clen, &log, &llen);
	cr_assert_eq(clen, sizeof(other));
	cr_assert_eq(llen, 0);
	dur_close(d);
	close(fd);
}

struct found {
	int n;
	struct dur_call c[4];
};

static int collect(const struct dur_call *c, void *arg)
{
	struct found *f = arg;

	cr_assert_lt(f->n, 4);
	f->c[f->n++] = *c;
	return 0;
}

Test(notify_durable, calls_in_slots_survive)
{
	struct dur *d;
	struct seccomp_notif *n;
	struct found f = { 0 };
	uint64_t jid, jid2;
	int fd = memfd_create("t", MFD_CLOEXEC), a, b;

	cr_assert_eq(dur_open(fd, &d), 0);
	a = dur_slot_take(d);
	b = dur_slot_take(d);
	cr_assert(a >= 0 && b >= 0 && a != b);
	n = dur_slot_arm(d, a, 7, &jid);
	n->id = 1234; /* what NOTIF_RECV writes there */
	n->pid = 99;
	dur_slot_received(d, a, 555);
	dur_slot_arm(d, b, 8, &jid2); /* armed, nothing received: no call */
	cr_assert_neq(jid, jid2);

	d = reopen(d, fd);
	cr_assert_eq(dur_for_each_call(d, collect, &f), 0);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.c[0].slot, a);
	cr_assert_eq(f.c[0].key, 7);
	cr_assert_eq(f.c[0].jid, jid);
	cr_assert_eq(f.c[0].received_ns, 555);
	cr_assert_eq(f.c[0].n->id, 1234);
	cr_assert_eq(f.c[0].n->pid, 99);
	/* kept while it is served again; every other slot free */
	dur_slot_keep(d, a);
	dur_calls_done(d);
	for (int i = 0; i < 100; i++)
		cr_assert_neq(dur_slot_take(d), a);
	/* the next process's ids are not the previous ones' */
	{
		uint64_t later;

		dur_slot_arm(d, b, 8, &later);
		cr_assert_gt(later >> 40, jid >> 40);
	}
	dur_close(d);
	close(fd);
}

Test(notify_durable, foreign_files_are_refused)
{
	struct dur *d;
	int fd = memfd_create("t", MFD_CLOEXEC);
	char junk[1 << 16];
	unsigned char *map;
	uint32_t version;

	memset(junk, 'x', sizeof(junk));
	cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	cr_assert_eq(dur_open(fd, &d), -EINVAL);
	close(fd);

	/* a newer build's: refused as such, not as damage */
	fd = memfd_create("t", MFD_CLOEXEC);
	cr_assert_eq(dur_open(fd, &d), 0);
	dur_close(d);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	memcpy(&version, map + 8, 4);
	version++;
	memcpy(map + 8, &version, 4);
	munmap(map, 4096);
	cr_assert_eq(dur_open(fd, &d), -EPROTONOSUPPORT);
	close(fd);
}

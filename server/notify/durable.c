/* SPDX-License-Identifier: MIT */
/*
 * The memfd that outlives a crash (durable.h).
 *
 * Why what a new process finds is always consistent:
 *  - A journal record is whole or absent: its body is copied first, then its 8-byte header is
 *    stored in one aligned store (a killed process cannot tear it), and the bytes after the
 *    last record are zero (fresh or punched pages), so a reader stops exactly there.
 *  - Records go out under the lock that ordered their change (engine/journal.c) and, through
 *    d->lock here, one at a time in that order.
 *  - The checkpoint and the journal that follows it are chosen by one word (active) among two
 *    descriptors: a new checkpoint is written whole where nothing live is, its descriptor
 *    filled in, and only then the word flipped; the old ones are punched out after.
 *  - A call is in its slot before NOTIF_RECV returns (the kernel copies it there), and leaves
 *    the slot only once answered; in between the kernel holds it pending for whoever holds
 *    the listener, so the next process finds every call nobody answered.
 * The memory is the pages of the memfd, not of this process: a kill -9 loses none of the
 * stores made before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/durable.h"
#include "util/killpoint.h"

#define DUR_MAGIC   "SVDURA\0"
#define DUR_VERSION 1
#define PAGE	    4096ull
#define NSLOTS	    65536u
#define SLOTS_OFF   PAGE
#define DATA_OFF    (SLOTS_OFF + (uint64_t)NSLOTS * sizeof(struct slot))
#define VA_SIZE	    (1ull << 36) /* 64 GiB of address space, of which only what is used is memory */
#define GROW	    (1ull << 20)
#define JID_SHIFT   40 /* a journal id: the process's epoch, then a count of its calls */

struct desc {
	uint64_t ckpt_off, ckpt_len, log_off;
};

struct hdr {
	char magic[8];
	uint32_t version, nslots;
	uint64_t slot_size;
	uint64_t epoch; /* which process took the file over last: one more each time */
	_Atomic uint64_t active;
	struct desc desc[2];
};

struct slot {
	_Atomic uint64_t key; /* the listener's; 0: free */
	uint64_t jid;
	int64_t received_ns; /* 0 until a call came */
	uint64_t pad;
	unsigned char notif[DUR_NOTIF_MAX];
};

_Static_assert(sizeof(struct slot) == 128, "slots are two cache lines");
_Static_assert(sizeof(struct seccomp_notif) <= DUR_NOTIF_MAX, "a notification fits a slot");

struct dur {
	int fd;
	bool own_fd; /* made here: closed with it */
	unsigned char *map;
	struct hdr *hdr;
	struct slot *slots;
	pthread_mutex_t lock; /* appends, checkpoints, size */
	uint64_t size;	      /* of the file */
	uint64_t head;	      /* where the next record goes */
	atomic_ullong calls;  /* journal ids given out */
	struct sv_journal sink;
	pthread_mutex_t free_lock;
	uint32_t *free; /* free slots, a stack */
	uint32_t nfree;
	bool *kept; /* while calls found at the start are served again */
	bool fresh; /* made by this process: nothing to recover from */
};

/* Room up to end: 0, or -ENOSPC past the address space, -errno from ftruncate. */
static int ensure(struct dur *d, uint64_t end)
{
	uint64_t size;

	if (end <= d->size)
		return 0;
	if (end > VA_SIZE)
		return -ENOSPC;
	size = (end + GROW - 1) / GROW * GROW;
	if (size > VA_SIZE)
		size = VA_SIZE;
	if (ftruncate(d->fd, (off_t)size))
		return -errno;
	d->size = size;
	return 0;
}

static const struct desc *current(const struct dur *d)
{
	return &d->hdr->desc[atomic_load_explicit(&d->hdr->active, memory_order_acquire) & 1];
}

static void append(void *ctx, const void *rec, size_t len)
{
	struct dur *d = ctx;
	uint64_t hdr;
	int err;

	xlock(&d->lock);
	/* and 8 zero bytes after it: the end the reader stops at */
	if ((err = ensure(d, d->head + len + 8))) {
		/*
		 * A change that cannot be journaled must not be seen: stop here, and the next
		 * process takes over from the journal as it stands.
		 */
		fprintf(stderr, "semvisor: journal: %s; stopping\n", strerror(-err));
		abort();
	}
	memcpy(d->map + d->head + 8, (const unsigned char *)rec + 8, len - 8);
	sv_kp(SV_KP_JOURNAL);
	memcpy(&hdr, rec, 8);
	__atomic_store_n((uint64_t *)(void *)(d->map + d->head), hdr, __ATOMIC_RELEASE);
	d->head += len;
	xunlock(&d->lock);
}

void dur_append(struct dur *d, const void *rec, size_t len)
{
	append(d, rec, len);
}

const struct sv_journal *dur_sink(struct dur *d)
{
	return &d->sink;
}

static void punch(struct dur *d, uint64_t from, uint64_t to)
{
	from = (from + PAGE - 1) / PAGE * PAGE;
	to = to / PAGE * PAGE;
	if (to > from)
		(void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
				(off_t)(to - from));
}

/*
 * Zeros from off to the end of the file: what follows the last record must read as the end.
 * A process that died leaves there what it was writing (a checkpoint half made). No record
 * lives past off.
 */
static void zero_from(struct dur *d, uint64_t off)
{
	uint64_t page_end = (off + PAGE - 1) / PAGE * PAGE;

	if (off >= d->size)
		return;
	memset(d->map + off, 0, (page_end < d->size ? page_end : d->size) - off);
	punch(d, page_end, d->size);
}

/* The end of the records of a journal at off: where the next one goes. */
static uint64_t log_end(const struct dur *d, uint64_t off)
{
	while (off + 8 <= d->size) {
		uint32_t len;

		memcpy(&len, d->map + off, 4);
		if (!len || len % 8 || len > d->size - off)
			break;
		off += len;
	}
	return off;
}

static int map(struct dur *d)
{
	d->map = mmap(NULL, VA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, d->fd, 0);
	if (d->map == MAP_FAILED)
		return -errno;
	d->hdr = (struct hdr *)(void *)d->map;
	d->slots = (struct slot *)(void *)(d->map + SLOTS_OFF);
	return 0;
}

static int check(struct dur *d)
{
	const struct desc *c;
	struct stat st;

	if (fstat(d->fd, &st) || (uint64_t)st.st_size < DATA_OFF || (uint64_t)st.st_size > VA_SIZE)
		return -EINVAL;
	d->size = (uint64_t)st.st_size;
	if (memcmp(d->hdr->magic, DUR_MAGIC, 8))
		return -EINVAL;
	if (d->hdr->version > DUR_VERSION)
		return -EPROTONOSUPPORT;
	if (d->hdr->version == 0 || d->hdr->nslots != NSLOTS ||
	    d->hdr->slot_size != sizeof(struct slot))
		return -EINVAL;
	c = current(d);
	if (c->log_off < DATA_OFF || c->log_off >= d->size || c->log_off % 8 ||
	    (c->ckpt_len && (c->ckpt_off < DATA_OFF || c->ckpt_off + c->ckpt_len > c->log_off)))
		return -EINVAL;
	return 0;
}

int dur_open(int fd, struct dur **out)
{
	struct dur *d = calloc(1, sizeof(*d));
	int err;

	if (!d || !(d->free = malloc(NSLOTS * sizeof(*d->free))) ||
	    !(d->kept = calloc(NSLOTS, sizeof(*d->kept)))) {
		err = -ENOMEM;
		goto fail;
	}
	d->fd = fd;
	d->own_fd = fd < 0;
	if (fd < 0 && (d->fd = memfd_create("semvisor-journal", MFD_CLOEXEC)) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = map(d)))
		goto fail;
	/* an empty file given to be one (semvisor-run's, made before its supervisor) is new */
	if (fd >= 0 && lseek(fd, 0, SEEK_END) == 0)
		fd = -1;
	if (fd < 0) {
		if ((err = ensure(d, DATA_OFF + PAGE)))
			goto fail;
		memcpy(d->hdr->magic, DUR_MAGIC, 8);
		d->hdr->version = DUR_VERSION;
		d->hdr->nslots = NSLOTS;
		d->hdr->slot_size = sizeof(struct slot);
		d->hdr->desc[0] = (struct desc){ 0, 0, DATA_OFF };
		d->head = DATA_OFF;
	} else {
		if ((err = check(d)))
			goto fail;
		d->head = log_end(d, current(d)->log_off);
		zero_from(d, d->head);
	}
	/* ids this process gives out cannot be those of one before it */
	d->hdr->epoch++;
	d->sink = (struct sv_journal){ .append = append, .ctx = d };
	xmutex_init(&d->lock);
	xmutex_init(&d->free_lock);
	/* a new file has every slot free; a taken-over one, those dur_calls_done() frees */
	if (fd < 0)
		dur_calls_done(d);
	d->fresh = fd < 0;
	*out = d;
	return 0;
fail:
	if (d && d->map && d->map != MAP_FAILED)
		munmap(d->map, VA_SIZE);
	if (d && d->own_fd && d->fd >= 0)
		close(d->fd);
	if (d) {
		free(d->free);
		free(d->kept);
	}
	free(d);
	return err;
}

void dur_close(struct dur *d)
{
	if (!d)
		return;
	munmap(d->map, VA_SIZE);
	if (d->own_fd)
		close(d->fd);
	xmutex_destroy(&d->lock);
	xmutex_destroy(&d->free_lock);
	free(d->free);
	free(d->kept);
	free(d);
}

int dur_fd(const struct dur *d)
{
	return d->fd;
}

bool dur_fresh(const struct dur *d)
{
	return d->fresh;
}

/* ---- calls ---- */

int dur_slot_take(struct dur *d)
{
	int slot = -1;

	xlock(&d->free_lock);
	if (d->nfree)
		slot = (int)d->free[--d->nfree];
	xunlock(&d->free_lock);
	return slot;
}

void dur_slot_put(struct dur *d, int slot)
{
	atomic_store_explicit(&d->slots[slot].key, 0, memory_order_release);
	xlock(&d->free_lock);
	d->free[d->nfree++] = (uint32_t)slot;
	xunlock(&d->free_lock);
}

struct seccomp_notif *dur_slot_arm(struct dur *d, int slot, uint64_t key, uint64_t *jid)
{
	struct slot *s = &d->slots[slot];

	*jid = d->hdr->epoch << JID_SHIFT | (atomic_fetch_add(&d->calls, 1) + 1);
	s->jid = *jid;
	s->received_ns = 0;
	memset(s->notif, 0, sizeof(s->notif));
	atomic_store_explicit(&s->key, key, memory_order_release);
	return (struct seccomp_notif *)(void *)s->notif;
}

void dur_slot_received(struct dur *d, int slot, int64_t now)
{
	d->slots[slot].received_ns = now;
}

int dur_for_each_call(struct dur *d, int (*fn)(const struct dur_call *c, void *arg), void *arg)
{
	for (uint32_t i = 0; i < NSLOTS; i++) {
		struct slot *s = &d->slots[i];
		const struct seccomp_notif *n = (const void *)s->notif;
		struct dur_call c;
		int rc;

		if (!atomic_load_explicit(&s->key, memory_order_acquire) || !n->id)
			continue;
		c = (struct dur_call){ (int)i, s->key, s->jid, s->received_ns, n };
		if ((rc = fn(&c, arg)))
			return rc;
	}
	return 0;
}

void dur_slot_keep(struct dur *d, int slot)
{
	d->kept[slot] = true;
}

void dur_calls_done(struct dur *d)
{
	xlock(&d->free_lock);
	d->nfree = 0;
	/* highest first on the stack: slots are used from the bottom, which keeps pages few */
	for (uint32_t i = NSLOTS; i-- > 0;) {
		if (d->kept[i]) {
			d->kept[i] = false;
			continue;
		}
		atomic_store_explicit(&d->slots[i].key, 0, memory_order_relaxed);
		d->free[d->nfree++] = i;
	}
	xunlock(&d->free_lock);
}

/* ---- the checkpoint ---- */

int dur_checkpoint(struct dur *d, const void *blob, size_t len)
{
	uint64_t a, off, log_off;
	struct desc old;
	int err;

	xlock(&d->lock);
	a = atomic_load_explicit(&d->hdr->active, memory_order_relaxed);
	old = d->hdr->desc[a & 1];
	/*
	 * After everything live; or, once past half the address space, back at the start of
	 * the data, below everything live (punched since: zero).
	 */
	off = (d->head + 8 + PAGE - 1) / PAGE * PAGE; /* a zero header at least before it */
	if (off > VA_SIZE / 2 &&
	    DATA_OFF + len + 2 * PAGE <= (old.ckpt_len ? old.ckpt_off : old.log_off))
		off = DATA_OFF;
	log_off = (off + len + PAGE - 1) / PAGE * PAGE;
	if ((err = ensure(d, log_off + PAGE))) {
		xunlock(&d->lock);
		return err;
	}
	/* the new journal starts empty: nothing of an earlier checkpoint half made there */
	zero_from(d, d->head);
	if (off < d->head)
		punch(d, log_off, old.ckpt_len ? old.ckpt_off : old.log_off);
	memcpy(d->map + off, blob, len);
	d->hdr->desc[(a + 1) & 1] = (struct desc){ off, len, log_off };
	sv_kp(SV_KP_CHECKPOINT);
	atomic_store_explicit(&d->hdr->active, a + 1, memory_order_seq_cst);
	/* the old checkpoint and journal are dead now */
	punch(d, old.ckpt_len ? old.ckpt_off : old.log_off, d->head);
	d->head = log_off;
	xunlock(&d->lock);
	return 0;
}

void dur_current(const struct dur *d, const void **ckpt, size_t *ckpt_len, const void **log,
		 size_t *log_len)
{
	const struct desc *c = current(d);

	*ckpt = d->map + c->ckpt_off;
	*ckpt_len = c->ckpt_len;
	*log = d->map + c->log_off;
	*log_len = log_end(d, c->log_off) - c->log_off;
}

size_t dur_log_size(const struct dur *d)
{
	return d->head - current(d)->log_off;
}

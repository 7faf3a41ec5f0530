/* SPDX-License-Identifier: MIT */
/*
 * The memory of the fast path (server/engine/model/fastpath.pml, server/engine/fastword.h):
 * memfds the supervisor maps and hands to programs, sealed so that what a program does to its
 * fd cannot hurt the supervisor or forge what it publishes.
 *
 *   words   one word per semaphore, a cache line apart (fw_word_at()); programs with alter
 *           permission map it writable. Sealed against shrinking (a shrunk file would make
 *           the supervisor's own accesses fault with SIGBUS), growing, and further seals (a
 *           program adding F_SEAL_FUTURE_WRITE would shut everyone else out of their
 *           writable mappings).
 *   pub     struct fw_pub; programs map it read-only. Sealed as words are, and with
 *           F_SEAL_FUTURE_WRITE once the supervisor has its writable mapping: no later mapping
 *           can write, through any fd or reopening of the file, and neither can write(2) or a
 *           hole punched with fallocate(2). The supervisor's mapping keeps writing.
 *   page    struct fw_page, one per (process, set); only that process maps it, writable.
 *           Sealed as words are. What a process writes or punches there is its own semadj.
 *
 * Every file starts as zeros, and a new set's words start held by the supervisor (SLOW): no
 * fast operation can happen until the engine gives a word, after it has published.
 * None of this takes a lock; the caller owns the objects.
 */
#ifndef SV_ENGINE_FASTMEM_H
#define SV_ENGINE_FASTMEM_H

#include <stddef.h>

#include "engine/fastword.h"

struct sv_fastmem {
	unsigned nsems;
	int words_fd; /* O_RDWR; for programs with alter permission */
	int pub_fd;   /* O_RDONLY; sealed against every new writable mapping */
	size_t words_len, pub_len;
	_Atomic uint64_t *words; /* the supervisor's mappings */
	struct fw_pub *pub;
};

struct sv_fastpage {
	unsigned nsems;
	int fd; /* O_RDWR; for the one process it belongs to */
	size_t len;
	struct fw_page *page;
};

/* 0, or -errno (-ENOMEM, -EMFILE, ...), with nothing left behind. nsems >= 1. */
int sv_fastmem_create(struct sv_fastmem *m, unsigned nsems);
void sv_fastmem_destroy(struct sv_fastmem *m);

int sv_fastpage_create(struct sv_fastpage *p, unsigned nsems);
void sv_fastpage_destroy(struct sv_fastpage *p);

/* The bytes a program maps: the files' sizes (whole pages). */
size_t sv_fastmem_words_len(unsigned nsems);
size_t sv_fastmem_pub_len(unsigned nsems);
size_t sv_fastpage_len(unsigned nsems);

#endif /* SV_ENGINE_FASTMEM_H */

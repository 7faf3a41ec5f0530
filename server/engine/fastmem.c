/* SPDX-License-Identifier: MIT */
/*
 * The fast path's memfds (see fastmem.h for what each is and why it is sealed as it is).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/fastmem.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3: never executable, and sealed so */
#endif

#define SEALS_FIXED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static size_t whole_pages(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) / pg * pg;
}

size_t sv_fastmem_words_len(unsigned nsems)
{
	return whole_pages((size_t)nsems * FW_WORD_STRIDE * sizeof(uint64_t));
}

size_t sv_fastmem_pub_len(unsigned nsems)
{
	return whole_pages(sizeof(struct fw_pub) + (size_t)nsems * sizeof(uint64_t));
}

size_t sv_fastpage_len(unsigned nsems)
{
	return whole_pages(sizeof(struct fw_page) + (size_t)nsems * sizeof(struct fw_adj));
}

/* A memfd of len bytes of zeros, mapped shared and writable: the fd, or -errno. */
static int memfd_mapped(const char *name, size_t len, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL), err;

	if (fd < 0 && errno == EINVAL) /* before Linux 6.3 */
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) != 0)
		goto fail;
	*map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED)
		goto fail;
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

/* Seals fd with `seals` and gives it back as `flags` (a reopening: a description of its own). */
static int seal_and_reopen(int fd, int seals, int flags)
{
	char self[32];
	int again;

	if (fcntl(fd, F_ADD_SEALS, seals) != 0)
		return -errno;
	if (flags == O_RDWR)
		return fd;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	again = open(self, flags | O_CLOEXEC);
	if (again < 0)
		return -errno;
	close(fd);
	return again;
}

int sv_fastmem_create(struct sv_fastmem *m, unsigned nsems)
{
	void *words = MAP_FAILED, *pub = MAP_FAILED;
	int wfd, pfd = -1, err;

	memset(m, 0, sizeof(*m));
	m->words_fd = m->pub_fd = -1;
	if (nsems == 0)
		return -EINVAL;
	m->nsems = nsems;
	m->words_len = sv_fastmem_words_len(nsems);
	m->pub_len = sv_fastmem_pub_len(nsems);
	wfd = memfd_mapped("semvisor-words", m->words_len, &words);
	if (wfd < 0)
		return wfd;
	m->words_fd = wfd;
	m->words = words;
	for (unsigned i = 0; i < nsems; i++)
		atomic_store(fw_word_at(m->words, i),
			     fw_word(0, true, 0)); /* held until the engine gives it */
	err = seal_and_reopen(wfd, SEALS_FIXED, O_RDWR);
	if (err < 0)
		goto fail;
	pfd = memfd_mapped("semvisor-pub", m->pub_len, &pub);
	if (pfd < 0) {
		err = pfd;
		goto fail;
	}
	m->pub = pub;
	/* after the mapping above: F_SEAL_FUTURE_WRITE leaves existing mappings writable */
	err = seal_and_reopen(pfd, SEALS_FIXED | F_SEAL_FUTURE_WRITE, O_RDONLY);
	if (err < 0) {
		close(pfd);
		goto fail;
	}
	m->pub_fd = err;
	return 0;
fail:
	sv_fastmem_destroy(m);
	return err;
}

void sv_fastmem_destroy(struct sv_fastmem *m)
{
	if (m->words != NULL)
		munmap((void *)m->words, m->words_len);
	if (m->pub != NULL)
		munmap(m->pub, m->pub_len);
	if (m->words_fd >= 0)
		close(m->words_fd);
	if (m->pub_fd >= 0)
		close(m->pub_fd);
	memset(m, 0, sizeof(*m));
	m->words_fd = m->pub_fd = -1;
}

int sv_fastpage_create(struct sv_fastpage *p, unsigned nsems)
{
	void *page = MAP_FAILED;
	int fd, err;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (nsems == 0)
		return -EINVAL;
	p->nsems = nsems;
	p->len = sv_fastpage_len(nsems);
	fd = memfd_mapped("semvisor-page", p->len, &page);
	if (fd < 0)
		return fd;
	p->fd = fd;
	p->page = page;
	err = seal_and_reopen(fd, SEALS_FIXED, O_RDWR);
	if (err < 0) {
		sv_fastpage_destroy(p);
		return err;
	}
	return 0;
}

void sv_fastpage_destroy(struct sv_fastpage *p)
{
	if (p->page != NULL)
		munmap(p->page, p->len);
	if (p->fd >= 0)
		close(p->fd);
	memset(p, 0, sizeof(*p));
	p->fd = -1;
}

/* SPDX-License-Identifier: MIT */
/*
 * syscalls.c linked statically (-static): no dynamic loader, glibc's semop() and the raw calls
 * compiled in, as in the static and musl binaries the filter must also catch. It first says
 * whether it really is static (no PT_INTERP program header), so a build that forgot -static
 * shows up as a difference from the expected output rather than passing unnoticed.
 *
 * The generic tests/prog rule builds it dynamically; it needs its own rule, e.g.
 *   $(O)/tests/prog/static-%: tests/prog/static-%.c
 *           $(CC) $(CPPFLAGS) $(filter-out -fsanitize=%,$(CFLAGS)) -static -o $@ $< -pthread
 * (sanitizers cannot link statically).
 */
#include <elf.h>
#include <stdbool.h>
#include <link.h>
#include <sys/auxv.h>

#define PROG_SAY_STATIC 1
static bool linked_statically(void);

#include "syscalls.c"

static bool linked_statically(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);

	for (unsigned long i = 0; ph && i < n; i++)
		if (ph[i].p_type == PT_INTERP)
			return false;
	return true;
}

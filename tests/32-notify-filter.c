/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter, checked against the kernel's own system-call tables: the program
 * filter_install() loads is run here, by a small classic-BPF interpreter, over every number of
 * the x86_64, x32 and i386 tables (read from the kernel's uapi headers, asm/unistd_{64,x32,32}.h)
 * with arguments chosen to cross every rule, and each verdict is compared with what filter.h
 * promises: the semaphore calls of x86_64 and x32 trapped, every i386 semaphore entry point
 * (ipc(2) with any version in the upper 16 bits, semget, semctl, semtimedop_time64) refused
 * with ENOSYS, unshare/setns trapped exactly in the forms that change an IPC namespace or the
 * undo list,
 * and everything else let through. A rule that lands on the wrong number (the i386 ipc number
 * read as a native one, say) fails here by name.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "notify/filter.h"

#define X32_BIT	  0x40000000u
#define MAX_NAMES 1100

struct table {
	const char *header;
	uint32_t arch;
	int n;
	struct {
		char name[48];
		uint32_t nr;
	} e[MAX_NAMES];
};

/* "#define __NR_name 123" or "#define __NR_name (__X32_SYSCALL_BIT + 123)" */
static void load_table(struct table *t, const char *header, uint32_t arch)
{
	char path[256], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/usr/include/x86_64-linux-gnu/asm/%s", header);
	f = fopen(path, "re");
	cr_assert(f, "%s: %s (the kernel's uapi headers, package linux-libc-dev)", path,
		  strerror(errno));
	t->header = header;
	t->arch = arch;
	t->n = 0;
	while (fgets(line, sizeof(line), f) && t->n < MAX_NAMES) {
		char name[48];
		unsigned int nr;

		if (sscanf(line, "#define __NR_%47s (__X32_SYSCALL_BIT + %u)", name, &nr) == 2)
			nr |= X32_BIT;
		else if (sscanf(line, "#define __NR_%47s %u", name, &nr) != 2)
			continue;
		snprintf(t->e[t->n].name, sizeof(t->e[t->n].name), "%s", name);
		t->e[t->n++].nr = nr;
	}
	fclose(f);
	cr_assert(t->n > 300, "%s: only %d system calls found", path, t->n);
}

/* ---- a classic BPF interpreter, for what seccomp programs use ---- */

static uint32_t run_bpf(const struct sock_filter *p, int len, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	for (int pc = 0; pc < len; pc++) {
		const struct sock_filter *i = &p[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;

		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
			cr_assert(BPF_MODE(i->code) == BPF_ABS || BPF_MODE(i->code) == BPF_MEM ||
				  BPF_MODE(i->code) == BPF_IMM);
			if (BPF_MODE(i->code) == BPF_ABS) {
				cr_assert(i->k % 4 == 0 && i->k + 4 <= sizeof(*d), "load at %u",
					  i->k);
				memcpy(&a, (const char *)d + i->k, 4);
			} else if (BPF_MODE(i->code) == BPF_MEM) {
				a = mem[i->k];
			} else {
				a = i->k;
			}
			break;
		case BPF_LDX:
			x = BPF_MODE(i->code) == BPF_MEM ? mem[i->k] : i->k;
			break;
		case BPF_ST:
			mem[i->k] = a;
			break;
		case BPF_STX:
			mem[i->k] = x;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD:
				a += src;
				break;
			case BPF_SUB:
				a -= src;
				break;
			case BPF_MUL:
				a *= src;
				break;
			case BPF_AND:
				a &= src;
				break;
			case BPF_OR:
				a |= src;
				break;
			case BPF_XOR:
				a ^= src;
				break;
			case BPF_LSH:
				a <<= src;
				break;
			case BPF_RSH:
				a >>= src;
				break;
			case BPF_NEG:
				a = -a;
				break;
			default:
				cr_assert_fail("ALU op %#x", i->code);
			}
			break;
		case BPF_JMP: {
			bool t = false;

			if (BPF_OP(i->code) == BPF_JA) {
				pc += (int)i->k;
				break;
			}
			switch (BPF_OP(i->code)) {
			case BPF_JEQ:
				t = a == src;
				break;
			case BPF_JGT:
				t = a > src;
				break;
			case BPF_JGE:
				t = a >= src;
				break;
			case BPF_JSET:
				t = (a & src) != 0;
				break;
			default:
				cr_assert_fail("JMP op %#x", i->code);
			}
			pc += t ? i->jt : i->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(i->code) == BPF_A ? a : i->k;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		}
	}
	cr_assert_fail("the program ran off its end");
	return 0;
}

static struct sock_filter *prog;
static int prog_len;

static uint32_t verdict(uint32_t arch, uint32_t nr, uint64_t a0, uint64_t a1)
{
	struct seccomp_data d = { .nr = (int)nr, .arch = arch, .args = { a0, a1 } };

	return run_bpf(prog, prog_len, &d);
}

static const char *action_name(uint32_t v, char *buf, size_t len)
{
	if (v == SECCOMP_RET_ALLOW)
		return "ALLOW";
	if (v == SECCOMP_RET_USER_NOTIF)
		return "NOTIFY";
	if ((v & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
		snprintf(buf, len, "ERRNO(%u)", v & SECCOMP_RET_DATA);
	else
		snprintf(buf, len, "%#x", v);
	return buf;
}

static void expect(const struct table *t, const char *name, uint32_t nr, uint64_t a0, uint64_t a1,
		   uint32_t want)
{
	uint32_t got = verdict(t->arch, nr, a0, a1);
	char b1[32], b2[32];

	cr_expect(got == want, "%s: %s (%#x) with args %#llx, %#llx: %s, want %s", t->header, name,
		  nr, (unsigned long long)a0, (unsigned long long)a1,
		  action_name(got, b1, sizeof(b1)), action_name(want, b2, sizeof(b2)));
}

static bool is(const char *name, const char *what)
{
	return !strcmp(name, what);
}

static const uint32_t NOTIFY = SECCOMP_RET_USER_NOTIF;
static const uint32_t ALLOW = SECCOMP_RET_ALLOW;
static const uint32_t NOSYS = SECCOMP_RET_ERRNO | ENOSYS;

/* unshare flags and setns nstypes to try, and whether each is a namespace change we trap */
static const struct {
	uint64_t v;
	bool unshare_traps, setns_traps;
} ns_args[] = {
	{ 0, false, true },
	{ CLONE_NEWIPC, true, true },
	{ CLONE_NEWUSER, false, false },
	{ CLONE_SYSVSEM, true, false },
	{ CLONE_NEWNS, false, false },
	{ CLONE_NEWNET, false, false },
	{ CLONE_NEWUTS | CLONE_NEWPID, false, false },
	{ CLONE_NEWIPC | CLONE_NEWNET, true, true },
	{ CLONE_NEWUSER | CLONE_NEWIPC, true, true },
	{ CLONE_NEWUSER | CLONE_SYSVSEM, true, false },
	/* the kernel reads setns's nstype as an int: bits above 31 are not there */
	{ 0xffffffff00000000ull, false, true },
	{ 0xffffffff00000000ull | CLONE_NEWNET, false, false },
};

static void check_tables(bool trap_ns)
{
	struct filter_opts o = { .trap_ns_changes = trap_ns };
	static struct table t64, tx32, t32;
	void *p;

	prog_len = filter_export(&o, &p);
	cr_assert(prog_len > 0, "filter_export: %s", strerror(-prog_len));
	prog = p;
	load_table(&t64, "unistd_64.h", AUDIT_ARCH_X86_64);
	load_table(&tx32, "unistd_x32.h", AUDIT_ARCH_X86_64);
	load_table(&t32, "unistd_32.h", AUDIT_ARCH_I386);

	const struct table *tabs[] = { &t64, &tx32, &t32 };
	bool x32 = filter_kernel_has_x32();

	for (int ti = 0; ti < 3; ti++) {
		const struct table *t = tabs[ti];
		bool i386 = t == &t32;

		/* without x32 in the kernel its whole table fails with ENOSYS, as natively */
		if (t == &tx32 && !x32) {
			for (int i = 0; i < t->n; i++)
				expect(t, t->e[i].name, t->e[i].nr, 0, 0, NOSYS);
			continue;
		}

		for (int i = 0; i < t->n; i++) {
			const char *name = t->e[i].name;
			uint32_t nr = t->e[i].nr;

			if (!i386 && (is(name, "semget") || is(name, "semop") ||
				      is(name, "semtimedop") || is(name, "semctl"))) {
				expect(t, name, nr, 0, 0, NOTIFY);
				expect(t, name, nr, ~0ull, ~0ull, NOTIFY);
			} else if (i386 && (is(name, "semget") || is(name, "semctl") ||
					    is(name, "semtimedop_time64"))) {
				expect(t, name, nr, 0, 0, NOSYS);
			} else if (i386 && is(name, "ipc")) {
				/* call in the low 16 bits, a version in the upper */
				for (uint32_t ver = 0; ver < 4; ver++)
					for (uint32_t call = 0; call <= 24; call++)
						expect(t, name, nr, call | ver << 16, 0,
						       call >= 1 && call <= 4 ? NOSYS : ALLOW);
				expect(t, name, nr, 2 | 0xffffu << 16, 0, NOSYS);
			} else if (is(name, "unshare") || is(name, "setns")) {
				bool un = is(name, "unshare");

				for (size_t a = 0; a < sizeof(ns_args) / sizeof(ns_args[0]); a++) {
					bool traps =
					    un ? ns_args[a].unshare_traps : ns_args[a].setns_traps;
					uint64_t v = ns_args[a].v;

					/* i386 arguments are 32 bits wide */
					if (i386 && (v >> 32))
						continue;
					if (un)
						expect(t, name, nr, v, 0,
						       traps && trap_ns ? NOTIFY : ALLOW);
					else
						expect(t, name, nr, 3, v,
						       traps && trap_ns ? NOTIFY : ALLOW);
				}
			} else {
				/* everything else, credential changes included, runs natively */
				expect(t, name, nr, 0, 0, ALLOW);
				expect(t, name, nr, 117, 2, ALLOW);
			}
		}
	}
	/* numbers in no table are none of our business either */
	expect(&t64, "(none)", 999, 0, 0, ALLOW);
	expect(&t32, "(none)", 999, 0, 0, ALLOW);
	free(prog);
}

Test(notify_filter, every_number_of_every_table)
{
	check_tables(true);
}

Test(notify_filter, without_namespace_traps)
{
	check_tables(false);
}

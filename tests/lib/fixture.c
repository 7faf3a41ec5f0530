/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine/fastmem.h"
#include "notify/filter.h"
#include "handoff/xfer.h"
#include "tests/lib/fixture.h"

struct sv_ns *fx_ns;

void fx_setup(void)
{
	struct sv_limits lim;

	sv_thread_register();
	sv_limits_default(&lim);
	fx_ns = sv_ns_new(&lim);
	if (!fx_ns)
		abort();
}

void fx_teardown(void)
{
	sv_ns_put(fx_ns);
	fx_ns = NULL;
	sv_thread_unregister();
}

struct fx_caller *fx_caller_new(struct sv_ns *ns, int32_t pid, uint32_t uid, uint32_t gid)
{
	struct fx_caller *fc = calloc(1, sizeof(*fc));

	if (!fc)
		abort();
	fc->cred.euid = uid;
	fc->cred.egid = gid;
	fc->cred.fsgid = gid;
	fc->cred.groups = fc->groups;
	fc->cred.cap_ipc_owner = uid == 0;
	fc->cred.cap_sys_admin = uid == 0;
	fc->c.ns = ns;
	fc->c.cred = &fc->cred;
	fc->c.proc = sv_proc_new(ns, pid);
	if (!fc->c.proc)
		abort();
	return fc;
}

struct fx_caller *fx_caller_thread(struct fx_caller *of)
{
	struct fx_caller *fc = calloc(1, sizeof(*fc));

	if (!fc)
		abort();
	*fc = *of;
	fc->cred.groups = fc->groups;
	fc->c.cred = &fc->cred;
	sv_proc_get(fc->c.proc);
	return fc;
}

void fx_caller_exit(struct fx_caller *fc, struct sv_wakeq *wq)
{
	struct sv_wakeq local;

	sv_wakeq_init(&local);
	sv_proc_exit(fc->c.proc, wq ? wq : &local);
	while (!sv_wakeq_empty(&local))
		sv_waiter_free(sv_wakeq_pop(&local));
	sv_proc_put(fc->c.proc);
	free(fc);
}

long fx_semop(struct fx_caller *fc, int id, struct sv_park *park, struct sv_wakeq *wq,
	      unsigned int nsops, const struct sv_sembuf *sops)
{
	struct sv_park local = { 0 };
	struct sv_wakeq lwq;
	long r;

	sv_wakeq_init(&lwq);
	r = sv_semtimedop(&fc->c, id, (uint64_t)(uintptr_t)sops, nsops, 0, park ? park : &local,
			  wq ? wq : &lwq);
	if (!wq)
		fx_drain(&lwq, NULL, NULL, 0);
	if (r == SV_PARKED && !park) {
		/* nobody wants the ticket: take it back */
		if (sv_waiter_cancel(local.waiter) == 0)
			sv_waiter_free(local.waiter);
	}
	return r;
}

long fx_semctl(struct fx_caller *fc, int id, int semnum, int cmd, uint64_t arg, struct sv_wakeq *wq)
{
	struct sv_wakeq lwq;
	long r;

	sv_wakeq_init(&lwq);
	r = sv_semctl(&fc->c, id, semnum, cmd, arg, wq ? wq : &lwq);
	if (!wq)
		fx_drain(&lwq, NULL, NULL, 0);
	return r;
}

int fx_getval(struct fx_caller *fc, int id, int semnum)
{
	return (int)fx_semctl(fc, id, semnum, SV_GETVAL, 0, NULL);
}

int fx_drain(struct sv_wakeq *wq, int *res, void **cookies, int cap)
{
	struct sv_waiter *w;
	int n = 0;

	while ((w = sv_wakeq_pop(wq))) {
		if (n < cap) {
			if (res)
				res[n] = sv_waiter_result(w);
			if (cookies)
				cookies[n] = sv_waiter_cookie(w);
		}
		n++;
		sv_waiter_free(w);
	}
	return n;
}

long fx_semtimedop(struct fx_caller *fc, int id, const struct timespec *ts, struct sv_park *park,
		   struct sv_wakeq *wq, unsigned int nsops, const struct sv_sembuf *sops)
{
	struct sv_park local = { 0 };
	struct sv_wakeq lwq;
	long r;

	sv_wakeq_init(&lwq);
	r = sv_semtimedop(&fc->c, id, (uint64_t)(uintptr_t)sops, nsops, (uint64_t)(uintptr_t)ts,
			  park ? park : &local, wq ? wq : &lwq);
	if (!wq)
		fx_drain(&lwq, NULL, NULL, 0);
	if (r == SV_PARKED && !park) {
		if (sv_waiter_cancel(local.waiter) == 0)
			sv_waiter_free(local.waiter);
	}
	return r;
}

struct sv_waiter *fx_park(struct fx_caller *fc, int id, void *cookie, long *ret, unsigned int nsops,
			  const struct sv_sembuf *sops)
{
	struct sv_park park = { .cookie = cookie };
	long r = fx_semop(fc, id, &park, NULL, nsops, sops);

	if (ret)
		*ret = r;
	return r == SV_PARKED ? park.waiter : NULL;
}

int fx_getncnt(struct fx_caller *fc, int id, int semnum)
{
	return (int)fx_semctl(fc, id, semnum, SV_GETNCNT, 0, NULL);
}

int fx_getzcnt(struct fx_caller *fc, int id, int semnum)
{
	return (int)fx_semctl(fc, id, semnum, SV_GETZCNT, 0, NULL);
}

int fx_getpid(struct fx_caller *fc, int id, int semnum)
{
	return (int)fx_semctl(fc, id, semnum, SV_GETPID, 0, NULL);
}

int fx_take(struct sv_wakeq *wq, struct sv_waiter **w, int cap)
{
	struct sv_waiter *x;
	int n = 0;

	while ((x = sv_wakeq_pop(wq))) {
		if (n < cap)
			w[n] = x;
		else
			sv_waiter_free(x);
		n++;
	}
	return n;
}

long fx_ipc_stat(struct fx_caller *fc, int id, struct fx_stat *st)
{
	unsigned char b[104];
	long r = fx_semctl(fc, id, 0, SV_IPC_STAT, (uint64_t)(uintptr_t)b, NULL);

	memset(st, 0, sizeof(*st));
	if (r < 0)
		return r;
	memcpy(&st->key, b + 0, 4);
	memcpy(&st->uid, b + 4, 4);
	memcpy(&st->gid, b + 8, 4);
	memcpy(&st->cuid, b + 12, 4);
	memcpy(&st->cgid, b + 16, 4);
	memcpy(&st->mode, b + 20, 4);
	memcpy(&st->seq, b + 24, 2);
	memcpy(&st->otime, b + 48, 8);
	memcpy(&st->ctime, b + 64, 8);
	memcpy(&st->nsems, b + 80, 8);
	return r;
}

void fx_confine(int sock)
{
	struct filter_opts fo = { 0 };
	struct ho_info info = { .pid = getpid() };
	char err[256];
	int l = filter_install(&fo, err, sizeof(err));

	if (l < 0) {
		dprintf(2, "child: %s\n", err);
		_exit(92);
	}
	if (ho_send(sock, l, &info))
		_exit(93);
	close(l);
}

static int magic_listener = -1;

int fx_magic_listener(void)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getpgid, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FX_MAGIC_PID, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };

	if (magic_listener >= 0)
		return magic_listener;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	magic_listener = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
				      SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	return magic_listener >= 0 ? magic_listener : -errno;
}

void fx_magic_listener_closed(void)
{
	magic_listener = -1;
}

/* fd's file mapped whole (the fd is closed): NULL if it could not be. */
static void *map_whole(int fd, size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_SHARED, fd, 0);

	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

int fx_fast_map(struct fx_caller *fc, int id, struct fx_fast *p)
{
	int fd[SV_FAST_FILES];

	for (int i = 0; i < SV_FAST_FILES; i++) {
		fd[i] = sv_fast_file(&fc->c, id, (enum sv_fast_file)i, &p->m);
		if (fd[i] < 0) {
			int err = fd[i];

			while (i-- > 0)
				close(fd[i]);
			return err;
		}
	}
	p->page = map_whole(fd[SV_FAST_PAGE], sv_fastpage_len(p->m.nsems), PROT_READ | PROT_WRITE);
	p->words =
	    map_whole(fd[SV_FAST_WORDS], sv_fastmem_words_len(p->m.nsems), PROT_READ | PROT_WRITE);
	p->pub = map_whole(fd[SV_FAST_PUB], sv_fastmem_pub_len(p->m.nsems), PROT_READ);
	if (!p->words || !p->pub || !p->page)
		abort(); /* the engine's own files: a test cannot go on without them */
	return 0;
}

void fx_fast_unmap(struct fx_fast *p)
{
	munmap((void *)p->words, sv_fastmem_words_len(p->m.nsems));
	munmap(p->pub, sv_fastmem_pub_len(p->m.nsems));
	munmap(p->page, sv_fastpage_len(p->m.nsems));
}

struct fw_op fx_fast_op(const struct fx_fast *p, unsigned slot, unsigned num, int d, bool undo)
{
	return (struct fw_op){
		.word = fw_word_at(p->words, num),
		.pub = p->pub,
		.page = p->page,
		.map_epoch = p->m.epoch,
		.owner = fw_owner(p->m.page, slot),
		.tag = fw_tag(p->m.page),
		.slot = slot,
		.semnum = num,
		.d = d,
		.undo = undo,
	};
}

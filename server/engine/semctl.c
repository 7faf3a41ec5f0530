/* SPDX-License-Identifier: MIT */
/*
 * semctl(2): every command, with the kernel's checks in the kernel's order (ipc/sem.c
 * ksys_semctl and the semctl_* helpers).
 *
 * Structures go to and come from the caller's memory in the x86_64 layout (struct semid64_ds,
 * struct seminfo), or for i386 callers in the compat layouts (sv_semctl_compat(), the kernel's
 * compat_ksys_semctl). Like the kernel, results are gathered under the lock and copied out
 * after it is dropped; buffers are copied in before any lock is taken.
 *
 * The kernel's compat path passes the command on with IPC_64 still set where the direct i386
 * semctl carries it: `cmd & ~IPC_64` picks the case, while the helpers compare cmd itself, so
 * that SEM_INFO|IPC_64 reports IPC_INFO's figures, IPC_STAT|IPC_64 returns the id, and
 * GETVAL|IPC_64 fails with EINVAL after the checks GETVAL makes. The helpers here compare the
 * same way, and so give the same answers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"

#define S_IRUGO_ 0444
#define S_IWUGO_ 0222

/* struct semid64_ds on x86_64 (arch/x86/include/uapi/asm/sembuf.h), 104 bytes. */
struct semid64_ds_x86_64 {
	int32_t key;
	uint32_t uid, gid, cuid, cgid;
	uint32_t mode;
	uint16_t seq;
	uint16_t pad2;
	uint32_t pad3;
	uint64_t unused1, unused2;
	int64_t otime;
	uint64_t otime_high;
	int64_t ctime;
	uint64_t ctime_high;
	uint64_t nsems;
	uint64_t unused3, unused4;
};
_Static_assert(sizeof(struct semid64_ds_x86_64) == 104, "semid64_ds layout");

/*
 * struct compat_semid64_ds (arch/x86/include/asm/compat.h): the i386 semid64_ds, 64 bytes.
 * Times are split into low and high words; the mode is 16 bits.
 */
struct semid64_ds_i386 {
	int32_t key;
	uint32_t uid, gid, cuid, cgid;
	uint16_t mode, pad1;
	uint16_t seq, pad2;
	uint32_t unused1, unused2;
	uint32_t otime, otime_high, ctime, ctime_high;
	uint32_t nsems, unused3, unused4;
};
_Static_assert(sizeof(struct semid64_ds_i386) == 64, "compat_semid64_ds layout");

/*
 * struct compat_semid_ds (ipc/sem.c): the old i386 layout, ipc(2) without IPC_64. 16-bit ids
 * (an id past 65535 reads as the overflow id), 32-bit times, pointers the kernel leaves 0.
 */
struct semid_ds_i386_old {
	int32_t key;
	uint16_t uid, gid, cuid, cgid;
	uint16_t mode, seq;
	int32_t otime, ctime;
	uint32_t base, pending, pending_last, undo;
	uint16_t nsems;
};
_Static_assert(sizeof(struct semid_ds_i386_old) == 44, "compat_semid_ds layout");

/* struct seminfo: ten ints. */
struct seminfo_abi {
	int32_t semmap, semmni, semmns, semmnu, semmsl, semopm, semume, semusz, semvmx, semaem;
};
_Static_assert(sizeof(struct seminfo_abi) == 40, "seminfo layout");

static uint32_t uid_out(const struct sv_caller *c, uint32_t uid)
{
	return c->ops && c->ops->uid_out ? c->ops->uid_out(c, uid) : uid;
}

static uint32_t gid_out(const struct sv_caller *c, uint32_t gid)
{
	return c->ops && c->ops->gid_out ? c->ops->gid_out(c, gid) : gid;
}

static int32_t pid_out(const struct sv_caller *c, int32_t pid)
{
	return c->ops && c->ops->pid_out && pid ? c->ops->pid_out(c, pid) : pid;
}

static long semctl_info(const struct sv_caller *c, int cmd, uint64_t arg)
{
	struct sv_ns *ns = c->ns;
	struct seminfo_abi si;
	int max_idx;

	memset(&si, 0, sizeof(si));
	si.semmni = SV_RELAXED(&ns->semmni);
	si.semmns = SV_RELAXED(&ns->semmns);
	si.semmsl = SV_RELAXED(&ns->semmsl);
	si.semopm = SV_RELAXED(&ns->semopm);
	si.semvmx = SV_SEMVMX;
	si.semmnu = SV_SEMMNS;
	si.semmap = SV_SEMMNS;
	si.semume = SV_SEMUME;
	xlock(&ns->ids_lock);
	if (cmd == SV_SEM_INFO) {
		si.semusz = ns->in_use;
		si.semaem = ns->used_sems;
	} else {
		si.semusz = SV_SEMUSZ;
		si.semaem = SV_SEMAEM;
	}
	/* ipc_get_maxidx() */
	if (ns->in_use == 0)
		max_idx = -1;
	else if (ns->in_use == SV_IPCMNI)
		max_idx = SV_IPCMNI - 1;
	else
		max_idx = ns->max_idx;
	xunlock(&ns->ids_lock);
	if (sv_copy_out(c, arg, &si, sizeof(si)))
		return -EFAULT;
	return max_idx < 0 ? 0 : max_idx;
}

/* Fills ds (x86_64 layout, the kernel's struct semid64_ds); the caller copies it out. */
static long semctl_stat(const struct sv_caller *c, int semid, int cmd, struct semid64_ds_x86_64 *ds)
{
	struct sv_set *set;
	long ret;

	memset(ds, 0, sizeof(*ds));
	rcu_read_lock();
	set = cmd == SV_SEM_STAT || cmd == SV_SEM_STAT_ANY ? sv_set_lookup_index(c->ns, semid)
							   : sv_set_lookup(c->ns, semid);
	if (!set) {
		rcu_read_unlock();
		return -EINVAL;
	}
	if (cmd != SV_SEM_STAT_ANY && (ret = sv_ipcperms(c, set, S_IRUGO_))) {
		ret = sv_settle(set, ret);
		rcu_read_unlock();
		return ret;
	}
	SV_DEBUG_YIELD(); /* found without a lock: IPC_RMID may get there first */
	/* The perm lock alone, as the kernel: no need to stop simple operations. */
	sv_lock(&set->lock);
	if (set->deleted) {
		sv_unlock(&set->lock);
		rcu_read_unlock();
		return -EIDRM;
	}
	ds->key = set->key;
	ds->uid = uid_out(c, SV_RELAXED(&set->uid));
	ds->gid = gid_out(c, SV_RELAXED(&set->gid));
	ds->cuid = uid_out(c, SV_RELAXED(&set->cuid));
	ds->cgid = gid_out(c, SV_RELAXED(&set->cgid));
	ds->mode = SV_RELAXED(&set->mode);
	ds->seq = (uint16_t)(set->id / SV_IPCMNI);
	ds->otime = SV_RELAXED(&set->otime);
	ds->ctime = SV_RELAXED(&set->ctime);
	ds->nsems = (uint64_t)set->nsems;
	ret = cmd == SV_IPC_STAT ? 0 : set->id;
	sv_unlock(&set->lock);
	rcu_read_unlock();
	return ret;
}

static long semctl_setval(const struct sv_caller *c, int semid, int semnum, int val,
			  struct sv_wakeq *wq)
{
	struct sv_set *set;
	struct sv_undo *un;
	int err;

	if (val > SV_SEMVMX || val < 0)
		return -ERANGE;
	rcu_read_lock();
	set = sv_set_lookup(c->ns, semid);
	if (!set) {
		rcu_read_unlock();
		return -EINVAL;
	}
	if (semnum < 0 || semnum >= set->nsems) {
		err = sv_settle(set, -EINVAL);
		rcu_read_unlock();
		return err;
	}
	if ((err = sv_ipcperms(c, set, S_IWUGO_))) {
		err = sv_settle(set, err);
		rcu_read_unlock();
		return err;
	}
	SV_DEBUG_YIELD(); /* found without a lock: IPC_RMID may get there first */
	sv_sem_lock(set, NULL, 0);
	if (set->deleted || (err = sv_committing(c))) {
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		rcu_read_unlock();
		return set->deleted ? -EIDRM : err;
	}
	cds_list_for_each_entry(un, &set->undos, set_node)
		un->semadj[semnum] = 0;
	sv_fast_bump(set, semnum); /* and every fast entry of it counts 0 */
	sv_sem_val(set, semnum)->semval = val;
	sv_sems(set)[semnum].sempid = c->proc ? c->proc->pid : 0;
	sv_fast_set_tag(set, semnum, 0); /* the setter's next fast operation asks once */
	SV_SET_RELAXED(&set->ctime, sv_now());
	sv_jnl_clear_adj(set, semnum);
	sv_jnl_sem(set, semnum);
	sv_jnl_done(set, c->jid, 0);
	sv_do_smart_update(set, NULL, 0, false, wq);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	return 0;
}

/* Called under RCU, which it ends. */
static long semctl_getall(const struct sv_caller *c, struct sv_set *set, uint64_t arg)
{
	int nsems = set->nsems;
	uint16_t *vals = malloc((size_t)nsems * sizeof(*vals));
	long ret = 0;

	sv_rcu_assert_reader();
	if (!vals) {
		rcu_read_unlock();
		return -ENOMEM;
	}
	sv_sem_lock(set, NULL, 0);
	if (set->deleted) {
		ret = -EIDRM;
	} else {
		for (int i = 0; i < nsems; i++)
			vals[i] = (uint16_t)sv_sem_val(set, i)->semval;
	}
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	if (!ret && sv_copy_out(c, arg, vals, (size_t)nsems * sizeof(*vals)))
		ret = -EFAULT;
	free(vals);
	return ret;
}

/* Called under RCU, which it ends. */
static long semctl_setall(const struct sv_caller *c, struct sv_set *set, uint64_t arg,
			  struct sv_wakeq *wq)
{
	int nsems = set->nsems;
	uint16_t *vals = malloc((size_t)nsems * sizeof(*vals));
	struct sv_undo *un;
	long ret = 0;

	sv_rcu_assert_reader();
	/* Hold the set across the copy, which may take a while: no RCU section around it. */
	sv_set_get(set);
	rcu_read_unlock();
	if (!vals) {
		ret = -ENOMEM;
		goto out;
	}
	if (sv_copy_in(c, arg, vals, (size_t)nsems * sizeof(*vals))) {
		ret = -EFAULT;
		goto out;
	}
	for (int i = 0; i < nsems; i++) {
		if (vals[i] > SV_SEMVMX) {
			ret = -ERANGE;
			goto out;
		}
	}
	sv_sem_lock(set, NULL, 0);
	if (set->deleted) {
		ret = -EIDRM;
	} else if (!(ret = sv_committing(c))) {
		for (int i = 0; i < nsems; i++) {
			sv_fast_bump(set, i);
			sv_sem_val(set, i)->semval = vals[i];
			sv_sems(set)[i].sempid = c->proc ? c->proc->pid : 0;
			sv_fast_set_tag(set, i, 0);
		}
		cds_list_for_each_entry(un, &set->undos, set_node)
			memset(un->semadj, 0, (size_t)un->nsems * sizeof(un->semadj[0]));
		SV_SET_RELAXED(&set->ctime, sv_now());
		if (sv_jnl_on()) {
			sv_jnl_clear_adj(set, -1);
			for (int i = 0; i < nsems; i++)
				sv_jnl_sem(set, i);
			sv_jnl_done(set, c->jid, 0);
		}
		sv_do_smart_update(set, NULL, 0, false, wq);
	}
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
out:
	free(vals);
	sv_set_put(set);
	return ret;
}

static long semctl_main(const struct sv_caller *c, int semid, int semnum, int cmd, uint64_t arg,
			struct sv_wakeq *wq)
{
	struct sv_set *set;
	struct sv_sem *sem;
	long ret = 0;
	int locknum;

	rcu_read_lock();
	set = sv_set_lookup(c->ns, semid);
	if (!set) {
		rcu_read_unlock();
		return -EINVAL;
	}
	if ((ret = sv_ipcperms(c, set, cmd == SV_SETALL ? S_IWUGO_ : S_IRUGO_))) {
		ret = sv_settle(set, ret);
		rcu_read_unlock();
		return ret;
	}
	if (cmd == SV_GETALL)
		return semctl_getall(c, set, arg);
	if (cmd == SV_SETALL)
		return semctl_setall(c, set, arg, wq);

	if (semnum < 0 || semnum >= set->nsems) {
		ret = sv_settle(set, -EINVAL);
		rcu_read_unlock();
		return ret;
	}
	/*
	 * A value or pid is one semaphore's business: its own lock will do in simple mode. The
	 * counts walk the set's lists: the set lock.
	 */
	if (cmd == SV_GETVAL || cmd == SV_GETPID) {
		struct sv_sembuf one = { .sem_num = (uint16_t)semnum };

		locknum = sv_sem_lock(set, &one, 1);
	} else {
		locknum = sv_sem_lock(set, NULL, 0);
	}
	if (set->deleted) {
		ret = -EIDRM;
		goto out;
	}
	sem = &sv_sems(set)[semnum];
	switch (cmd) {
	case SV_GETVAL:
		ret = sv_sem_val(set, semnum)->semval;
		break;
	case SV_GETPID:
		ret = sem->sempid;
		break;
	case SV_GETNCNT:
		ret = sv_count_semcnt(set, semnum, false);
		break;
	case SV_GETZCNT:
		ret = sv_count_semcnt(set, semnum, true);
		break;
	default:
		ret = -EINVAL; /* a command with IPC_64 set, from the compat path */
		break;
	}
out:
	sv_sem_unlock(set, locknum);
	rcu_read_unlock();
	/* The pid namespace translation may read /proc: outside every lock. */
	if (cmd == SV_GETPID && ret > 0)
		ret = pid_out(c, (int32_t)ret);
	return ret;
}

static long semctl_down(const struct sv_caller *c, int semid, int cmd,
			const struct semid64_ds_x86_64 *ds, struct sv_wakeq *wq)
{
	struct sv_ns *ns = c->ns;
	struct sv_set *set;
	long ret = 0;

	xlock(&ns->ids_lock);
	rcu_read_lock();
	set = sv_set_lookup(ns, semid);
	if (!set) {
		ret = -EINVAL;
		goto out;
	}
	if ((ret = sv_is_owner(c, set)))
		goto out;
	if (cmd != SV_IPC_RMID && cmd != SV_IPC_SET) {
		ret = -EINVAL; /* a command with IPC_64 set, from the compat path */
		goto out;
	}
	sv_sem_lock(set, NULL, 0);
	if ((ret = sv_committing(c))) {
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		goto out;
	}
	if (cmd == SV_IPC_RMID) {
		sv_freeary(ns, set, wq);
		sv_jnl_done(set, c->jid, 0);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		rcu_read_unlock();
		xunlock(&ns->ids_lock);
		sv_set_put(set); /* the tables' reference */
		return 0;
	}

	/* IPC_SET: ipc_update_perm() */
	uint32_t uid = ds->uid, gid = ds->gid;

	if (c->ops && c->ops->uid_in && !c->ops->uid_in(c, ds->uid, &uid))
		ret = -EINVAL;
	else if (c->ops && c->ops->gid_in && !c->ops->gid_in(c, ds->gid, &gid))
		ret = -EINVAL;
	else if (uid == UINT32_MAX || gid == UINT32_MAX)
		ret = -EINVAL; /* (uid_t)-1 is never a valid id */
	if (!ret) {
		SV_SET_RELAXED(&set->uid, uid);
		SV_SET_RELAXED(&set->gid, gid);
		SV_SET_RELAXED(&set->mode, ds->mode & 0777);
		SV_SET_RELAXED(&set->ctime, sv_now());
		sv_fast_revoke(set); /* whoever lost alter permission stops altering */
		sv_jnl_perm(set);
		sv_jnl_done(set, c->jid, 0);
	}
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
out:
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	return ret;
}

const char *sv_semctl_cmd_name(int cmd)
{
	static const char *const names[] = {
		[SV_IPC_RMID] = "IPC_RMID", [SV_IPC_SET] = "IPC_SET",
		[SV_IPC_STAT] = "IPC_STAT", [SV_IPC_INFO] = "IPC_INFO",
		[SV_GETPID] = "GETPID",	    [SV_GETVAL] = "GETVAL",
		[SV_GETALL] = "GETALL",	    [SV_GETNCNT] = "GETNCNT",
		[SV_GETZCNT] = "GETZCNT",   [SV_SETVAL] = "SETVAL",
		[SV_SETALL] = "SETALL",	    [SV_SEM_STAT] = "SEM_STAT",
		[SV_SEM_INFO] = "SEM_INFO", [SV_SEM_STAT_ANY] = "SEM_STAT_ANY",
	};

	return cmd >= 0 && cmd < (int)(sizeof(names) / sizeof(names[0])) ? names[cmd] : NULL;
}

/* ---- the i386 forms ---- */

/*
 * What an id that does not fit 16 bits reads as in the old layout: the kernel's overflowuid
 * and overflowgid (high2lowuid), read once; 65534 where they cannot be read.
 */
static uint16_t overflow_ids[2] = { 65534, 65534 };
static pthread_once_t overflow_once = PTHREAD_ONCE_INIT;

static void read_overflow_ids(void)
{
	static const char *const path[2] = { "/proc/sys/kernel/overflowuid",
					     "/proc/sys/kernel/overflowgid" };

	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(path[i], "re");
		unsigned v;

		if (f && fscanf(f, "%u", &v) == 1 && v <= 65535)
			overflow_ids[i] = (uint16_t)v;
		if (f)
			fclose(f);
	}
}

static uint16_t low_id(uint32_t id, int which)
{
	pthread_once(&overflow_once, read_overflow_ids);
	return id & ~0xffffu ? overflow_ids[which] : (uint16_t)id;
}

/* The three layouts a semid_ds comes in: x86_64's, and i386's two. */
enum ds_layout {
	DS_X86_64,
	DS_I386_64,  /* compat_semid64_ds: direct semctl, ipc(2) with IPC_64 */
	DS_I386_OLD, /* compat_semid_ds: ipc(2) without */
};

/* ds to the caller in its layout (copy_compat_semid_to_user() for i386's). */
static int stat_out(const struct sv_caller *c, uint64_t arg, enum ds_layout layout,
		    const struct semid64_ds_x86_64 *ds)
{
	if (layout == DS_X86_64)
		return sv_copy_out(c, arg, ds, sizeof(*ds));
	if (layout == DS_I386_64) {
		struct semid64_ds_i386 v = {
			.key = ds->key,
			.uid = ds->uid,
			.gid = ds->gid,
			.cuid = ds->cuid,
			.cgid = ds->cgid,
			.mode = (uint16_t)ds->mode,
			.seq = ds->seq,
			.otime = (uint32_t)ds->otime,
			.otime_high = (uint32_t)((uint64_t)ds->otime >> 32),
			.ctime = (uint32_t)ds->ctime,
			.ctime_high = (uint32_t)((uint64_t)ds->ctime >> 32),
			.nsems = (uint32_t)ds->nsems,
		};

		return sv_copy_out(c, arg, &v, sizeof(v));
	}
	struct semid_ds_i386_old v = {
		.key = ds->key,
		.uid = low_id(ds->uid, 0),
		.gid = low_id(ds->gid, 1),
		.cuid = low_id(ds->cuid, 0),
		.cgid = low_id(ds->cgid, 1),
		.mode = (uint16_t)ds->mode,
		.seq = ds->seq,
		.otime = (int32_t)ds->otime,
		.ctime = (int32_t)ds->ctime,
		.nsems = (uint16_t)ds->nsems,
	};

	return sv_copy_out(c, arg, &v, sizeof(v));
}

/*
 * IPC_SET's buffer from the caller in its layout (copy_compat_semid_from_user() for i386's,
 * where only the owner and the mode are taken).
 */
static int set_in(const struct sv_caller *c, uint64_t arg, enum ds_layout layout,
		  struct semid64_ds_x86_64 *ds)
{
	if (layout == DS_X86_64)
		return sv_copy_in(c, arg, ds, sizeof(*ds));
	memset(ds, 0, sizeof(*ds));
	if (layout == DS_I386_64) {
		struct semid64_ds_i386 v;

		if (sv_copy_in(c, arg, &v, sizeof(v)))
			return -EFAULT;
		ds->uid = v.uid;
		ds->gid = v.gid;
		ds->mode = v.mode;
		return 0;
	}
	struct semid_ds_i386_old v;

	if (sv_copy_in(c, arg, &v, sizeof(v)))
		return -EFAULT;
	ds->uid = v.uid;
	ds->gid = v.gid;
	ds->mode = v.mode;
	return 0;
}

/*
 * Every semctl, each command with its own structures in layout. The i386 path keeps IPC_64 in
 * cmd for the helpers, as the kernel's compat_ksys_semctl() does; natively it makes the
 * command unknown.
 */
static long semctl_cmd(const struct sv_caller *c, int semid, int semnum, int cmd, uint64_t arg,
		       enum ds_layout layout, struct sv_wakeq *wq)
{
	struct semid64_ds_x86_64 ds;
	long ret;

	if (semid < 0)
		return -EINVAL;
	switch (layout == DS_X86_64 ? cmd : cmd & ~SV_IPC_64) {
	case SV_IPC_INFO:
	case SV_SEM_INFO:
		return semctl_info(c, cmd, arg);
	case SV_IPC_STAT:
	case SV_SEM_STAT:
	case SV_SEM_STAT_ANY:
		ret = semctl_stat(c, semid, cmd, &ds);
		if (ret >= 0 && stat_out(c, arg, layout, &ds))
			ret = -EFAULT;
		return ret;
	case SV_GETALL:
	case SV_GETVAL:
	case SV_GETPID:
	case SV_GETNCNT:
	case SV_GETZCNT:
	case SV_SETALL:
		return semctl_main(c, semid, semnum, cmd, arg, wq);
	case SV_SETVAL:
		/* the low 32 bits of the register, as an int */
		return semctl_setval(c, semid, semnum, (int)(uint32_t)arg, wq);
	case SV_IPC_SET:
		if (set_in(c, arg, layout, &ds))
			return -EFAULT;
		return semctl_down(c, semid, cmd, &ds, wq);
	case SV_IPC_RMID:
		return semctl_down(c, semid, cmd, NULL, wq);
	default:
		return -EINVAL;
	}
}

long sv_semctl(const struct sv_caller *c, int semid, int semnum, int cmd, uint64_t arg,
	       struct sv_wakeq *wq)
{
	return semctl_cmd(c, semid, semnum, cmd, arg, DS_X86_64, wq);
}

long sv_semctl_compat(const struct sv_caller *c, int semid, int semnum, int cmd, uint32_t arg,
		      bool old, struct sv_wakeq *wq)
{
	enum ds_layout layout = DS_I386_64;

	/* compat_ksys_old_semctl(): ipc(2) says the layout in the command, and strips it */
	if (old) {
		layout = cmd & SV_IPC_64 ? DS_I386_64 : DS_I386_OLD;
		cmd &= ~SV_IPC_64;
	}
	return semctl_cmd(c, semid, semnum, cmd, arg, layout, wq);
}

/* SPDX-License-Identifier: MIT */
/*
 * The namespaces the supervisor serves: one engine namespace (struct sv_ns) per IPC namespace
 * its programs live in, or per name (a listener served from a named namespace); and the uid/gid
 * maps of the user namespaces they live in.
 *
 * Identity. A kernel namespace is known here by its 64-bit id (NS_GET_ID, Linux 6.18), which
 * the kernel gives no other namespace while it runs: a namespace born later never finds the
 * sets, limits, id sequence or statistics of one that died, whatever inode number it gets.
 * Where the kernel has no ids, by inode number while an nsfs fd pins it (the kernel reuses an
 * inode number only once nothing holds the namespace).
 *
 * Lifetime. An IPC namespace's sets end when the kernel's namespace ends: when no task, open
 * nsfs fd or bind mount holds it any more, whether the holders were confined or not (a pod's
 * pause container holds its pod's namespace between two served containers). The registry does
 * not hold it: it asks, through an nsfs file handle, which opens a namespace while it lives and
 * fails with ESTALE once it is gone. It asks when the last confined thread it knows in the
 * namespace is gone (nsreg_leave), and about every namespace without one, once a second
 * (nsreg_probe). Opening a handle needs CAP_SYS_ADMIN over the namespace's owner (a program's
 * own user namespace counts), and fails with ESTALE without it, just as when the namespace is
 * gone; so it is tried once when the namespace is first seen, alive. Where that fails, or
 * without ids and handles (before 6.18), the registry holds the namespace with an nsfs fd
 * (so its inode number is not reused) and it ends with its last confined thread: there an
 * unconfined holder does not keep its sets. The supervisor's own IPC namespace and named
 * namespaces end with the supervisor.
 *
 * Budget. With a budget (semvisord's), every IPC namespace taken on but the supervisor's own
 * and the named ones is charged to the uid owning its user namespace (as the kernel charges
 * max_ipc_namespaces to that user namespace's ucounts), from its creation here until its
 * record is freed (ended, and no thread record holds it any more). One past max_namespaces or
 * max_namespaces_per_uid is not taken on: natively its unshare(CLONE_NEWIPC) would have failed
 * with ENOSPC, and here the program already runs in it, so its calls are served from a shared
 * stand-in (reg->full) that is empty and has no room: semget creating a set fails with ENOSPC,
 * semget of a key ENOENT, calls on ids EINVAL, IPC_INFO shows SEMMNI and SEMMNS 0; nothing a
 * refused namespace does can leave state behind. Its threads' namespace is looked up again at
 * every call, so once room is back the namespace is taken on, empty as it was. Refusals count
 * in the budget (every call served by the stand-in that asked again).
 *
 * User namespaces. A user namespace's maps are written once and never change, so the maps of
 * the last few used are kept by id. A map not yet written is never kept: it is read again
 * next time.
 *
 * Locking: reg->lock protects the lists, every nt_ns's nthreads and listed, and the user
 * namespace list. It nests inside thread locks (ident.h) and outside nothing else; no I/O is
 * done under it but for opening a new namespace's sysctl files and reading a new map.
 */
#ifndef SV_NSREG_H
#define SV_NSREG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu/list.h>

#include "engine/sem.h"
#include "notify/notify.h"
#include "notify/target.h"

struct nt_ns {
	struct cds_list_head node; /* reg->namespaces, while listed; under reg->lock */
	atomic_int refcount;	   /* the registry's while listed, and one per holder */
	struct tgt_nsid kid;	   /* the kernel's namespace; zero for a named one */
	int pin;		   /* when not probed: an nsfs fd holding it; else -1 */
	bool probed;		   /* its handle opens it: the kernel tells when it ends */
	char name[64];		   /* "ipc:[INODE]" as /proc/PID/ns/ipc says, or the name */
	struct sv_ns *ns;
	struct sv_budget *budget; /* charged for this namespace (reference held); NULL: not */
	uint32_t budget_uid;	  /* ... to this uid */
	bool refused;		  /* the stand-in for namespaces over the budget (reg->full) */
	int nthreads;		  /* confined threads known to be in it now; under reg->lock */
	bool listed;		  /* in reg->namespaces: not found dead yet; under reg->lock */
	bool persistent;	  /* named, or the supervisor's own: ends with the supervisor */
	/*
	 * The pod whose containers were served in it first (nsreg_label), for people to read:
	 * a pod's containers share its IPC namespace. Under reg->lock; set once.
	 */
	struct nt_pod pod;
	/*
	 * The user namespaces from the one owning this IPC namespace up to the root, with their
	 * owners: where a capability counts for IPC_OWNER and SYS_ADMIN here (ident.c). Read once;
	 * the kernel never changes them.
	 */
	int nowners;
	struct tgt_userns_link owners[TGT_MAX_USERNS];
	/*
	 * The namespace's /proc/sys/kernel/sem and sem_next_id, opened from inside it (an open
	 * sysctl file keeps serving the namespace it was opened in, and does not keep it alive),
	 * when its limits follow the kernel's as they would natively; -1 when limits were given.
	 */
	int sem_fd;
	int next_id_fd;
};

struct nt_userns {
	struct cds_list_head node; /* reg->usernss (least recently used first), under reg->lock */
	atomic_int refcount;	   /* the cache's while listed, one per holder */
	uint64_t key;		   /* its id (or, without ids, inode while a holder pins it) */
	struct tgt_idmap uid, gid;
};

struct nsreg {
	pthread_mutex_t lock;
	struct cds_list_head namespaces;
	struct cds_list_head usernss;
	int nusernss;
	const struct tgt_features *feat;
	struct sv_limits limits; /* for new namespaces */
	bool sync_limits;	 /* no limits were given: each IPC namespace's own apply */
	int my_ipc_fd;		 /* our IPC namespace, to come back to after opening a sysctl */
	uint64_t my_ipc_key, my_user_key;
	/* our IPC namespace's owners (struct nt_ns.owners), for the named namespaces */
	int my_nowners;
	struct tgt_userns_link my_owners[TGT_MAX_USERNS];
	atomic_uint_fast64_t ended; /* namespaces found dead and ended */
	struct sv_budget *budget;   /* every namespace's sets are charged there; NULL: nowhere */
	struct nt_ns *full;	    /* with a budget: serves the namespaces it refuses */
	/*
	 * Told of every namespace as it gets listed, under r->lock, before any call is served in
	 * it (recover.c journals what finds it again); NULL: nobody.
	 */
	void (*listed)(void *ctx, const struct nt_ns *n);
	void *listed_ctx;
};

/*
 * What names n in the journal (sv_ns_set_jkey()): the kernel's id of the namespace (never
 * reused while the system runs), its inode without ids, a hash of the name of a named one.
 */
uint64_t nsreg_jkey(const struct nt_ns *n);

/*
 * lim NULL: every IPC namespace's own limits (/proc/sys/kernel/sem), as natively. budget (may be
 * NULL): shared by every namespace; the registry holds a reference until nsreg_fini().
 */
int nsreg_init(struct nsreg *r, const struct tgt_features *feat, const struct sv_limits *lim,
	       struct sv_budget *budget);
/* Everything still listed is dropped; only at the supervisor's end. */
void nsreg_fini(struct nsreg *r);

/*
 * The namespace of the IPC namespace nsfd refers to, created on first use; a reference for the
 * caller, and a confined thread counted in (the caller's thread: nsreg_leave() when it is not
 * in it after all), both under one lock, so that it cannot end in between. NULL when out of
 * memory or when nsfd cannot be identified. hint (may be NULL): the one it probably is,
 * looked at before the list.
 */
struct nt_ns *nsreg_ipc(struct nsreg *r, int nsfd, struct nt_ns *hint);
/*
 * Name n after a pod served in it (nt_pod.container is not kept), unless it has a name, a
 * pod's already, or is not a pod's own kernel namespace (named, the supervisor's own, which a
 * hostIPC pod shares with the host, or the stand-in for those over the budget). The first pod wins: another pod's containers cannot be in it natively
 * (a pod's sandbox makes its IPC namespace), and nothing is decided by the name.
 */
void nsreg_label(struct nsreg *r, struct nt_ns *n, const struct nt_pod *pod);
/* Is kid the supervisor's own IPC namespace? */
bool nsreg_is_own(const struct nsreg *r, const struct tgt_nsid *kid);

/*
 * The namespace of nsfd as a previous supervisor process had it (persist.c): as nsreg_ipc()
 * but no thread is counted in, since none is known yet. A namespace we cannot ask the kernel
 * about (not probed) could only end with a confined thread we saw leave, so it stays until the
 * supervisor ends. Named after pod as nsreg_label() would. The stand-in (reg->full) when it is
 * over the budget.
 */
struct nt_ns *nsreg_adopt(struct nsreg *r, int nsfd, const struct nt_pod *pod);
/* A named namespace (created on first use), with a reference. NULL when out of memory. */
struct nt_ns *nsreg_named(struct nsreg *r, const char *name);
void nt_ns_get(struct nt_ns *n);
void nt_ns_put(struct nt_ns *n);

/*
 * A confined thread counted in by nsreg_ipc() is not in n any more. When the last one leaves,
 * the kernel is asked whether n still lives; if not, n ends: its sets go (their waiters
 * complete with EIDRM through wq, though a namespace without tasks has none) and it is
 * unlisted. Caller holds no registry lock.
 */
void nsreg_leave(struct nsreg *r, struct nt_ns *n, struct sv_wakeq *wq);
/* Ask the kernel about every listed namespace no confined thread is known in; end the dead. */
void nsreg_probe(struct nsreg *r, struct sv_wakeq *wq);

/* Take the IPC namespace's current limits and sem_next_id (before the calls that use them). */
void nt_ns_sync(struct nt_ns *n);
/* A sem_next_id we handed to the engine was used: reset it as the kernel does. */
void nt_ns_next_id_used(struct nt_ns *n);

/*
 * User namespace maps by key (tgt_nsid.id). find: a reference, or NULL. add: the maps of the
 * namespace with that key, which the caller read through a thread it has proven to be in it
 * (a notification of that thread still pending after the read); a reference to the entry
 * kept (or to the one another thread added first), or NULL when out of memory. Without ids
 * (key 0 or !feat->ns_id) nothing is kept: add returns an entry of the caller's alone.
 */
struct nt_userns *nsreg_userns_find(struct nsreg *r, uint64_t key);
struct nt_userns *nsreg_userns_add(struct nsreg *r, uint64_t key, const struct tgt_idmap *uid,
				   const struct tgt_idmap *gid);
void nt_userns_put(struct nt_userns *u);

/* Control plane: fn for every listed namespace, under reg->lock (fn must not call back). */
int nsreg_for_each(struct nsreg *r, int (*fn)(struct nt_ns *n, void *arg), void *arg);
/* The listed namespace of that name or pod ("NAMESPACE/POD"; the newest if two share it),
   with a reference; or NULL. */
struct nt_ns *nsreg_find(struct nsreg *r, const char *name);
/* New limits for every listed namespace and those to come. */
void nsreg_set_limits(struct nsreg *r, const struct sv_limits *lim);

#endif

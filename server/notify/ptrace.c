/* SPDX-License-Identifier: MIT */
/*
 * The ptrace transport: the tracer thread and the calls' states (ptrace.h has the design).
 *
 * Locking: t->lock covers the tracee table, the queue of calls, the tracer's to-do list and
 * every tracee's state. The tracer holds it while it makes ptrace requests for a stop or for
 * its to-do list (a few microseconds), never while it waits. Workers take it in recv, answer,
 * waits and parked, under their thread locks: it is a leaf.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <urcu/list.h>

#include "lock/xpthread.h"
#include "notify/listener.h"
#include "notify/ptrace.h"
#include "engine/sem.h"
#include "notify/receiver.h"
#include "notify/serve.h"
#include "notify/super.h"
#include "notify/threads.h"
#include "notify/target.h"

#define ERESTARTSYS    512 /* the kernel's, never seen by a program */
#define ERESTARTNOHAND 514 /* what pause() returns when a signal (or we) interrupt it */

#define PT_OPTIONS                                                                                 \
	(PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |  \
	 PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD)

#define PT_SYSCALL_STOP (SIGTRAP | 0x80) /* a syscall-exit-stop, with PTRACE_O_TRACESYSGOOD */

#define PT_KICK_SIG	 SIGURG
#define PT_PARK_DELAY_NS 1000000LL /* do_todo() */
#define PT_SPIN_NS	 20000LL   /* wait_stop() */

enum pt_state {
	PT_RUNNING,
	PT_STOPPED,
	PT_ANSWERED,
	PT_PARKING,
	PT_SLEEPING,
	PT_WAKING
};

struct pt_tracee {
	pid_t tid;
	enum pt_state state;
	struct seccomp_notif call; /* its call, while not RUNNING */
	long val;		   /* ANSWERED, WAKING: the answer */
	int64_t park_at;	   /* PARKING: when it is put to sleep */
	unsigned int flags;	   /* ANSWERED: NT_CONTINUE or 0 */
	bool interrupted;	   /* WAKING: PTRACE_INTERRUPT sent */
	bool inbox;		   /* queue_node is on t->inbox, not t->queue */
	struct pt_tracee *next;	   /* in its hash bucket */
	/* t->queue (or t->inbox) while its call waits to be received */
	struct cds_list_head queue_node;
	struct cds_list_head todo_node; /* t->todo while the tracer has work for it */
};

#define PT_BUCKETS 1024

struct pt_tracer {
	pthread_mutex_t lock;
	pthread_t thread;
	pid_t first;
	int first_pidfd; /* names first for sure, or -1: checked once it is seized */
	struct cds_list_head tracers_node; /* on tracers while the thread runs */
	int rfd, wfd; /* the pipe: rfd is the listener's fd, wfd the tracer's (-1: closed) */
	pid_t tid;    /* the tracer thread's, for kick() */
	bool done;    /* the tracer thread ends: nobody kicks it any more */
	/* the start's outcome, for pt_tracer_start() */
	pthread_cond_t started_cond;
	bool started;
	int start_err;
	atomic_bool stop;
	bool orphan; /* released from its own thread: it frees itself as it ends */
	/*
	 * Serving. Once the listener is made (attached), the tracer serves the calls itself,
	 * as a guest worker: each goes from t->inbox to nt_receive(), which takes t->serving.
	 * Before, and without memory for the worker, they wait on t->queue for the workers.
	 */
	struct nt_listener *l;
	struct nt_worker *wk;
	struct cds_list_head inbox;
	struct pt_tracee *serving;
	uint32_t seq; /* call ids: seq << 32 | tid */
	/*
	 * A seccomp filter of the program's own refused the pause() a parked call sleeps in
	 * (on_sleep_exit()): parked calls stay in their stops from now on.
	 */
	bool no_sleep;
	/* the tracer thread's own, unlocked: */
	bool spin;	 /* wait_stop() may poll: the tracer can run beside a tracee */
	int64_t wait_ns; /* how long wait_stop() last waited */
	int ntracees;
	struct pt_tracee *buckets[PT_BUCKETS];
	struct cds_list_head queue, todo;
};

/* ---- the table, the queue and the to-do list; all under t->lock ---- */

static struct pt_tracee **slot_of(struct pt_tracer *t, pid_t tid)
{
	struct pt_tracee **pp = &t->buckets[(unsigned int)tid % PT_BUCKETS];

	while (*pp && (*pp)->tid != tid)
		pp = &(*pp)->next;
	return pp;
}

static struct pt_tracee *find(struct pt_tracer *t, pid_t tid)
{
	return *slot_of(t, tid);
}

/* The tracee tid, made RUNNING if new; NULL only without memory. */
static struct pt_tracee *find_or_add(struct pt_tracer *t, pid_t tid)
{
	struct pt_tracee **pp = slot_of(t, tid), *te = *pp;

	if (te)
		return te;
	te = calloc(1, sizeof(*te));
	if (!te)
		return NULL;
	te->tid = tid;
	CDS_INIT_LIST_HEAD(&te->queue_node);
	CDS_INIT_LIST_HEAD(&te->todo_node);
	*pp = te;
	t->ntracees++;
	return te;
}

/* The pipe holds one byte exactly while the queue is not empty. */
static void queue_add(struct pt_tracer *t, struct pt_tracee *te)
{
	char c = 1;

	if (cds_list_empty(&t->queue) && t->wfd >= 0 && write(t->wfd, &c, 1) != 1)
		abort(); /* a pipe with nothing in it takes a byte */
	cds_list_add_tail(&te->queue_node, &t->queue);
}

/* Off t->queue or t->inbox, whichever it is on. */
static void queue_del(struct pt_tracer *t, struct pt_tracee *te)
{
	char c;

	if (cds_list_empty(&te->queue_node))
		return;
	cds_list_del_init(&te->queue_node);
	if (te->inbox) {
		te->inbox = false;
		return;
	}
	if (cds_list_empty(&t->queue) && read(t->rfd, &c, 1) < 0) {
		/* the byte went with the write end: nothing to take */
	}
}

/*
 * Wake the tracer: a signal it waits for with SIGCHLD (sigtimedwait), one system call for
 * both. SIGURG is ignored by default, so it is harmless anywhere else; the tracer blocks it,
 * so it stays pending until taken, and a kick sent before the tracer waits is not lost.
 * Caller holds t->lock (t->done).
 */
static void kick(struct pt_tracer *t)
{
	if (!t->done)
		syscall(SYS_tgkill, getpid(), t->tid, PT_KICK_SIG);
}

/*
 * The tracers of this process: semvisor-run has one, semvisord one per program it traces.
 * The kernel sends a ptrace stop's SIGCHLD to the process, not to the thread that traces,
 * and does not queue it, so the one a tracer takes may stand for another tracer's stops too.
 * A tracer that takes SIGCHLD therefore kicks every other one, and each takes what stopped of
 * its own (__WNOTHREAD, reap()). Alone, it kicks nobody: the count is read without the lock,
 * and a tracer is counted before it seizes, so before any stop of its tracees can signal.
 */
static pthread_mutex_t tracers_lock = PTHREAD_MUTEX_INITIALIZER;
static CDS_LIST_HEAD(tracers);
static atomic_int ntracers;

static void tracers_join(struct pt_tracer *t)
{
	xlock(&tracers_lock);
	cds_list_add(&t->tracers_node, &tracers);
	atomic_fetch_add(&ntracers, 1);
	xunlock(&tracers_lock);
}

static void tracers_leave(struct pt_tracer *t)
{
	xlock(&tracers_lock);
	cds_list_del(&t->tracers_node);
	atomic_fetch_sub(&ntracers, 1);
	xunlock(&tracers_lock);
}

/* A tracer on the list has a thread that has not ended yet: its tid is its own. */
static void kick_others(struct pt_tracer *t)
{
	struct pt_tracer *o;

	if (atomic_load(&ntracers) < 2)
		return;
	xlock(&tracers_lock);
	cds_list_for_each_entry(o, &tracers, tracers_node)
		if (o != t)
			syscall(SYS_tgkill, getpid(), o->tid, PT_KICK_SIG);
	xunlock(&tracers_lock);
}

/*
 * Work for the tracer. It is woken for work due now, and for a parked call only if it sleeps
 * without a deadline: any it has is earlier than the new one.
 */
static void todo_add(struct pt_tracer *t, struct pt_tracee *te)
{
	bool wake = (te->state != PT_PARKING || cds_list_empty(&t->todo)) &&
		    !pthread_equal(pthread_self(), t->thread); /* it looks before it sleeps */

	if (wake)
		kick(t);
	if (cds_list_empty(&te->todo_node))
		cds_list_add_tail(&te->todo_node, &t->todo);
}

static void forget(struct pt_tracer *t, pid_t tid)
{
	struct pt_tracee **pp = slot_of(t, tid), *te = *pp;

	if (!te)
		return;
	*pp = te->next;
	queue_del(t, te);
	cds_list_del(&te->todo_node);
	free(te);
	t->ntracees--;
}

/* ---- ptrace requests; the tracer thread's, under t->lock ---- */

static void resume(pid_t tid, int sig)
{
	/* ESRCH: killed meanwhile (SIGKILL needs no tracer); its exit is reported */
	ptrace(PTRACE_CONT, tid, 0, (void *)(intptr_t)sig);
}

/*
 * The stopped te's system call skipped (nr -1), returning ret; or its number and result
 * changed. Two PTRACE_POKEUSERs, not GETREGS and SETREGS: the same two registers written,
 * about a microsecond sooner (the whole register set is copied out and in the other way).
 */
static int set_syscall(pid_t tid, long nr, long ret)
{
	if (ptrace(PTRACE_POKEUSER, tid, offsetof(struct user, regs.orig_rax), (void *)nr) ||
	    ptrace(PTRACE_POKEUSER, tid, offsetof(struct user, regs.rax), (void *)ret))
		return -errno;
	return 0;
}

/* te stopped somewhere with its answer due: the call ends with it, whatever else happens. */
static void deliver(struct pt_tracee *te)
{
	set_syscall(te->tid, -1, te->val);
	te->state = PT_RUNNING;
}

static long pause_nr(const struct pt_tracee *te)
{
	if (te->call.data.arch == AUDIT_ARCH_I386)
		return 29;
	return (te->call.data.nr & __X32_SYSCALL_BIT) ? (__X32_SYSCALL_BIT | SYS_pause) : SYS_pause;
}

/*
 * The tracer's work; how long until a parked call is due to sleep (-1: none waits). A call
 * that is answered soon after it parks (a lock passed on) is answered from its seccomp stop,
 * which saves two stops; one that still waits after PT_PARK_DELAY_NS sleeps, so that its
 * signals are seen. A signal sent before that finds it at once when it sleeps, and ends the
 * call as natively: the wait is interrupted (only later, by at most that delay).
 */
static int64_t do_todo(struct pt_tracer *t)
{
	struct pt_tracee *te, *tmp;
	int64_t now = nt_now_ns(), next = -1;

	cds_list_for_each_entry_safe(te, tmp, &t->todo, todo_node) {
		if (te->state == PT_PARKING && te->park_at > now) {
			if (next < 0 || te->park_at - now < next)
				next = te->park_at - now;
			continue;
		}
		cds_list_del_init(&te->todo_node);
		switch (te->state) {
		case PT_ANSWERED:
			if (!(te->flags & NT_CONTINUE))
				set_syscall(te->tid, -1, te->val);
			te->state = PT_RUNNING;
			resume(te->tid, 0);
			break;
		case PT_PARKING:
			/*
			 * pause() sleeps interruptibly; our filter lets it through, but the
			 * program's own filters see it too: PTRACE_SYSCALL stops it as pause()
			 * returns, so one that refuses it is caught (on_sleep_exit()).
			 */
			set_syscall(te->tid, pause_nr(te), -ENOSYS);
			te->state = PT_SLEEPING;
			ptrace(PTRACE_SYSCALL, te->tid, 0, 0);
			break;
		case PT_WAKING:
			if (!te->interrupted)
				ptrace(PTRACE_INTERRUPT, te->tid, 0, 0);
			te->interrupted = true;
			break;
		default:
			break;
		}
	}
	return next;
}

/* ---- stops ---- */

/* Would sig be thrown away natively, never interrupting a wait? (/proc: the process's.) */
static bool ignored_natively(pid_t tid, int sig)
{
	unsigned long long ign = 0, cgt = 0, bit = 1ULL << (sig - 1);
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "SigIgn: %llx", &ign);
		sscanf(line, "SigCgt: %llx", &cgt);
	}
	fclose(f);
	if (ign & bit)
		return true;
	return !(cgt & bit) &&
	       (sig == SIGCHLD || sig == SIGCONT || sig == SIGURG || sig == SIGWINCH);
}

/* te's seccomp stop, described by info, becomes a call to serve. */
static void start_call(struct pt_tracer *t, struct pt_tracee *te,
		       const struct __ptrace_syscall_info *info)
{
	memset(&te->call, 0, sizeof(te->call));
	te->call.id = (uint64_t)++t->seq << 32 | (uint32_t)te->tid;
	te->call.pid = (uint32_t)te->tid;
	te->call.data.nr = (int)info->seccomp.nr;
	te->call.data.arch = info->arch;
	te->call.data.instruction_pointer = info->instruction_pointer;
	for (int i = 0; i < 6; i++)
		te->call.data.args[i] = info->seccomp.args[i];
	te->state = PT_STOPPED;
	te->interrupted = false;
	te->inbox = t->wk != NULL;
	if (te->inbox)
		cds_list_add_tail(&te->queue_node, &t->inbox);
	else
		queue_add(t, te);
}

/*
 * A seccomp stop reported by waitpid(). Only a RUNNING tracee can have made a new one: a stop
 * taken from SIGCHLD alone (took_call()) is not reaped, so a walk may report it again while
 * the call is still held in it (parked, say).
 */
static void on_call(struct pt_tracer *t, struct pt_tracee *te)
{
	struct __ptrace_syscall_info info;

	if (te->state != PT_RUNNING)
		return;
	if (ptrace(PTRACE_GET_SYSCALL_INFO, te->tid, sizeof(info), &info) <= 0 ||
	    info.op != PTRACE_SYSCALL_INFO_SECCOMP) {
		resume(te->tid, 0);
		return;
	}
	start_call(t, te, &info);
}

/* A SLEEPING te is interrupted: its call ends as seccomp ends an interrupted notification. */
static void cancel(struct pt_tracee *te)
{
	set_syscall(te->tid, te->call.data.nr, -ERESTARTSYS);
	te->state = PT_RUNNING;
}

static void on_signal(struct pt_tracee *te, int sig)
{
	if (te->state == PT_WAKING) {
		deliver(te); /* answered first: the handler runs after the call returns */
	} else if (te->state == PT_SLEEPING) {
		if (ignored_natively(te->tid, sig)) {
			resume(te->tid, 0); /* pause() restarts: the signal is not delivered */
			return;
		}
		cancel(te);
	}
	resume(te->tid, sig);
}

/*
 * pause() returned under a call that sleeps in it: stopped at its syscall-exit-stop, with
 * its result in rax. -ERESTARTNOHAND is a signal or our interrupt, whose own stop comes
 * next. Anything else is a filter of the program's own refusing pause() (SECCOMP_RET_ERRNO,
 * or TRAP: its SIGSYS is then delivered as the thread runs on; a filter that kills ends the
 * program, which no tracer can prevent). The call then waits in this stop, as it would in
 * its seccomp stop, and so do later parked calls: answered at once when their wait ends,
 * though a signal meanwhile only arrives after the answer, not with EINTR. Returning the
 * refusal instead would end the call with a wrong error, its unit taken for nobody.
 */
static void on_sleep_exit(struct pt_tracer *t, struct pt_tracee *te)
{
	if (te->state == PT_WAKING)
		deliver(te);
	if (te->state == PT_SLEEPING) {
		long ret;

		errno = 0;
		ret = ptrace(PTRACE_PEEKUSER, te->tid, offsetof(struct user, regs.rax), 0);
		if (ret == -1 && errno)
			return; /* ESRCH: killed; its exit is reported */
		if (ret != -ERESTARTNOHAND) {
			t->no_sleep = true;
			te->state = PT_PARKING; /* pt_answer() ends it from here */
			return;
		}
	}
	resume(te->tid, 0);
}

static void on_event_stop(struct pt_tracee *te, int sig)
{
	if (te->state == PT_WAKING)
		deliver(te);
	if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
		/* a group-stop, which natively interrupts a semop too */
		if (te->state == PT_SLEEPING)
			cancel(te);
		ptrace(PTRACE_LISTEN, te->tid, 0, 0); /* stay stopped until SIGCONT, as natively */
	} else {
		resume(te->tid, 0); /* our interrupt, or a new tracee's first stop */
	}
}

static void on_stop(struct pt_tracer *t, pid_t tid, int status)
{
	struct pt_tracee *te = find_or_add(t, tid);
	int sig = WSTOPSIG(status), event = (unsigned int)status >> 16;
	unsigned long msg = 0;

	if (!te) {
		/* no memory to follow it: it must not run unserved */
		kill(tid, SIGKILL);
		return;
	}
	switch (event) {
	case PTRACE_EVENT_SECCOMP:
		on_call(t, te);
		return;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		/* counted now, so that the tree is never seen empty between the two */
		if (!ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) && !find_or_add(t, (pid_t)msg))
			kill((pid_t)msg, SIGKILL);
		resume(tid, 0);
		return;
	case PTRACE_EVENT_EXEC:
		/*
		 * A thread other than the leader exec'd: it has the leader's number now, and the
		 * leader (whose record this was) is gone without a word, its call with it.
		 */
		if (!ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) && (pid_t)msg != tid) {
			forget(t, (pid_t)msg);
			forget(t, tid);
			if (!find_or_add(t, tid)) {
				kill(tid, SIGKILL);
				return;
			}
		}
		resume(tid, 0);
		return;
	case PTRACE_EVENT_STOP:
		on_event_stop(te, sig);
		return;
	case 0:
		if (sig == PT_SYSCALL_STOP)
			on_sleep_exit(t, te);
		else
			on_signal(te, sig);
		return;
	default:
		resume(tid, 0);
	}
}

/* Every tracee is gone (ECHILD): nothing is left to answer. */
static void forget_all(struct pt_tracer *t)
{
	for (int i = 0; i < PT_BUCKETS; i++)
		while (t->buckets[i])
			forget(t, t->buckets[i]->tid);
}

static void on_wait(struct pt_tracer *t, pid_t tid, int status)
{
	if (WIFSTOPPED(status))
		on_stop(t, tid, status);
	else if (WIFEXITED(status) || WIFSIGNALED(status))
		forget(t, tid);
}

/*
 * The stop SIGCHLD reports, taken as a call without the waitpid() that would report it too:
 * under PTI each system call of the tracer's costs a tenth of a bare stop's round trip, and
 * PTRACE_GET_SYSCALL_INFO, which a call needs anyway, tells a seccomp stop from every other
 * stop as surely as the wait status does (it reads the stop's own siginfo). Only for a tracee
 * we know RUNNING: one whose stop is already ours (parked, say) cannot stop again, and its
 * unreaped status is one that a walk reports later and on_call() ignores. The status of a
 * stop taken this way is dropped when we resume the tracee (the kernel rewrites its exit
 * code), so nothing is reported twice for a call that runs on.
 *
 * One thing the wait status tells and the call's information does not: a signal-delivery-stop
 * whose siginfo a program forged (rt_tgsigqueueinfo of SIGTRAP to itself, with a seccomp
 * stop's si_code) reads as a seccomp stop of the call its thread last made (or of -1, after
 * one we served). So only the semaphore calls, the ones worth the saving, are taken this way,
 * and everything else goes by the wait status: a forged stop at the return from kill(2), say,
 * is delivered as the signal it is. What is left is a forged stop at the return from a
 * semaphore call that reached the kernel, past our filter (one above it answered the call):
 * we serve that call again with the thread's own arguments and the signal is lost, which the
 * program could have done to itself. Caller holds t->lock.
 */
static bool took_call(struct pt_tracer *t, const siginfo_t *si)
{
	struct __ptrace_syscall_info info;
	struct pt_tracee *te;
	int nr;

	if (si->si_code != CLD_TRAPPED || si->si_status != SIGTRAP)
		return false;
	te = find(t, si->si_pid);
	if (!te || te->state != PT_RUNNING ||
	    ptrace(PTRACE_GET_SYSCALL_INFO, te->tid, sizeof(info), &info) <= 0 ||
	    info.op != PTRACE_SYSCALL_INFO_SECCOMP || info.arch != AUDIT_ARCH_X86_64)
		return false;
	nr = (int)(info.seccomp.nr & ~(uint64_t)__X32_SYSCALL_BIT);
	if (nr != NR_SEMOP && nr != NR_SEMTIMEDOP && nr != NR_SEMCTL && nr != NR_SEMGET)
		return false;
	start_call(t, te, &info);
	return true;
}

/*
 * Take every stop and exit there is. si, SIGCHLD's (NULL: none), names the tracee to look at
 * first: taken from the signal alone if it made a call (took_call()), else waited for by
 * number: the kernel answers waitpid(-1) by walking every tracee, parked ones too, so with
 * thousands parked the walk that finds the caller's stop cost as much as the call. The walk
 * after it finds whatever else stopped: SIGCHLD is not queued, so one signal may stand for
 * several stops. Several, that is, of several tracees: one that stopped cannot stop again
 * before we resume it, and whatever it does after our sigtimedwait() took its signal (dies,
 * say) sends a signal of its own. So a lone tracee, the common single-threaded program,
 * needs no walk, and each of its calls costs two system calls less. A tracee another one
 * made is counted when its maker's event is taken (on_stop()), so it is never missed for
 * being unknown. __WNOTHREAD: this thread's tracees only, never another thread's children.
 * Caller holds t->lock.
 */
static void reap(struct pt_tracer *t, const siginfo_t *si)
{
	pid_t tid, hint = si ? si->si_pid : 0;
	int status;

	if (hint > 0) {
		bool taken = took_call(t, si);

		/* not ours (a child of another thread), or taken by an earlier walk: nothing */
		if (!taken && waitpid(hint, &status, __WALL | __WNOTHREAD | WNOHANG) == hint) {
			on_wait(t, hint, status);
			taken = true;
		}
		if (taken && t->ntracees == 1 && find(t, hint))
			return;
	}
	while ((tid = waitpid(-1, &status, __WALL | __WNOTHREAD | WNOHANG)) > 0)
		on_wait(t, tid, status);
	if (tid < 0 && errno == ECHILD)
		forget_all(t);
}

static void tracer_free(struct pt_tracer *t);

/* The listener is made: serve its calls here from now on, if a worker can be had. */
static void become_guest(struct pt_tracer *t)
{
	t->wk = nt_guest_new(t->l->super);
	if (t->wk)
		sv_thread_register();
	else
		t->l = NULL; /* the workers serve them, from t->queue */
}

/*
 * Serve the calls just stopped, one at a time, unlocked: nt_receive() takes t->serving
 * through pt_recv(). Only this thread frees a tracee, so te stays. Caller holds t->lock.
 */
static void serve_inbox(struct pt_tracer *t)
{
	while (!cds_list_empty(&t->inbox) && !atomic_load(&t->stop)) {
		struct pt_tracee *te =
		    cds_list_first_entry(&t->inbox, struct pt_tracee, queue_node);

		queue_del(t, te);
		t->serving = te;
		xunlock(&t->lock);
		nt_receive(t->wk, t->l, false);
		xlock(&t->lock);
		t->serving = NULL;
	}
}

/*
 * Wait for a stop or a kick: the signal taken, or -1 with errno (EAGAIN: next, a timeout in
 * nanoseconds as do_todo() returns it, passed first). A tracer that
 * sleeps is woken with an interrupt, and the CPU it slept on has often gone idle, which on a
 * virtual machine makes the wake-up cost more than the rest of a call. A program that calls
 * in a loop stops again a few microseconds after it is resumed, so the tracer first polls for
 * up to PT_SPIN_NS, but only where that can pay: beside the tracee on another CPU, and after a
 * wait that polling would have ended (a program that calls rarely costs one poll per burst).
 * Each poll yields: a tracee woken on this CPU runs at once instead of after the polling.
 * Uncontended semop (a loop of semop +1, -1), 2 CPUs: 35-38 us a call without it, 24-27 us
 * with it; a loop with usleep(0) between pairs, which defeats the guess every time: the same
 * time with it as without (2.5 s for 20,000 pairs), where polling without yielding took 3.1 s.
 */
static int wait_stop(struct pt_tracer *t, const sigset_t *wake, siginfo_t *si, int64_t next)
{
	static const struct timespec now;
	int64_t start = nt_now_ns();
	int sig = -1;

	if (t->spin && t->wait_ns < PT_SPIN_NS)
		while ((sig = sigtimedwait(wake, si, &now)) < 0 && errno == EAGAIN &&
		       nt_now_ns() - start < PT_SPIN_NS)
			sched_yield();
	if (sig < 0) {
		int64_t spent = nt_now_ns() - start, left = next > spent ? next - spent : 0;
		struct timespec ts = { left / 1000000000, left % 1000000000 };

		sig = sigtimedwait(wake, si, next < 0 ? NULL : &ts);
	}
	t->wait_ns = nt_now_ns() - start;
	return sig;
}

static void *tracer_main(void *arg)
{
	struct pt_tracer *t = arg;
	int64_t next = -1;
	sigset_t all, wake;
	cpu_set_t cpus;
	siginfo_t si;
	int err = 0;

	nt_thread_start("sv-tracer", false);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	sigemptyset(&wake);
	sigaddset(&wake, SIGCHLD);
	sigaddset(&wake, PT_KICK_SIG);
	t->tid = (pid_t)syscall(SYS_gettid);
	tracers_join(t);
	if (ptrace(PTRACE_SEIZE, t->first, 0, PT_OPTIONS))
		err = errno;
	/*
	 * The number may have been the pidfd's process's no longer (reaped, and given to
	 * another): if that process is still there now, the number is still its own.
	 */
	if (!err && t->first_pidfd >= 0 && tgt_alive(t->first_pidfd)) {
		ptrace(PTRACE_DETACH, t->first, 0, 0);
		err = ESRCH;
	}
	t->first_pidfd = -1; /* the caller's, closed once we have started */
	xlock(&t->lock);
	if (!err && !find_or_add(t, t->first))
		err = ENOMEM;
	t->start_err = err;
	t->started = true;
	t->done = err != 0;
	pthread_cond_broadcast(&t->started_cond);
	xunlock(&t->lock);
	if (err) {
		tracers_leave(t);
		return NULL;
	}

	t->spin = !sched_getaffinity(0, sizeof(cpus), &cpus) && CPU_COUNT(&cpus) > 1;

	/* A stop or a kick before the wait leaves its signal pending, so nothing is missed. */
	while (!atomic_load(&t->stop)) {
		int sig = wait_stop(t, &wake, &si, next);

		if (sig < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (sig == SIGCHLD)
			kick_others(t);
		xlock(&t->lock);
		if (t->l && !t->wk)
			become_guest(t);
		reap(t, sig == SIGCHLD ? &si : NULL);
		serve_inbox(t);
		next = do_todo(t);
		if (!t->ntracees) {
			xunlock(&t->lock);
			break;
		}
		xunlock(&t->lock);
	}
	/* The tree is gone (or we stop, and PTRACE_O_EXITKILL ends it): the listener hangs up. */
	if (t->wk) {
		nt_guest_free(t->wk);
		sv_thread_unregister();
	}
	tracers_leave(t);
	xlock(&t->lock);
	t->done = true;
	close(t->wfd);
	t->wfd = -1;
	xunlock(&t->lock);
	if (t->orphan) {
		pthread_detach(pthread_self());
		tracer_free(t);
	}
	return NULL;
}

int pt_tracer_start(pid_t pid, int pidfd, struct pt_tracer **out, char *err, size_t errlen)
{
	struct pt_tracer *t = calloc(1, sizeof(*t));
	sigset_t chld;
	int pipefd[2], rc;

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->first = pid;
	t->first_pidfd = pidfd;
	t->rfd = t->wfd = -1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->started_cond, NULL);
	CDS_INIT_LIST_HEAD(&t->queue);
	CDS_INIT_LIST_HEAD(&t->todo);
	CDS_INIT_LIST_HEAD(&t->inbox);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK)) {
		rc = -errno;
		snprintf(err, errlen, "tracer: %s", strerror(-rc));
		goto fail;
	}
	t->rfd = pipefd[0];
	t->wfd = pipefd[1];
	rc = -pthread_create(&t->thread, NULL, tracer_main, t);
	if (rc) {
		snprintf(err, errlen, "tracer thread: %s", strerror(-rc));
		goto fail;
	}
	xlock(&t->lock);
	while (!t->started)
		pthread_cond_wait(&t->started_cond, &t->lock);
	rc = -t->start_err;
	xunlock(&t->lock);
	if (rc) {
		pthread_join(t->thread, NULL);
		snprintf(err, errlen, "cannot trace the program (PTRACE_SEIZE): %s%s",
			 rc == -ESRCH ? "it is gone" : strerror(-rc),
			 rc == -EPERM ? " (see /proc/sys/kernel/yama/ptrace_scope)" : "");
		goto fail;
	}
	*out = t;
	return t->rfd;
fail:
	if (t->rfd >= 0)
		close(t->rfd);
	if (t->wfd >= 0)
		close(t->wfd);
	free(t);
	return rc;
}

/* ---- the transport, called by the serving threads ---- */

static struct pt_tracer *tracer_of(const struct nt_listener *l)
{
	return l->tp_ctx;
}

static int pt_recv(struct nt_listener *l, struct seccomp_notif *n, size_t size)
{
	struct pt_tracer *t = tracer_of(l);
	struct pt_tracee *te;

	xlock(&t->lock);
	if (t->serving && pthread_equal(pthread_self(), t->thread)) {
		te = t->serving; /* serve_inbox() */
		t->serving = NULL;
	} else if (!cds_list_empty(&t->queue)) {
		te = cds_list_first_entry(&t->queue, struct pt_tracee, queue_node);
		queue_del(t, te);
	} else {
		xunlock(&t->lock);
		return -ENOENT;
	}
	memset(n, 0, size);
	memcpy(n, &te->call, sizeof(te->call) < size ? sizeof(te->call) : size);
	xunlock(&t->lock);
	return 0;
}

static struct pt_tracee *pending(struct pt_tracer *t, uint64_t id)
{
	struct pt_tracee *te = find(t, (pid_t)(uint32_t)id);

	if (!te || te->call.id != id)
		return NULL;
	switch (te->state) {
	case PT_STOPPED:
	case PT_PARKING:
	case PT_SLEEPING:
		return te;
	default:
		return NULL;
	}
}

static int pt_answer(const struct nt_listener *l, uint64_t id, long val, unsigned int flags)
{
	struct pt_tracer *t = tracer_of(l);
	struct pt_tracee *te;
	int rc = 0;

	xlock(&t->lock);
	te = pending(t, id);
	if (!te) {
		rc = -ENOENT;
	} else {
		te->val = val;
		te->flags = flags;
		te->state = te->state == PT_SLEEPING ? PT_WAKING : PT_ANSWERED;
		todo_add(t, te);
	}
	xunlock(&t->lock);
	return rc;
}

static int pt_answer_fd(const struct nt_listener *l, uint64_t id, int fd, bool cloexec)
{
	(void)l, (void)id, (void)fd, (void)cloexec;
	return -EOPNOTSUPP;
}

static bool pt_waits(const struct nt_listener *l, uint64_t id)
{
	struct pt_tracer *t = tracer_of(l);
	bool waits;

	xlock(&t->lock);
	waits = pending(t, id) != NULL;
	xunlock(&t->lock);
	return waits;
}

static void pt_parked(const struct nt_listener *l, uint64_t id)
{
	struct pt_tracer *t = tracer_of(l);
	struct pt_tracee *te;

	xlock(&t->lock);
	te = pending(t, id);
	if (te && te->state == PT_STOPPED) {
		te->state = PT_PARKING;
		te->park_at = nt_now_ns() + PT_PARK_DELAY_NS;
		/* it sleeps in pause() when due, unless the program's filter refuses that */
		if (!t->no_sleep)
			todo_add(t, te);
	}
	xunlock(&t->lock);
}

static void tracer_free(struct pt_tracer *t)
{
	for (int i = 0; i < PT_BUCKETS; i++)
		while (t->buckets[i]) {
			struct pt_tracee *te = t->buckets[i];

			t->buckets[i] = te->next;
			free(te);
		}
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->started_cond);
	free(t);
	/* t->rfd is the listener's fd: its owner closes it */
}

static void pt_attached(struct nt_listener *l)
{
	struct pt_tracer *t = tracer_of(l);

	xlock(&t->lock);
	t->l = l; /* (no reference: l's release stops the tracer first) */
	kick(t);
	xunlock(&t->lock);
}

/*
 * The listener goes: the tracer stops (its tracees die with it, PTRACE_O_EXITKILL). From the
 * tracer's own thread (its call held the last reference) it ends as soon as the call is
 * done, and frees itself.
 */
static void pt_release(struct nt_listener *l)
{
	struct pt_tracer *t = tracer_of(l);

	atomic_store(&t->stop, true);
	if (pthread_equal(pthread_self(), t->thread)) {
		t->orphan = true;
		return;
	}
	xlock(&t->lock);
	kick(t);
	xunlock(&t->lock);
	pthread_join(t->thread, NULL);
	tracer_free(t);
}

const struct nt_transport nt_ptrace_transport = {
	.name = "ptrace",
	.recv = pt_recv,
	.answer = pt_answer,
	.answer_fd = pt_answer_fd,
	.waits = pt_waits,
	.read = nt_vm_read,
	.write = nt_vm_write,
	.parked = pt_parked,
	.attached = pt_attached,
	.release = pt_release,
};

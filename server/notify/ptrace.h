/* SPDX-License-Identifier: MIT */
/*
 * The ptrace transport (transport.h), for where seccomp user notification cannot be had: a
 * filter with a listener is installed above already (a nested sandbox, a container whose
 * runtime installed one, another supervisor), or the kernel lacks it. The program's filter
 * returns SECCOMP_RET_TRACE for the calls notification would trap (filter.h), and one tracer
 * thread of the supervisor takes them from the ptrace stops they make and serves them with the
 * ordinary serving code as if they were notifications, as a worker of its own (a guest,
 * super.h): a call costs one stop and no hand-off between threads. Every other call runs
 * untraced.
 *
 * The tracer
 * ----------
 * Only the thread that seized a tracee may make ptrace requests of it, so one thread does all
 * of them. It waits in sigtimedwait(2) for two signals only: SIGCHLD, for stops, and SIGURG,
 * which the serving threads send it (tgkill) when they leave it work; both stay blocked, so one
 * sent before it waits is pending and not lost. It follows the whole program tree
 * (PTRACE_O_TRACECLONE, FORK, VFORK, EXEC) and kills it if it dies itself
 * (PTRACE_O_EXITKILL): a tracee left parked without a tracer would sleep for ever.
 *
 * A call's life, one tracee at a time (pt_state, under t->lock):
 *   RUNNING    no call of ours.
 *   STOPPED    in its seccomp stop: the call is on the queue the listener fd stands for, or
 *              being served. The serving threads see a notification: id, tid, arch, nr, args.
 *   ANSWERED   still stopped, answered: the tracer skips the call (orig_rax -1) and sets the
 *              result, or lets it run on (NT_CONTINUE), and resumes it.
 *   PARKING    still stopped, parked by the serving code (nt_park()). If it still waits
 *   SLEEPING   1 ms later, the tracer turns the call into pause(2) and resumes it, so the
 *              thread sleeps interruptibly as it would in semop and its signals reach the
 *              tracer (signal-delivery-stops). A wait that ends sooner (a lock passed on) is
 *              answered from the seccomp stop, two stops cheaper; a signal sent meanwhile is
 *              pending when pause() starts, and interrupts it at once. The program's own
 *              seccomp filters judge the pause() as well (the kernel checks a call the
 *              tracer changed again): it is resumed with PTRACE_SYSCALL, and a pause() that
 *              returns other than interrupted was refused. The call then waits in that stop
 *              and every later one in its seccomp stop (PARKING for good), uninterruptible
 *              but answered as natively, rather than returning the refusal as its result.
 *   WAKING     sleeping, answered: the tracer interrupts it (PTRACE_INTERRUPT) and sets the
 *              result at its next stop, whichever stop that is.
 * An answer is final once taken: from STOPPED or SLEEPING the thread cannot leave without the
 * tracer, except by dying. So answer() never waits for the tracer.
 *
 * Signals. A signal for a SLEEPING thread is seen at its signal-delivery-stop. If it would be
 * ignored natively (SIG_IGN, or SIG_DFL of a signal whose default is to ignore it: no native
 * semop ever sees those) it is suppressed and pause() restarts. Otherwise the call is
 * cancelled (waits() turns false, as for a cancelled notification) and the thread is left as
 * seccomp leaves an interrupted notification: the system call's number back, -ERESTARTSYS as
 * its result, the signal delivered. Without SA_RESTART that is EINTR; with it (or after
 * SIGSTOP and SIGCONT) the call restarts, and the serving code answers the restart EINTR as it
 * does for notifications (parked.h): semop is never restarted natively. A signal for a
 * STOPPED thread waits until it runs again, as it would while a non-blocking semop ran.
 * Group-stops are let be (PTRACE_LISTEN), so SIGSTOP and SIGCONT behave natively.
 *
 * What a call costs the tracer: seven system calls, each about a tenth of the stop's round trip
 * on a virtual machine with PTI. sigtimedwait() for the stop (its SIGCHLD names the thread,
 * so a lone thread's stop needs no waitpid(): ptrace.c, took_call()); PTRACE_GET_SYSCALL_INFO,
 * for the call's architecture and the proof that the stop is a seccomp stop; the sembuf, read
 * with the caller's rights (process_vm_readv); the caller's credentials (PIDFD_GET_INFO, as for
 * a notification: ident.h); two PTRACE_POKEUSERs that skip the call and set its result; and
 * PTRACE_CONT. The bare stop makes four of them. Credentials kept from one call to the next
 * would save one more, but they would go stale unseen wherever a filter above ours answers the
 * calls that change them (USER_NOTIF outranks TRACE, and the nested sandbox is where this
 * transport is used), so they are read on every call.
 *
 * Calls parked by the tracer are completed by whichever thread serves the call that wakes
 * them: its answer is left to the tracer (the to-do list, and a SIGURG to wake it).
 *
 * semvisord traces too, for a program that asks it to (semvisor-run --daemon where notification
 * cannot be had; daemon/agent.c): one tracer per such program, all in the daemon's process,
 * which share SIGCHLD (ptrace.c, "The tracers of this process").
 *
 * The listener's fd is the read end of a pipe the tracer closes when its last tracee is gone,
 * which the workers see as the listener's hang-up. Until the listener is made, or if no guest
 * worker can be had, calls go to the workers instead: the pipe then holds one byte while the
 * queue of calls is not empty, so their epoll serves it as any listener.
 *
 * What it cannot do: put a file into a tracee (answer_fd: EOPNOTSUPP, so no --proc-view), and
 * a program that traces its own children or attaches to others (gdb, strace) gets EPERM from
 * ptrace, as each thread has one tracer. What shows: a SLEEPING call is in pause() as far as
 * /proc/PID/task/TID/syscall tells (natively semtimedop, or semop), so a tool that looks there
 * for threads blocked in semop must accept pause() too (bench/bench_util.h does).
 */
#ifndef SV_NOTIFY_PTRACE_H
#define SV_NOTIFY_PTRACE_H

#include <stddef.h>
#include <sys/types.h>

#include "notify/transport.h"

struct pt_tracer;

/*
 * Seize pid (which has let us trace it: PR_SET_PTRACER, or asked us to) from a tracer thread
 * of our own. pidfd, if not -1, names the process meant: one whose number was reaped and
 * reused before the seizure is let go again (-ESRCH). The fd to add as the listener
 * (nt_listener_opts.tp = &nt_ptrace_transport, .tp_ctx = *out), or -errno with a sentence in
 * err. SIGCHLD must be blocked in every thread of the process, before any of them starts: the
 * caller's mask is changed to block it, so threads it starts later inherit that; a thread
 * that took it (or waited for children without __WNOTHREAD) would take tracees' stops. Any
 * number of tracers may run in one process (ptrace.c, "The tracers of this process").
 */
int pt_tracer_start(pid_t pid, int pidfd, struct pt_tracer **out, char *err, size_t errlen);

extern const struct nt_transport nt_ptrace_transport;

#endif

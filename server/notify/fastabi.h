/* SPDX-License-Identifier: MIT */
/*
 * The fast path's two trapped requests, between the preloaded library (interposer/fastlib.c)
 * and the supervisor (serve.c). Both are system calls the kernel also takes, and answers as it
 * answers a program not served by semvisor: so the library finds out by asking.
 *
 *   semctl(semid, file, SV_FAST_CMD, &map)
 *       One of the set's fast files (enum sv_fast_file, sem.h), as a new close-on-exec fd in
 *       the caller: the call returns it. SV_FAST_PAGE first: it writes struct sv_fast_map at
 *       &map; the others read map.serial from there. Errors as sv_fast_file()'s, and EFAULT.
 *       The kernel answers EINVAL (no such command).
 *   semctl(semid, slot, SV_FAST_ASK, &map)
 *       The operation of pending slot `slot` saw at E2 that the storage map.serial names was
 *       revoked after its A5: 1 if it counted, 0 if not (sv_fast_ask()). Kernel: EINVAL.
 *   semtimedop(semid, sops, nsops, timeout, seq << 8 | slot + 1, SV_FAST_MARK)
 *       A semop from the thread owning pending slot `slot` of its page (slot + 1 = 0: none):
 *       the call that resolves that thread's doomed operation (fastpath.pml). The kernel
 *       ignores the arguments past the fourth. A program that lies about its slot can only
 *       resolve its own threads' operations early, which risks only its own semadj. seq is
 *       new for every call of the thread: the kernel's restart of an interrupted call repeats
 *       the registers, a program's call after EINTR does not, so the two never look alike
 *       (serve.c's restart_or_retry()), whatever the library's frames left on the stack.
 *   semtimedop(semid, sops, 1, NULL, seq << 8 | slot + 1, SV_FAST_PROBE)
 *       The same, for a try of a call that waits in the library before it parks (fastlib.c's
 *       wait_here()): its one sop has IPC_NOWAIT. Served as the call above; only counted
 *       apart: one answered EAGAIN is no error of the program's, but a probe that found the
 *       semaphore still short (nt_stats.busy_probes), and the others are the program's calls.
 *       A program that marks another call so only moves it between its own counters.
 */
#ifndef SV_NOTIFY_FASTABI_H
#define SV_NOTIFY_FASTABI_H

#include <stdint.h>

#define SV_FAST_CMD   0x5e7a
#define SV_FAST_ASK   0x5e7b
#define SV_FAST_MARK  UINT64_C(0x5e7a5107fa57ca11)
#define SV_FAST_PROBE UINT64_C(0x5e7a5107fa57ca12)

#endif

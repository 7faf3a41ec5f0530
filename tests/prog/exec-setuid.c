/* SPDX-License-Identifier: MIT */
/*
 * A thread other than the leader execs a set-user-ID binary (owned by nobody): the new image
 * takes over the leader's thread id and runs with euid nobody. Its calls must be decided with
 * those credentials (EACCES on a 0600 root set, EPERM for IPC_RMID), not with what was known
 * of the thread that had that id before.
 *
 * The set-user-ID binary is a copy of this program, made next to it for the run and removed
 * after; "image ID" runs the image's part.
 */
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "prog.h"

static char copy[PATH_MAX], idarg[16];

static void *exec_from_thread(void *arg)
{
	char *argv[] = { copy, (char *)"image", idarg, NULL };

	(void)arg;
	execv(copy, argv);
	printf("FATAL: execv %s: %s\n", copy, strerror(errno));
	exit(2);
}

static int image(int id)
{
	printf("image: euid %d\n", (int)geteuid());
	CHECK("image: GETVAL", -EACCES, getval(id, 0));
	CHECK("image: SETVAL", -EACCES, setval(id, 0, 9));
	CHECK("image: IPC_RMID", -EPERM, semctl(id, 0, IPC_RMID));
	/* a set-user-ID process cannot be looked at by LeakSanitizer: leave without its check */
	fflush(NULL);
	_exit(prog_exit_status());
}

/* Copy ourselves to path, owned by nobody, set-user-ID. */
static void make_copy(const char *path)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY), out;
	ssize_t n;

	MUST(in >= 0);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	MUST(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		MUST(write(out, buf, (size_t)n) == n);
	MUST(n == 0);
	close(in);
	MUST(fchown(out, 65534, 65534) == 0 && fchmod(out, 04755) == 0);
	close(out);
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];
	pthread_t t;
	int id;
	pid_t p;

	prog_init();
	if (argc == 3 && !strcmp(argv[1], "image"))
		return image(atoi(argv[2]));
	MUST(geteuid() == 0);
	MUST(realpath("/proc/self/exe", self));
	snprintf(copy, sizeof(copy), "%s/.exec-setuid-%d", dirname(self), (int)getpid());
	make_copy(copy);

	id = semget(IPC_PRIVATE, 1, 0600);
	MUST(id >= 0);
	snprintf(idarg, sizeof(idarg), "%d", id);
	CHECK("root: SETVAL", 0, setval(id, 0, 4));

	p = xfork();
	if (p == 0) {
		/* the leader is known to the supervisor as root, then a thread execs */
		CHECK("leader as root: GETVAL", 4, getval(id, 0));
		MUST(pthread_create(&t, NULL, exec_from_thread, NULL) == 0);
		for (;;)
			pause();
	}
	reap_ok(p, "image");
	unlink(copy);
	CHECK("root: the set is untouched", 4, getval(id, 0));
	return prog_exit_status();
}

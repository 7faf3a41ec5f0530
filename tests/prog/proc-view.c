/* SPDX-License-Identifier: MIT */
/*
 * /proc/sysvipc/sem as natively (semvisor-run --proc-view): the file lists this namespace's
 * sets in the kernel's format, whichever way the path is written (absolute, relative to the
 * working directory or a dirfd, through /proc/self, a symlink, a second proc mount, openat2
 * with resolve flags), and the tools that read it (ipcs, lsipc) print what they print
 * natively. Paths that do not reach the file (O_NOFOLLOW on a symlink, RESOLVE_NO_SYMLINKS, a
 * directory) fail as natively. Times are shown as T (set) or 0, since the runs differ in them.
 *
 * Usage: proc-view (in a fresh IPC namespace, as root)
 *        proc-view sysctl: /proc/sys/kernel/sem and sem_next_id as read, what ipcs -l makes of
 *        them, and semget at the limits they give (run with limits of the caller's choosing:
 *        natively written into the file, under semvisor-run given with --limits)
 */
#include <ctype.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "prog.h"

/* The file's text, the otime and ctime columns masked; "-1 ERRNO" if it cannot be read. */
static void show(const char *how, int fd)
{
	char buf[8192], *line, *save;
	ssize_t n, len = 0;

	printf("== %s\n", how);
	if (fd < 0) {
		printf("-1 %s\n", strerrorname_np(errno));
		return;
	}
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	if (n < 0) {
		printf("read: -1 %s\n", strerrorname_np(errno));
		return;
	}
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *ctime = strrchr(line, ' '), *otime;

		/* the last two columns are the times: as they are spaced, then T or 0 */
		if (!isdigit((unsigned char)line[strlen(line) - 1]) || !ctime) {
			printf("%s\n", line);
			continue;
		}
		*ctime++ = '\0';
		otime = strrchr(line, ' ');
		MUST(otime);
		*otime++ = '\0';
		printf("%s %*s %*s\n", line, (int)strlen(otime), strcmp(otime, "0") ? "T" : "0",
		       (int)strlen(ctime), strcmp(ctime, "0") ? "T" : "0");
	}
}

static int openat2_(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * While a child makes K1 then K2 and removes K2 then K1, over and over, no read of the file
 * may show K2 without K1: each read is one state of the namespace.
 */
#define K1 0x1111
#define K2 0x2222

static void consistent_snapshots(void)
{
	int bad = 0, reads = 0;
	pid_t pid = fork();

	MUST(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 400; i++) {
			int a = semget(K1, 1, IPC_CREAT | 0600),
			    b = semget(K2, 1, IPC_CREAT | 0600);

			if (a < 0 || b < 0 || semctl(b, 0, IPC_RMID) || semctl(a, 0, IPC_RMID))
				_exit(1);
		}
		_exit(0);
	}
	for (int st; waitpid(pid, &st, WNOHANG) == 0 || reads < 50; reads++) {
		char buf[8192];
		int fd = open("/proc/sysvipc/sem", O_RDONLY);
		ssize_t n;
		bool k1, k2;

		MUST(fd >= 0);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		MUST(n > 0);
		buf[n] = '\0';
		k1 = strstr(buf, "\n      4369 ") != NULL; /* K1 in decimal, right-aligned */
		k2 = strstr(buf, "\n      8738 ") != NULL;
		bad += k2 && !k1;
	}
	EXPECT(!bad, "%d of %d reads showed K2 without K1", bad, reads);
	printf("== reads while sets come and go: consistent %s\n", bad ? "no" : "yes");
}

static void run(const char *cmd)
{
	printf("== %s\n", cmd);
	fflush(stdout);
	EXPECT(system(cmd) == 0, "%s failed", cmd);
}

static void sysctls(void)
{
	int lim[4];
	FILE *f;

	show("/proc/sys/kernel/sem", open("/proc/sys/kernel/sem", O_RDONLY));
	show("/proc/sys/kernel/sem_next_id", open("/proc/sys/kernel/sem_next_id", O_RDONLY));
	run("ipcs -s -l");
	f = fopen("/proc/sys/kernel/sem", "r");
	MUST(f && fscanf(f, "%d %d %d %d", &lim[0], &lim[1], &lim[2], &lim[3]) == 4);
	fclose(f);
	/* the limits the file shows are the ones semget keeps */
	printf("semget of SEMMSL semaphores: %s\n",
	       semget(IPC_PRIVATE, lim[0], 0600) >= 0 ? "ok" : strerrorname_np(errno));
	printf("semget of SEMMSL+1 semaphores: %s\n",
	       semget(IPC_PRIVATE, lim[0] + 1, 0600) >= 0 ? "ok" : strerrorname_np(errno));
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/proc-view-XXXXXX", link[128], procdir[80];
	struct semid_ds ds = { 0 };
	struct sembuf op = { 0, 1, 0 };
	union semun arg;
	int a, b, c, d, fd;

	prog_init();
	if (argc > 1 && !strcmp(argv[1], "sysctl")) {
		sysctls();
		return prog_exit_status();
	}
	a = semget(0x1234, 3, IPC_CREAT | 0640);
	b = semget(IPC_PRIVATE, 1, 0600);
	c = semget(0x5678, 2, IPC_CREAT | 0666);
	d = semget((key_t)0x9abcdef0, 5, IPC_CREAT | 0600); /* a negative key */
	MUST(a >= 0 && b >= 0 && c >= 0 && d >= 0);
	MUST(semop(a, &op, 1) == 0);
	ds.sem_perm.uid = 1000;
	ds.sem_perm.gid = 1000;
	ds.sem_perm.mode = 0604;
	arg.buf = &ds;
	MUST(semctl(c, 0, IPC_SET, arg) == 0);
	MUST(semctl(b, 0, IPC_RMID) == 0); /* a gap in the indices */

	show("/proc/sysvipc/sem", open("/proc/sysvipc/sem", O_RDONLY));
	show("openat2, no resolve flags", openat2_(AT_FDCWD, "/proc/sysvipc/sem", O_RDONLY, 0));
	show("/proc/self/../sysvipc/sem", open("/proc/self/../sysvipc/sem", O_RDONLY));
	show("/proc//sysvipc/./sem", open("/proc//sysvipc/./sem", O_RDONLY));
	fd = open("/proc/sysvipc", O_RDONLY | O_DIRECTORY);
	MUST(fd >= 0);
	show("openat(dirfd, sem)", openat(fd, "sem", O_RDONLY));
	show("openat2(dirfd, sem, RESOLVE_BENEATH)",
	     openat2_(fd, "sem", O_RDONLY, RESOLVE_BENEATH));
	show("openat2(dirfd, ../sysvipc/sem, RESOLVE_BENEATH)",
	     openat2_(fd, "../sysvipc/sem", O_RDONLY, RESOLVE_BENEATH));
	close(fd);
	MUST(chdir("/proc/sysvipc") == 0);
	show("sem, from /proc/sysvipc", open("sem", O_RDONLY));
	MUST(chdir("/") == 0);
	show("proc/sysvipc/sem, from /", open("proc/sysvipc/sem", O_RDONLY));

	MUST(mkdtemp(dir));
	snprintf(link, sizeof(link), "%s/link", dir);
	MUST(symlink("/proc/sysvipc/sem", link) == 0);
	show("a symlink to it", open(link, O_RDONLY));
	show("a symlink, O_NOFOLLOW", open(link, O_RDONLY | O_NOFOLLOW));
	show("a symlink, RESOLVE_NO_SYMLINKS",
	     openat2_(AT_FDCWD, link, O_RDONLY, RESOLVE_NO_SYMLINKS));
	show("the directory /proc/sysvipc", open("/proc/sysvipc/sem/", O_RDONLY));
	show("/proc/sysvipc/shm (not ours)", open("/proc/sysvipc/shm", O_RDONLY));
	MUST(unlink(link) == 0);

	/* a second proc mount, in a mount namespace of our own */
	snprintf(procdir, sizeof(procdir), "%s/proc", dir);
	MUST(mkdir(procdir, 0755) == 0);
	MUST(unshare(CLONE_NEWNS) == 0);
	MUST(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
	MUST(mount("proc", procdir, "proc", 0, NULL) == 0);
	snprintf(link, sizeof(link), "%s/sysvipc/sem", procdir);
	show("proc mounted elsewhere", open(link, O_RDONLY));
	MUST(umount(procdir) == 0);
	MUST(rmdir(procdir) == 0 && rmdir(dir) == 0);

	consistent_snapshots();

	/* the tools that read it */
	run("ipcs -s");
	run("ipcs -s -c");
	run("ipcs -s -u");
	run("ipcs -s -l");
	/* times and pids differ between runs: masked, with the padding a pid's width leaves */
	run("ipcs -s -i 0 | sed -E 's/time = .*/time = T/; "
	    "s/^([0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +)[0-9]+ *$/\\1P/'");
	run("ipcs -s -t | sed -E 's/[A-Z][a-z]{2} [A-Z][a-z]{2} +[0-9]+ [0-9:]+ [0-9]+/T/g'");
	run("lsipc -s");
	run("lsipc -s -o KEY,ID,PERMS,OWNER,NSEMS,CUID,CGID,UID,GID");
	run("ipcrm -S 0x5678");
	show("after ipcrm -S 0x5678", open("/proc/sysvipc/sem", O_RDONLY));
	run("ipcs -s");
	return prog_exit_status();
}

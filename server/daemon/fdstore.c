/* SPDX-License-Identifier: MIT */
/*
 * Restarts that lose nothing, through the service manager's fd store (systemd's FDSTORE=1, or
 * any keeper speaking the same protocol; semvisord.8 says what each way of stopping does).
 *
 * Every listener goes to the store the moment it is received, before it is served: from then
 * on the kernel keeps its pending notifications whatever happens to this process, and the next
 * semvisord gets it back in LISTEN_FDS. Its store name carries what serving it depends on (its
 * key, whether its filter traps namespace changes, its named namespace), so that even without
 * a saved state a listener is served as it was; names and counters are in the state. systemd
 * drops a listener from the store by itself once it hangs up (its programs have all exited).
 *
 * A planned stop (SIGTERM) writes the whole state (notify.h, nt_super_save()) into a sealed
 * memfd stored as "state"; a start takes it back, applies it before serving anything, and
 * removes it from the store at once, so that a later crash never brings back an old state.
 * A state that cannot be applied is refused with a log line and kept aside in a file next to
 * the agent socket, never half-applied.
 *
 * A crash leaves no state, but the journal (notify.h, recover.c): a memfd stored as "journal"
 * when the first process starts, with a checkpoint, every change since and every call not yet
 * answered. The next start recovers from it; a state, when there is one, is newer (the
 * journal stops before the state is written). Listeners taken over with neither, or with a
 * journal that cannot be read, are cut off (their calls fail with ENOSYS, as at a stop without
 * a store) rather than left to wait for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"

#define STATE_NAME   "state"
#define JOURNAL_NAME "journal"

bool fdstore_enabled(void)
{
	const char *max = getenv("FDSTORE"); /* systemd 254+: the store's size, 0 when off */

	return getenv("NOTIFY_SOCKET") && !(max && !strcmp(max, "0"));
}

/*
 * "l<key>[t][-<hex of the namespace name>]": the characters systemd allows in a name (no
 * ':'), at most 8 + 20 + 1 + 126 of its 255.
 */
static void listener_name(char *out, size_t len, const struct nt_listener_opts *lo)
{
	int n = snprintf(out, len, "l%llu%s", (unsigned long long)lo->key, lo->ns_traps ? "t" : "");

	if (lo->ns_name) {
		n += snprintf(out + n, len - (size_t)n, "-");
		for (const char *c = lo->ns_name; *c && (size_t)n + 3 < len; c++)
			n += snprintf(out + n, len - (size_t)n, "%02x", (unsigned char)*c);
	}
}

/* The opposite; false for a name that is not a listener's. ns (64 bytes) gets the name. */
static bool parse_listener_name(const char *s, struct nt_listener_opts *lo, char *ns)
{
	char *end;

	memset(lo, 0, sizeof(*lo));
	if (s[0] != 'l' || s[1] < '0' || s[1] > '9')
		return false;
	lo->key = strtoull(s + 1, &end, 10);
	if (!lo->key)
		return false;
	if (*end == 't') {
		lo->ns_traps = true;
		end++;
	}
	if (*end == '-') {
		size_t n = 0;

		for (end++; end[0] && end[1] && n < 63; end += 2) {
			unsigned int c;

			if (sscanf(end, "%2x", &c) != 1 || !c)
				return false;
			ns[n++] = (char)c;
		}
		ns[n] = '\0';
		if (!n || *end)
			return false;
		lo->ns_name = ns;
	}
	return *end == '\0';
}

void fdstore_listener(struct daemon *d, int fd, const struct nt_listener_opts *lo)
{
	char msg[320], name[256];
	int rc;

	if (!fdstore_enabled())
		return;
	listener_name(name, sizeof(name), lo);
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	if (rc <= 0)
		dlog(d, "fd store: %s: %s (a restart would cut it off)", name,
		     rc ? strerror(-rc) : "no service manager");
}

void fdstore_forget(struct daemon *d, const struct nt_listener_opts *lo)
{
	char msg[320], name[256];

	(void)d;
	if (!fdstore_enabled())
		return;
	listener_name(name, sizeof(name), lo);
	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	sd_notify(0, msg);
}

/* The state refused: a file next to the agent socket, for whoever looks into why. */
static void keep_aside(struct daemon *d, const void *buf, size_t len)
{
	char dir[sizeof(d->cfg.agent_path)], path[sizeof(dir) + 64];
	int fd;

	snprintf(dir, sizeof(dir), "%s", d->cfg.agent_path);
	snprintf(path, sizeof(path), "%s/state.refused.%lld", dirname(dir), (long long)time(NULL));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		dlog(d, "state: cannot keep it aside in %s: %s", path, strerror(errno));
	else
		dlog(d, "state: kept aside in %s", path);
	if (fd >= 0)
		close(fd);
}

/* Apply the stored state: true if it was. */
static bool take_state(struct daemon *d, int fd)
{
	struct stat st;
	void *buf;
	char err[256];
	int rc;

	if (fstat(fd, &st) || st.st_size <= 0) {
		dlog(d, "state: empty or unreadable; starting without it");
		return false;
	}
	buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED) {
		dlog(d, "state: %s; starting without it", strerror(errno));
		return false;
	}
	rc = nt_super_restore(d->super, buf, (size_t)st.st_size, err, sizeof(err));
	if (rc) {
		dlog(d, "state refused (%s): starting without it", err);
		keep_aside(d, buf, (size_t)st.st_size);
	} else {
		dlog(d, "state: taken over (%lld bytes)", (long long)st.st_size);
	}
	munmap(buf, (size_t)st.st_size);
	return rc == 0;
}

/*
 * Listeners taken over without a state or a journal to serve them with (or with one refused):
 * the calls they had parked are known to nobody and would wait for ever. Cut off, as at a stop without a
 * store, their programs' calls fail with ENOSYS instead.
 */
static void cut_off(struct daemon *d, char **names, int n, int listeners)
{
	nt_super_drop_listeners(d->super);
	for (int i = 0; i < n; i++) {
		struct nt_listener_opts lo;
		char ns[64];

		if (names && names[i] && parse_listener_name(names[i], &lo, ns))
			fdstore_forget(d, &lo);
	}
	dlog(d, "fd store: %d clients cut off: no state to serve their waiting calls with",
	     listeners);
}

/*
 * The memfd that makes a crash lose nothing (notify.h): the stored one (journal >= 0), else a
 * new one, stored at once. A stored one that cannot be read is replaced: crashes before it
 * would be lost, not the ones after. false when there is none to use.
 */
static bool open_journal(struct daemon *d, int journal, bool after_crash)
{
	int rc = journal >= 0 ? nt_super_journal_open(d->super, journal, after_crash) : -ENOENT;

	if (rc && journal >= 0) {
		dlog(d, "journal: %s; starting a new one", strerror(-rc));
		sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" JOURNAL_NAME);
	}
	if (rc) {
		int fd;

		if ((rc = nt_super_journal_open(d->super, -1, false))) {
			dlog(d, "journal: %s: a crash would lose the state", strerror(-rc));
			return false;
		}
		fd = nt_super_journal_fd(d->super);
		rc = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" JOURNAL_NAME "\nFDPOLL=0",
					    &fd, 1);
		if (rc <= 0)
			dlog(d, "journal: cannot store it: %s (a crash would lose the state)",
			     rc ? strerror(-rc) : "no service manager");
		return false; /* nothing in a new one to recover from */
	}
	return true;
}

/* After a crash: the state the journal holds. true if it was taken over. */
static bool recover(struct daemon *d)
{
	char err[256];
	int rc = nt_super_recover(d->super, err, sizeof(err));

	if (rc)
		dlog(d, "journal refused (%s): starting without it", err);
	else
		dlog(d, "journal: state taken over after a crash");
	return rc == 0;
}

int fdstore_take(struct daemon *d)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(0, &names), state = -1, journal = -1, listeners = 0, rc;
	bool recovered = false;
	uint64_t max_key = 0;
	bool taken = false;

	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "";
		struct nt_listener_opts lo;
		char ns[64];

		if (!strcmp(name, STATE_NAME)) {
			if (state >= 0)
				close(state);
			state = fd;
		} else if (!strcmp(name, JOURNAL_NAME)) {
			if (journal >= 0)
				close(journal);
			journal = fd;
		} else if (parse_listener_name(name, &lo, ns)) {
			lo.name = name;
			if (lo.key > max_key)
				max_key = lo.key;
			rc = nt_super_add_listener(d->super, fd, &lo);
			if (rc)
				dlog(d, "fd store: %s: cannot serve it: %s", name, strerror(-rc));
			else
				listeners++;
		}
	}
	d->next_key = max_key;
	/*
	 * Before anything is restored: calls served again from here on must be in its slots. A
	 * saved state is newer than any journal (the journal stopped before it was written).
	 * Without one, the journal is the state, clients or none: sets outlive the programs
	 * that made them while their namespace lives.
	 */
	if (fdstore_enabled() && open_journal(d, journal, state < 0) && state < 0)
		taken = recovered = recover(d);
	if (state >= 0) {
		taken = take_state(d, state);
		close(state);
		sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" STATE_NAME);
	}
	if (listeners && !taken) {
		cut_off(d, names, n, listeners);
		listeners = 0;
	} else if (listeners) {
		dlog(d, "fd store: %d clients taken over", listeners);
	}
	/* a recovery checkpointed already; anything else starts its journal from here */
	if (nt_super_journal_fd(d->super) >= 0 && !recovered &&
	    (rc = nt_super_journal_start(d->super)))
		dlog(d, "journal: cannot start it: %s (a crash would lose the state)",
		     strerror(-rc));
	if (names) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	return listeners;
}

void fdstore_save(struct daemon *d)
{
	void *buf;
	size_t len;
	int fd, rc;

	/* the state saved is newer than the journal: the next process takes the state */
	nt_super_journal_stop(d->super);
	if (!fdstore_enabled())
		return;
	rc = nt_super_save(d->super, &buf, &len);
	if (rc) {
		dlog(d, "state: cannot save it: %s", strerror(-rc));
		return;
	}
	fd = memfd_create("semvisor-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		dlog(d, "state: cannot save it: %s", strerror(errno));
	} else if ((rc = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" STATE_NAME "\nFDPOLL=0",
						&fd, 1)) <= 0) {
		dlog(d, "state: cannot store it: %s", rc ? strerror(-rc) : "no service manager");
	} else {
		dlog(d, "state: saved (%zu bytes)", len);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
}

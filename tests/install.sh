#!/bin/sh
# make install and make uninstall, into a scratch DESTDIR: install builds the programs
# only (no test, no benchmark), puts every file where the README says, and uninstall leaves
# nothing behind but the administrator's configuration; and every configuration key is in
# semvisord.conf(5) and the example file. Usage: O=build tests/install.sh
set -eu
O=${O:-build}
dest=$(mktemp -d /tmp/semvisor-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT INT TERM
fail() { echo "install: $*" >&2; exit 1; }

# What install would build, from nothing: the programs, not the tests or benchmarks.
plan=$(make -n install O="$dest/fresh" DESTDIR="$dest/root" 2>&1)
echo "$plan" | grep -q 'semvisord' || fail "make -n install does not build semvisord"
if echo "$plan" | grep -E -q ' -o [^ ]*/(tests|bench)/'; then
	fail "make install would build tests or benchmarks:
$(echo "$plan" | grep -E ' -o [^ ]*/(tests|bench)/' | head -5)"
fi

# Every key the parser knows is described in semvisord.conf(5) and listed in the example.
keys=$(grep -oE '(strcmp\(key, |\{ )"[a-z_]+"' server/daemon/config.c | grep -oE '"[a-z_]+"' | tr -d '"')
[ "$(echo "$keys" | wc -l)" -ge 20 ] || fail "found only these keys in config.c: $keys"
for k in $keys; do
	grep -qE "^\.BR (.* )?$k( |$)" server/daemon/semvisord.conf.5 ||
		fail "semvisord.conf(5) does not describe $k"
	grep -qE "^#$k =( |$)" systemd/semvisord.conf.example || fail "the example configuration lacks $k"
done

make -s install O="$O" DESTDIR="$dest/root" PREFIX=/usr >/dev/null
for f in usr/bin/semvisor-run usr/bin/semvisorctl usr/sbin/semvisord usr/sbin/semvisor-keeper \
	usr/share/man/man1/semvisor-run.1 usr/share/man/man1/semvisorctl.1 \
	usr/share/man/man5/semvisord.conf.5 usr/share/man/man8/semvisord.8 \
	usr/share/man/man8/semvisor-keeper.8 usr/lib/semvisor/libsemvisor-fast.so \
	usr/lib/systemd/system/semvisord.service \
	usr/lib/systemd/system/semvisord.socket usr/lib/systemd/system/semvisord-control.socket \
	usr/lib/systemd/system/semvisor-metrics.service usr/lib/systemd/system/semvisor-metrics.timer \
	usr/lib/tmpfiles.d/semvisor.conf usr/lib/sysusers.d/semvisor.conf \
	etc/semvisor/semvisord.conf; do
	[ -f "$dest/root/$f" ] || fail "make install did not put $f"
done
# semvisor-lxc and its page wherever liblxc is (the Makefile builds it only there).
if pkg-config --exists lxc 2>/dev/null; then
	for f in usr/bin/semvisor-lxc usr/share/man/man1/semvisor-lxc.1; do
		[ -f "$dest/root/$f" ] || fail "make install did not put $f (liblxc is here)"
	done
	"$dest/root/usr/bin/semvisor-lxc" --version >/dev/null ||
		fail "the installed semvisor-lxc does not run"
fi
grep -q 'ExecStart=/usr/sbin/semvisord' "$dest/root/usr/lib/systemd/system/semvisord.service" ||
	fail "semvisord.service does not run /usr/sbin/semvisord"
"$dest/root/usr/bin/semvisor-run" --version >/dev/null || fail "the installed semvisor-run does not run"
"$dest/root/usr/sbin/semvisor-keeper" --version >/dev/null || fail "the installed semvisor-keeper does not run"

# The sockets' group, as systemd-sysusers makes it at boot from the installed file.
if command -v systemd-sysusers >/dev/null 2>&1; then
	mkdir -p "$dest/sysroot/etc"
	systemd-sysusers --root="$dest/sysroot" "$dest/root/usr/lib/sysusers.d/semvisor.conf" \
		>/dev/null 2>&1 || fail "systemd-sysusers refused the installed sysusers.d file"
	grep -q '^semvisor:' "$dest/sysroot/etc/group" || fail "no semvisor group from sysusers.d"
	grep -q '^SocketGroup=semvisor$' "$dest/root/usr/lib/systemd/system/semvisord.socket" ||
		fail "the agent socket is not the semvisor group's"
fi

echo "# the administrator's" >>"$dest/root/etc/semvisor/semvisord.conf"
make -s install O="$O" DESTDIR="$dest/root" PREFIX=/usr >/dev/null
grep -q "the administrator's" "$dest/root/etc/semvisor/semvisord.conf" ||
	fail "a second make install overwrote the configuration"

make -s uninstall O="$O" DESTDIR="$dest/root" PREFIX=/usr >/dev/null
left=$(cd "$dest/root" && find . -type f | sort)
[ "$left" = "./etc/semvisor/semvisord.conf" ] || fail "make uninstall left: $left"
echo "install: ok (install builds the programs only; uninstall keeps only the configuration)"

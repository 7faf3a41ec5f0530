#!/bin/sh
# Installs the systemd units, tmpfiles entry and example configuration (called by make install);
# with --uninstall removes them again (make uninstall), but never /etc/semvisor/semvisord.conf.
set -eu
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
here=$(dirname "$0")

if [ "${1:-}" = --uninstall ]; then
	rm -f "$DESTDIR$UNITDIR/semvisord.service" "$DESTDIR$UNITDIR/semvisord.socket" \
		"$DESTDIR$UNITDIR/semvisord-control.socket" "$DESTDIR$UNITDIR/semvisord-metrics.socket" \
		"$DESTDIR$UNITDIR/semvisor-metrics.service" \
		"$DESTDIR$UNITDIR/semvisor-metrics.timer" "$DESTDIR$PREFIX/lib/tmpfiles.d/semvisor.conf" \
		"$DESTDIR$PREFIX/lib/sysusers.d/semvisor.conf"
	exit 0
fi

install -d "$DESTDIR$UNITDIR" "$DESTDIR$PREFIX/lib/tmpfiles.d" "$DESTDIR/etc/semvisor"
sed "s|@SBINDIR@|$PREFIX/sbin|g" "$here/semvisord.service" > "$DESTDIR$UNITDIR/semvisord.service"
chmod 0644 "$DESTDIR$UNITDIR/semvisord.service"
# The metrics timer is installed, not enabled: systemctl enable --now semvisor-metrics.timer
sed "s|@BINDIR@|$PREFIX/bin|g" "$here/semvisor-metrics.service" >"$DESTDIR$UNITDIR/semvisor-metrics.service"
chmod 0644 "$DESTDIR$UNITDIR/semvisor-metrics.service"
install -m 0644 "$here/semvisor-metrics.timer" "$DESTDIR$UNITDIR/"
# The metrics port is installed, not enabled: systemctl enable --now semvisord-metrics.socket
install -m 0644 "$here/semvisord.socket" "$here/semvisord-control.socket" \
	"$here/semvisord-metrics.socket" "$DESTDIR$UNITDIR/"
install -m 0644 "$here/semvisor.conf" "$DESTDIR$PREFIX/lib/tmpfiles.d/semvisor.conf"
install -d "$DESTDIR$PREFIX/lib/sysusers.d"
install -m 0644 "$here/semvisor.sysusers" "$DESTDIR$PREFIX/lib/sysusers.d/semvisor.conf"
# On the machine itself (no DESTDIR), make the group now rather than at the next boot.
if [ -z "$DESTDIR" ] && command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers "$PREFIX/lib/sysusers.d/semvisor.conf" || true
fi
# An existing configuration is the administrator's: never overwrite it.
if [ ! -e "$DESTDIR/etc/semvisor/semvisord.conf" ]; then
	install -m 0644 "$here/semvisord.conf.example" "$DESTDIR/etc/semvisor/semvisord.conf"
fi

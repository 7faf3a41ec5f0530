#!/bin/sh
# Installs the systemd units, tmpfiles entry and example configuration (called by make install).
set -eu
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
here=$(dirname "$0")

install -d "$DESTDIR$UNITDIR" "$DESTDIR$PREFIX/lib/tmpfiles.d" "$DESTDIR/etc/semvisor"
sed "s|@SBINDIR@|$PREFIX/sbin|g" "$here/semvisord.service" > "$DESTDIR$UNITDIR/semvisord.service"
chmod 0644 "$DESTDIR$UNITDIR/semvisord.service"
install -m 0644 "$here/semvisord.socket" "$here/semvisord-control.socket" "$DESTDIR$UNITDIR/"
install -m 0644 "$here/semvisor.conf" "$DESTDIR$PREFIX/lib/tmpfiles.d/semvisor.conf"
# An existing configuration is the administrator's: never overwrite it.
if [ ! -e "$DESTDIR/etc/semvisor/semvisord.conf" ]; then
	install -m 0644 "$here/semvisord.conf.example" "$DESTDIR/etc/semvisor/semvisord.conf"
fi

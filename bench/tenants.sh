#!/bin/sh
# Fairness between tenants (issue 15): bench/tenants natively and through a semvisord of its own,
# whose agent socket the greedy tenants (other uids, each in a user+IPC namespace of its own) can
# reach. The rows come from one run of bench/tenants, side by side.
#
#   bench/tenants.sh [BUILD_DIR [OUT_TSV [TENANTS_OPTION...]]]
#
# e.g. bench/tenants.sh build /tmp/tenants.tsv --quick. Environment: SEMVISORD=PATH, the daemon
# (default BUILD_DIR/semvisord; none: the native row only), SEMVISORD_OPTS, more options for it
# (e.g. --workers=2). The daemon runs with no control socket and is stopped on exit.
set -eu
O=${1:-build}
out=${2:-bench/results/tenants.tsv}
if [ $# -gt 2 ]; then shift 2; else set --; fi
daemon=${SEMVISORD:-$O/semvisord}
dir=$(mktemp -d /tmp/semvisor-tenants.XXXXXX)
sock=$dir/agent.sock
dpid=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	if [ -n "$dpid" ]; then
		kill "$dpid" 2>/dev/null || true
		wait "$dpid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

if [ "$daemon" = none ]; then
	daemon_row=
else
	# The tenants are other uids: they must reach the socket (the directory is only searchable).
	chmod 0711 "$dir"
	# shellcheck disable=SC2086 # SEMVISORD_OPTS is a list of options
	"$daemon" --agent-socket="$sock" --control-socket= --set agent_socket_mode=0666 \
		${SEMVISORD_OPTS:-} >"$dir/daemon.log" 2>&1 &
	dpid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -S "$sock" ]; then
		cat "$dir/daemon.log" >&2
		echo "bench/tenants.sh: $daemon did not start (no agent socket at $sock)" >&2
		exit 2
	fi
	daemon_row=1
fi

rc=0
if [ -n "$daemon_row" ]; then
	# semvisord-fast: the same daemon with --fast clients (a victim whose semops seldom reach
	# it, and greedy tenants whose SETALL and GETALL always do)
	"$O/bench/tenants" --out "$out" "$@" \
		--run-under=semvisord "$O/semvisor-run" --daemon="$sock" -- \
		--run-under=semvisord-fast "$O/semvisor-run" --daemon="$sock" --fast -- || rc=$?
else
	"$O/bench/tenants" --out "$out" "$@" || rc=$?
fi
if [ "$rc" -ne 0 ] && [ -s "$dir/daemon.log" ]; then
	echo "bench/tenants.sh: semvisord's log:" >&2
	tail -n 20 "$dir/daemon.log" >&2
fi
exit "$rc"

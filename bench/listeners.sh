#!/bin/sh
# Per-call cost through semvisord with 1 client attached and with 100: the same bench/floor
# row, measured twice in one run, while 99 idle confined programs (each its own listener) are
# attached for the second. Usage: bench/listeners.sh [BUILD_DIR] [OUT_TSV]
set -eu
O=${1:-build}
out=${2:-bench/results/listeners.tsv}
dir=$(mktemp -d /tmp/semvisor-listeners.XXXXXX)
sock=$dir/agent.sock
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	[ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$O/semvisord" --agent-socket="$sock" --control-socket= >"$dir/daemon.log" 2>&1 &
dpid=$!
for i in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

row() {
	"$O/bench/floor" --only notify+sync+read --out "$dir/$1.tsv" \
		--run-under="$1" "$O/semvisor-run" --daemon="$sock" -- | grep -E "^($1|notify)"
}

row one-client
for i in $(seq 99); do
	"$O/semvisor-run" --daemon="$sock" -- sleep 300 &
	pids="$pids $!"
done
# every one of them handed over its listener
for i in $(seq 100); do
	[ "$(grep -c 'agent: serving' "$dir/daemon.log")" -ge 100 ] && break
	sleep 0.1
done
echo "clients attached: $(grep -c 'agent: serving' "$dir/daemon.log") (99 idle, plus the measured one)"
row hundred-clients

one=$(awk '$1 == "one-client" { print $2 }' "$dir/one-client.tsv")
hundred=$(awk '$1 == "hundred-clients" { print $2 }' "$dir/hundred-clients.tsv")
ratio=$(awk -v a="$hundred" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
printf '# name\tmedian_us\none-client\t%s\nhundred-clients\t%s\nratio\t%s\n' "$one" "$hundred" \
	"$ratio" >"$out"
echo "per call: $one us with one client, $hundred us with 100: ${ratio}x (goal <= 1.2x)"

#!/bin/bash
# What the statistics cost: bench/engine built as configured and with COUNTERS=off (no counting
# at all), run in turns (A B A B ...) so that drift in the machine's load hits both alike; the
# figures are medians over the turns. Usage:
#   bench/counters.sh COUNTED_ENGINE UNCOUNTED_ENGINE OUT_TSV [TURNS [ENGINE_ARGS...]]
set -euo pipefail
counted=$1 uncounted=$2 out=$3 turns=${4:-3}
shift $(($# < 4 ? $# : 4))
dir=$(mktemp -d /tmp/semvisor-counters.XXXXXX)
trap 'rm -rf "$dir"' EXIT

for i in $(seq "$turns"); do
	"$counted" "$@" --out "$dir/on.$i" >/dev/null
	"$uncounted" "$@" --out "$dir/off.$i" >/dev/null
done

# median KEY PREFIX: the median over the turns of KEY in the files PREFIX.*
median() {
	awk -v k="$1" '$1 == k { print $2 }' "$dir/$2".* | sort -g |
		awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

{
	printf '# name\tcounted_ops_s\tuncounted_ops_s\tcost_pct\n'
	for k in ops_1t ops_2t; do
		a=$(median "$k" on) b=$(median "$k" off)
		awk -v k="$k" -v a="$a" -v b="$b" 'BEGIN { printf "%s\t%.0f\t%.0f\t%.1f\n", k, a, b, 100 * (1 - a / b) }'
	done
} >"$out"
echo "engine throughput with statistics counted and with COUNTERS=off, medians of $turns turns each:"
awk -F'\t' '!/^#/ { printf "  %-7s %12.0f ops/s counted, %12.0f ops/s uncounted: counting costs %5.1f%%\n", $1, $2, $3, $4 }' "$out"

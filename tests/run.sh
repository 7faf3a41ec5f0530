#!/bin/sh
# Run test binaries; fail if any fails. Each Criterion binary runs its tests in separate processes.
# Usage: O=build tests/run.sh build/tests/NN-name ...
# TEST_JOBS sets Criterion's parallelism (default 2, this machine's cores).
# The last line counts every test of every binary: "N passed, M failed" (a binary that ends
# without reporting its tests counts as one failed test).
set -u
fail=0
failed=""
npass=0
nfail=0
for t in "$@"; do
	name=$(basename "$t")
	start=$(date +%s)
	# A sanitizer report fails the run even where the test itself passed: Criterion only
	# prints what LeakSanitizer (and ASan/UBSan in forked helpers) finds.
	if "$t" --jobs "${TEST_JOBS:-2}" --short-filename >"${t}.log" 2>&1 &&
		! grep -qE 'SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer|runtime error:' "${t}.log"; then
		ok=1
		printf '%-40s ok   (%ss)  %s\n' "$name" "$(( $(date +%s) - start ))" \
			"$(grep -Eo 'Tested: [0-9]+' "${t}.log" | tail -n1)"
	else
		ok=0
		printf '%-40s FAIL (%ss)\n' "$name" "$(( $(date +%s) - start ))"
		sed 's/^/    /' "${t}.log" | tail -n 60
		fail=1
		failed="$failed $name"
	fi
	# "Synthesis: Tested: T | Passing: P | ...": T - P of them failed (crashes included)
	synth=$(grep -Eo 'Tested: [0-9]+ \| Passing: [0-9]+' "${t}.log" | tail -n1)
	if [ -n "$synth" ]; then
		tested=$(echo "$synth" | sed -E 's/Tested: ([0-9]+).*/\1/')
		passing=$(echo "$synth" | sed -E 's/.*Passing: ([0-9]+)/\1/')
		if [ "$ok" -eq 0 ] && [ "$tested" -eq "$passing" ]; then
			# every test passed, yet a sanitizer spoke: that binary's run failed
			passing=$((passing - 1))
		fi
		npass=$((npass + passing))
		nfail=$((nfail + tested - passing))
	else
		nfail=$((nfail + 1))
	fi
done
if [ "$fail" -ne 0 ]; then
	echo "FAILED:$failed"
fi
echo "$npass passed, $nfail failed"
exit "$fail"

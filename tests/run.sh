#!/bin/sh
# Run test binaries; fail if any fails. Each Criterion binary runs its tests in separate processes.
# Usage: O=build tests/run.sh build/tests/NN-name ...
# TEST_JOBS sets Criterion's parallelism (default 2, this machine's cores).
set -u
fail=0
failed=""
for t in "$@"; do
	name=$(basename "$t")
	start=$(date +%s)
	# A sanitizer report fails the run even where the test itself passed: Criterion only
	# prints what LeakSanitizer (and ASan/UBSan in forked helpers) finds.
	if "$t" --jobs "${TEST_JOBS:-2}" --short-filename >"${t}.log" 2>&1 &&
		! grep -qE 'SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer|runtime error:' "${t}.log"; then
		printf '%-40s ok   (%ss)  %s\n' "$name" "$(( $(date +%s) - start ))" \
			"$(grep -Eo 'Tested: [0-9]+' "${t}.log" | tail -n1)"
	else
		printf '%-40s FAIL (%ss)\n' "$name" "$(( $(date +%s) - start ))"
		sed 's/^/    /' "${t}.log" | tail -n 60
		fail=1
		failed="$failed $name"
	fi
done
if [ "$fail" -ne 0 ]; then
	echo "FAILED:$failed"
	exit 1
fi
echo "all test binaries passed"

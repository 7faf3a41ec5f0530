#!/bin/sh
# The demo behind `make run`. Usage: demo/run.sh BUILD_DIR
set -eu
O=${1:-build}

echo "== a multi-process semaphore program, natively (the kernel's semaphores) =="
"$O/demo/ring"
echo
echo "== the same program under semvisor-run (semvisor's semaphores) =="
"$O/semvisor-run" --stats -- "$O/demo/ring"
echo
echo "== the semaphore engine, called directly =="
"$O/demo/engine-demo"

#!/bin/sh
# The demo behind `make run`. Usage: demo/run.sh BUILD_DIR
set -eu
O=${1:-build}
echo "== the semaphore engine, called directly =="
"$O/demo/engine-demo"

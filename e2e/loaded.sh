#!/usr/bin/env bash
# Runs a command beside busy loops, as on a machine loaded by other work:
# some tests fail only there, when the relay's timers and the test's meet
# a late scheduler. `make test-loaded` runs `make test` so; or
#
#   bash e2e/loaded.sh go -C e2e test -race -count=5 -run TestName .
#
# LOADERS is the number of loops (default 2, one per core of a 2-core
# machine). The loops stop when the command ends, however it ends, and
# each also stops by itself once this script is gone (even killed with
# SIGKILL), so none is left spinning on a shared machine. The script exits
# with the command's status.
set -u
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
for _ in $(seq "${LOADERS:-2}"); do
  (while kill -0 $$ 2>/dev/null; do for _ in {1..20000}; do :; done; done) &
  pids+=("$!")
done
"$@"

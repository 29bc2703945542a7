#!/usr/bin/env bash
# Runs BACKGROUND at the lowest CPU priority (nice 19) beside FOREGROUND, waits for both, then
# prints BACKGROUND's output whole and its time. Exits with FOREGROUND's status, or BACKGROUND's
# where FOREGROUND passed. Usage: beside.sh BACKGROUND FOREGROUND (each one shell command line).
#
# make test runs its static checks and Rust tests this way beside the side-by-side Python tests:
# those mostly wait (on servers, child processes, sleeps), and the checks, pure CPU, fill the
# cores they leave idle. At nice 19 the checks get about 1.5% of a core that a test wants (the
# kernel's weights: 15 against 1024), so the tests run as fast as alone.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BACKGROUND FOREGROUND" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log" "$log.status"' EXIT
start=$(date +%s)
(nice -n 19 bash -c "$1" >"$log" 2>&1; echo $? >"$log.status") &
background=$!
# Ctrl-C or a kill of this script ends the background work too, not only the foreground: the
# whole process group (make's, which started this) is told to stop, as Ctrl-C tells it.
trap 'trap - INT TERM; rm -f "$log" "$log.status"; kill -TERM 0 2>/dev/null; exit 130' INT TERM
bash -c "$2"
foreground=$?
wait "$background"
seconds=$(($(date +%s) - start))
echo
echo "== beside the tests, niced: $1 =="
cat "$log"
status=$(cat "$log.status" 2>/dev/null || echo 1)
printf '== its time: %d min %02d s from the start of the tests; exit status %s ==\n' $((seconds / 60)) $((seconds % 60)) "$status"
[ "$foreground" -eq 0 ] || exit "$foreground"
exit "$status"

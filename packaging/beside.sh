#!/usr/bin/env bash
# Runs BACKGROUND at the lowest CPU priority (nice 19) beside FOREGROUND, waits for both, then
# prints BACKGROUND's output whole and its time. Exits with FOREGROUND's status, or BACKGROUND's
# where FOREGROUND passed. Usage: beside.sh BACKGROUND FOREGROUND (each one shell command line).
#
# make test runs its static checks and Rust tests this way beside the side-by-side Python tests:
# the checks fill whatever the tests leave idle (the part's tail, the checks' own single-threaded
# stretches overlap it). At nice 19 the checks get about 1.5% of a core that a test wants (the
# kernel's weights: 15 against 1024), so the tests run as fast as alone.
#
# Each command runs in a process group of its own (setsid), so that Ctrl-C or a TERM to this
# script stops both whole (pytest's workers, cargo's compilers), and nothing else: not the make
# that started it, nor the jobs it left running in the background. BACKGROUND is bounded
# (BESIDE_TIMEOUT seconds, default 2400): a stuck build ends the run, saying so, instead of
# waiting for CI's own limit.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BACKGROUND FOREGROUND" >&2; exit 2; }
scratch=$(mktemp -d) || { echo "beside.sh: cannot make a scratch folder (TMPDIR=${TMPDIR:-/tmp})" >&2; exit 1; }
trap 'rm -rf "$scratch"' EXIT
start=$(date +%s)
# `setsid` from a background job (not a group leader) makes the new group in place and execs:
# its pid is the group's id, and it ends with timeout's status (124: timed out). A new session
# is also a new scheduling group where the kernel groups by session (autogroup, on by default on
# desktop and many server kernels): a process's nice then weighs only inside its group, and the
# groups share the cores evenly. Measured so (a clean run here): the niced rustc took 62% of a
# core beside the tests. So the session's own group is set to nice 19 too (/proc/self/autogroup;
# left as it is where the kernel has none).
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec timeout --kill-after=30 "$1" nice -n 19 bash -c "$2"' \
    beside "${BESIDE_TIMEOUT:-2400}" "$1" >"$scratch/output" 2>&1 &
background=$!
setsid bash -c "$2" &
foreground=$!
stop() {
    trap - INT TERM
    kill -TERM -- "-$background" "-$foreground" 2>/dev/null
    wait
    exit 130
}
trap stop INT TERM
wait "$foreground"
foreground_status=$?
if [ -e "/proc/$background" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$background/status" 2>/dev/null; then  # not ended
    echo "== the tests are done; waiting for what runs beside them: $1 =="
fi
wait "$background"
status=$?
seconds=$(($(date +%s) - start))
echo
echo "== beside the tests, niced: $1 =="
cat "$scratch/output"
[ "$status" -ne 124 ] || echo "== stopped after ${BESIDE_TIMEOUT:-2400} s (BESIDE_TIMEOUT): it had not ended =="
printf '== its time: %d min %02d s from the start of the tests; exit status %s ==\n' $((seconds / 60)) $((seconds % 60)) "$status"
[ "$foreground_status" -eq 0 ] || exit "$foreground_status"
exit "$status"

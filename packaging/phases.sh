#!/usr/bin/env bash
# make test's phases, one after another, each timed: the times are printed at the end, also when a
# phase fails (the failing phase is the last one listed). Usage: phases.sh NAME COMMAND [NAME COMMAND]...
# Each COMMAND is one shell command line.
set -uo pipefail
names=()
seconds=()
summary() {
    local status=$?
    echo
    echo "== make test, phase by phase =="
    local total=0
    for index in "${!names[@]}"; do
        printf '   %-52s %4d min %02d s\n' "${names[$index]}" $((seconds[index] / 60)) $((seconds[index] % 60))
        total=$((total + seconds[index]))
    done
    printf '   %-52s %4d min %02d s\n' "total" $((total / 60)) $((total % 60))
    [ "$status" -eq 0 ] || echo "   (stopped: the last phase listed failed, exit status $status)"
}
trap summary EXIT
while [ $# -ge 2 ]; do
    name=$1 command=$2
    shift 2
    echo "== $name =="
    start=$(date +%s)
    bash -c "$command"
    status=$?
    names+=("$name")
    seconds+=($(($(date +%s) - start)))
    [ "$status" -eq 0 ] || exit "$status"
done

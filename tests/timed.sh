#!/usr/bin/env bash
# tests/timed.sh NAME COMMAND...: run COMMAND, append "NAME<TAB>seconds<TAB>exit status" to
# $PHASES (default _build/phases.tsv), and exit with COMMAND's status. `make test` times its
# phases with it and prints them with tests/phases.sh. Plain bash: it times the venv's creation.
name=$1; shift
file=${PHASES:-_build/phases.tsv}
mkdir -p "$(dirname "$file")"
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
awk -v n="$name" -v s="$start" -v e="$end" -v r="$status" \
  'BEGIN { printf "%s\t%.1f\t%d\n", n, e - s, r }' >> "$file"
exit "$status"

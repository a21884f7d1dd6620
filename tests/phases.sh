#!/usr/bin/env bash
# tests/phases.sh [FILE]: the table of phases that tests/timed.sh recorded, slowest marked.
file=${1:-${PHASES:-_build/phases.tsv}}
[ -s "$file" ] || { echo "no phases recorded in $file"; exit 0; }
awk -F '\t' '
  { name[NR] = $1; sec[NR] = $2; rc[NR] = $3; total += $2; if ($2 > max) { max = $2; slow = NR } }
  END {
    printf "\n%-34s %9s %7s\n", "phase", "seconds", "share"
    for (i = 1; i <= NR; i++)
      printf "%-34s %9.1f %6.1f%%%s%s\n", name[i], sec[i], 100 * sec[i] / (total ? total : 1),
             (rc[i] != 0 ? "  FAILED" : ""), (i == slow ? "  <- slowest" : "")
    printf "%-34s %9.1f   (%d min %02d s)\n", "total", total, total / 60, total % 60
  }' "$file"

#!/bin/bash
# One 1-s AF_UNIX run at each large fraction right after a 1-s run at the default, with a quiet
# minute between pairs so that free page reporting hands the previous pair's pages back to the
# host; then fraction 37 right after fraction 8, whose released pages the host still backs.
# Each pair is `measure pcp --fractions 0,F --repeats 1` (root; the sysctl is restored).
#
#   sudo tools/fill_after_default.sh OUT_POINTS.csv
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUT_POINTS.csv}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "pair,gap_s_before,percpu_pagelist_high_fraction,repeat,score,pcp_high_pages,c2c_ns,received_share" > "$out"
pair=0
run_pair() { # fractions gap
    pair=$((pair + 1))
    ./target/release/pcpmodel measure pcp --workload af-unix --fractions "$1" --repeats 1 --seconds 1 \
        --realtime --all-placements --no-progress --raw "$tmp" > /dev/null 2>&1
    grep -v '^#' "$tmp" | tail -n +2 | sed "s/^/$pair,$2,/" >> "$out"
}
for f in 74 37 18 8; do sleep 60; run_pair "0,$f" 60; done
run_pair "8" 0
run_pair "37" 0

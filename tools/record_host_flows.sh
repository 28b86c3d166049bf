#!/bin/bash
# Records the host flows of data/host/flows/ (root): four workloads, each at the kernel's default
# and at several vm.percpu_pagelist_high_fraction settings, with `pcpmodel record`.
#
#   sudo tools/record_host_flows.sh [OUTDIR] [FRACTIONS...]
#
# The sysctl is set before each recording (so the flow's pagesets and meta carry the setting)
# and put back to its original value on every exit path (trap), as `measure pcp` does for its own.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PCPMODEL:-$here/target/release/pcpmodel}
out=${1:-$here/data/host/flows}
shift || true
if [ $# -gt 0 ]; then fractions=("$@"); else fractions=(0 8 100 1000 4000); fi
seconds=${SECONDS_PER_FLOW:-3}
# WORKLOADS picks some of the four; SKB_DEFER_MAX is handed to the socket loops' `measure pcp`
# (which sets net.core.skb_defer_max for the run and restores it).
workloads=${WORKLOADS:-"netperf-udp af-unix page-fault compile"}
defer_args=()
suffix=""
if [ -n "${SKB_DEFER_MAX:-}" ]; then
  defer_args=(--skb-defer-max "$SKB_DEFER_MAX")
  suffix="-defer$SKB_DEFER_MAX"
fi
# Per-CPU ring buffer, KiB: large enough to hold a whole recording, so that no event is lost
# while the reader (text from trace_pipe) falls behind a page-fault loop on both CPUs.
buffer_kb=${BUFFER_KB:-393216}
# DRAIN_FIRST=1 empties every CPU's lists right before each recording (`record --drain-first`),
# so that every setting starts from the same state whatever ran before it.
drain_args=()
if [ -n "${DRAIN_FIRST:-}" ]; then drain_args=(--drain-first); fi
sysctl_file=/proc/sys/vm/percpu_pagelist_high_fraction
orig=$(cat "$sysctl_file")
restore() { echo "$orig" > "$sysctl_file"; }
trap restore EXIT INT TERM

# A parallel compile: a generated C project built with make -j2 (the same sources every time).
src=$(mktemp -d)
trap 'restore; rm -rf "$src"' EXIT INT TERM
for i in $(seq 1 24); do
  {
    echo "#include <stdio.h>"
    for j in $(seq 1 150); do
      echo "static int f${j}(int x){int s=0;for(int k=0;k<x;k++){s+=k*${j}^(s>>3);} return s;}"
    done
    echo "int run${i}(int x){return 0"
    for j in $(seq 1 150); do echo "+f${j}(x)"; done
    echo ";}"
  } > "$src/u$i.c"
done
objs=$(for i in $(seq 1 24); do printf 'u%d.o ' "$i"; done)
printf 'all: %s\n%%.o: %%.c\n\tgcc -O2 -c $< -o $@\n' "$objs" > "$src/Makefile"

for f in "${fractions[@]}"; do
  echo "$f" > "$sysctl_file"
  for w in $workloads; do
    if [ "$w" = compile ]; then
      make -s -C "$src" clean > /dev/null 2>&1 || true
      rm -f "$src"/*.o
      "$bin" record --quiet "${drain_args[@]}" --buffer-kb "$buffer_kb" -o "$out/compile-f$f.flow.gz" -- make -s -j2 -C "$src" > /dev/null
      continue
    fi
    extra=()
    if [ "$w" != page-fault ]; then extra=("${defer_args[@]}"); fi
    "$bin" record --quiet "${drain_args[@]}" --buffer-kb "$buffer_kb" -o "$out/$w$suffix-f$f.flow.gz" -- \
      "$bin" measure pcp --workload "$w" --fractions "$f" --repeats 1 --seconds "$seconds" --quiet \
      "${extra[@]}" > /dev/null
  done
  echo "fraction $f recorded" >&2
done

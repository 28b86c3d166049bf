#!/bin/bash
# The distinct order-3 blocks the UDP loop allocates in 2 s at one vm.percpu_pagelist_high_fraction
# (root): mm_page_alloc filtered to order 3 through tracefs, its pfns counted. The data the
# loop's pages occupy, which the caches must hold for a reused page to be found there.
#
#   sudo tools/udp_footprint.sh FRACTION
#
# tracefs is mounted if needed and unmounted again; the event, its filter, tracing_on and the
# buffer size are put back on every exit path (`measure pcp` restores the sysctl itself).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PCPMODEL:-$here/target/release/pcpmodel}
T=/sys/kernel/tracing
mounted=0
if ! mountpoint -q "$T"; then mount -t tracefs nodev "$T"; mounted=1; fi
ev=$T/events/kmem/mm_page_alloc
orig_kb=$(cat "$T/buffer_size_kb")
orig_on=$(cat "$T/tracing_on")
restore() {
  echo 0 > "$T/tracing_on"
  echo 0 > "$ev/enable"
  echo 0 > "$ev/filter"
  echo > "$T/trace"
  echo "$orig_kb" > "$T/buffer_size_kb"
  echo "$orig_on" > "$T/tracing_on"
  if [ "$mounted" = 1 ]; then umount "$T"; fi
}
trap restore EXIT INT TERM
echo 0 > "$T/tracing_on"
echo > "$T/trace"
echo 100000 > "$T/buffer_size_kb"
echo 'order == 3' > "$ev/filter"
echo 1 > "$ev/enable"
echo 1 > "$T/tracing_on"
"$bin" measure pcp --workload netperf-udp --fractions "$1" --repeats 1 --seconds 2 --quiet > /dev/null
echo 0 > "$T/tracing_on"
grep -o "pfn=0x[0-9a-f]*" "$T/trace" | sort | uniq -c \
  | awk -v f="$1" '{n++; t+=$1} END{printf "fraction %s: %d order-3 allocations of %d distinct blocks (%.0f MiB)\n", f, t, n, n*32/1024}'

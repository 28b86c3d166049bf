#!/bin/bash
# Whether the hypervisor's free page reporting decides a UDP sweep's large highs (root).
#
#   sudo [WORKLOAD=af-unix] tools/page_reporting_ab.sh [FRACTIONS...]     (default: 8 108 27)
#
# On a VM with free page reporting (virtio-balloon, /sys/module/page_reporting) the guest hands
# free buddy blocks of page_reporting_order and up to the host, which drops them; the next touch
# of such a page faults in the host. A large pcp->high spreads the loop's pages over hundreds of
# MiB of buddy blocks, many of them reported. This runs the UDP loop (skb_defer_max 0, 3 s) at
# each fraction with reporting as it is, then stops reporting (page_reporting_order above the
# largest buddy order), touches 18 GiB of free memory once so the host backs it again, and runs
# the loop again. page_reporting_order is put back on every exit path. WORKLOAD picks the
# loop (default netperf-udp, run with skb_defer_max 0; af-unix runs the AF_UNIX pair).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PCPMODEL:-$here/target/release/pcpmodel}
P=/sys/module/page_reporting/parameters/page_reporting_order
[ -w "$P" ] || { echo "no writable $P: this kernel has no free page reporting to switch" >&2; exit 2; }
if [ $# -gt 0 ]; then fractions=("$@"); else fractions=(8 108 27); fi
orig=$(cat "$P")
restore() { echo "$orig" > "$P"; echo "page_reporting_order back at $(cat "$P")"; }
trap restore EXIT INT TERM
workload=${WORKLOAD:-netperf-udp}
defer=()
[ "$workload" = netperf-udp ] && defer=(--skb-defer-max 0)
score() {
  "$bin" measure pcp --workload "$workload" "${defer[@]}" --fractions "$1" --repeats 1 \
    --seconds 3 --quiet --format json 2>/dev/null \
    | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["points"][0]["score"]))'
}
unit="Mbit/s"
[ "$workload" = af-unix ] && unit="MB/s"
run_all() {
  for f in "${fractions[@]}"; do printf '  fraction %s: %s %s\n' "$f" "$(score "$f")" "$unit"; done
}
echo "$workload; free page reporting on (page_reporting_order $orig):"
run_all
echo 11 > "$P"
echo "reporting off (page_reporting_order $(cat "$P")); touching 18 GiB of free memory once:"
python3 "$here/tools/fresh_touch.py" 18000 1 0 | sed -n 1p
echo "reporting off, free memory backed:"
run_all

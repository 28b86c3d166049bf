#!/bin/bash
# AF_UNIX at the default and at fraction 74 in 8-s runs with free page reporting off (root):
# page_reporting_order above the largest buddy order, 18 GiB of free memory touched once so the
# host backs it, then `measure pcp`. page_reporting_order is put back on every exit path.
#
#   sudo tools/af_unix_reporting_off.sh > out.txt
set -euo pipefail
cd "$(dirname "$0")/.."
P=/sys/module/page_reporting/parameters/page_reporting_order
orig=$(cat $P)
trap 'echo $orig > $P; echo "page_reporting_order back at $(cat $P)"' EXIT INT TERM
echo 11 > $P
python3 tools/fresh_touch.py 18000 1 0 | sed -n 1p
./target/release/pcpmodel measure pcp --workload af-unix --fractions 0,74 --repeats 6 --seconds 8 --realtime --out /tmp/af-8s-repoff.csv

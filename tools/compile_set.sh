#!/bin/sh
# The compiles behind data/host/trace-compile-runs-2026-12-03-*.json: gcc -O2 of the C files this
# development VM has with their headers (CPython 3.11's for the two extension modules), one after
# another as make -j1 would, for the kbuild workloads' params.life_free_share and
# alloc_run_pages. Two files do not compile here (missing headers); their cc1 still runs and
# allocates, and is counted like the others. Run under the trace:
#   sudo python3 tools/trace_pcp_flow.py --runs --json -- sh tools/compile_set.sh
I=/root/.pyenv/versions/3.11.7/include/python3.11
S=/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages
for f in $S/wrapt/_wrappers.c $S/lazy_object_proxy/cext.c /usr/share/doc/libpng-dev/examples/pngtest.c \
         /usr/share/doc/zlib1g-dev/examples/gun.c /usr/share/doc/zlib1g-dev/examples/gzlog.c \
         /usr/share/doc/zlib1g-dev/examples/infcover.c /usr/share/doc/nettle-dev/examples/hogweed-benchmark.c; do
  gcc -O2 -pipe -fPIC -w -c "$f" -o /tmp/compile_set.o -I"$I" 2>/dev/null || echo "did not compile: $f" >&2
done
rm -f /tmp/compile_set.o

#!/usr/bin/env python3
"""Pages a compile allocates per CPU-second: a cross-check of the kbuild workload's op.work.

Compiles the given C files one after another (gcc -O2 -pipe -c, as make -j1 would), and reads
the system-wide page allocation counters (/proc/vmstat pgalloc_*) before and after, with the
compiles' CPU time from getrusage(RUSAGE_CHILDREN). Every process of a compile is counted
(driver, cc1, as, the page cache of its output); run it on an otherwise idle machine, since the
counters are system-wide.

  python3 tools/compile_churn.py -I /usr/include/python3.11 file1.c file2.c ...

Prints CPU seconds, pages allocated and CPU ns per page. Used at stop 23 (models/workloads/
kbuild.toml): on a 2-vCPU KVM guest, 37-63 us per page for two small C files with CPython's
headers, 101-135 us for four 0.1-0.8 MB Cython-generated files (two runs each). Python 3.8+ standard library only.
"""

import argparse
import resource
import subprocess
import sys


def vmstat():
    with open("/proc/vmstat") as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-I", dest="inc", action="append", default=[], help="include directory")
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    r0, v0 = resource.getrusage(resource.RUSAGE_CHILDREN), vmstat()
    for f in a.files:
        cmd = [a.cc, "-O2", "-pipe", "-fPIC", "-c", f, "-o", "/dev/null"] + ["-I" + i for i in a.inc]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
            print(f"compile failed (a failed compile's pages and CPU would skew the figure): {' '.join(cmd)}", file=sys.stderr)
            return 1
    r1, v1 = resource.getrusage(resource.RUSAGE_CHILDREN), vmstat()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    pages = sum(v1[k] - v0.get(k, 0) for k in v1 if k.startswith("pgalloc_"))
    if pages <= 0:
        print("no pages allocated (is /proc/vmstat readable?)", file=sys.stderr)
        return 1
    print(f"files {len(a.files)}  cpu {cpu:.2f} s  pages allocated {pages}  cpu per page {cpu / pages * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

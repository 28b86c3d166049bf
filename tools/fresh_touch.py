#!/usr/bin/env python3
"""What a page the guest has not touched for a while costs on first touch, against one freed
just before: on a VM with free page reporting (virtio-balloon; `page_reporting` in
/sys/module) the guest hands free buddy blocks back to the hypervisor, which drops them, and
the next touch of such a page faults in the host.

Maps and writes one byte per 4 KiB page of an anonymous region (the kernel allocates and
zeroes each page on its fault) N times in a row, then again after an idle pause. The first
pass and the pass after the pause take pages the host may have dropped; the passes in between
reuse the pages the previous pass just freed. No root needed; nothing is changed.

    tools/fresh_touch.py [MIB] [PASSES] [PAUSE_S]
"""
import mmap
import sys
import time

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 4
pause = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
REPORTED = "/sys/module/page_reporting/parameters/reported_kib"


def reported():
    try:
        return int(open(REPORTED).read())
    except OSError:
        return None


def touch(n_mib):
    m = mmap.mmap(-1, n_mib << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    t = time.perf_counter()
    for off in range(0, n_mib << 20, 4096):
        m[off] = 1
    dt = time.perf_counter() - t
    m.close()
    return dt * 1e9 / ((n_mib << 20) // 4096)


r0 = reported()
for i in range(passes):
    print(f"pass {i}: {touch(mib):.0f} ns per 4 KiB page (fault, zeroing, first write)")
    time.sleep(0.2)
time.sleep(pause)
print(f"after {pause:g} s idle: {touch(mib):.0f} ns per 4 KiB page")
r1 = reported()
if r0 is not None and r1 is not None:
    print(f"free page reporting: {(r1 - r0) >> 10} MiB reported meanwhile ({REPORTED})")
else:
    print("no free page reporting counter on this kernel")

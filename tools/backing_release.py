#!/usr/bin/env python3
"""How long memory the guest releases stays backed by the host on a VM with free page reporting.

For each delay D: populate MIB MiB of anonymous memory in one call (MAP_POPULATE), release it,
wait D seconds, populate it again, and print both costs per 4 KiB page with the MiB the guest
reported to the host meanwhile. A second pass that costs what the first did after a release
means the host dropped the released pages within D. No root needed; nothing is changed.

    tools/backing_release.py MIB DELAY_S [DELAY_S ...]
"""
import ctypes
import sys
import time

libc=ctypes.CDLL(None, use_errno=True)
libc.mmap.restype=ctypes.c_void_p
libc.mmap.argtypes=[ctypes.c_void_p,ctypes.c_size_t,ctypes.c_int,ctypes.c_int,ctypes.c_int,ctypes.c_long]
libc.munmap.argtypes=[ctypes.c_void_p,ctypes.c_size_t]
MB=int(sys.argv[1])
n=MB<<20
def pop():
    t=time.perf_counter(); p=libc.mmap(None,n,3,0x22|0x8000,-1,0); dt=time.perf_counter()-t
    return p, dt*1e9/(n/4096)
R='/sys/module/page_reporting/parameters/reported_kib'
rep=lambda: int(open(R).read())//1024
for d in [float(x) for x in sys.argv[2:]]:
    p,a=pop(); libc.munmap(p,n); r0=rep(); time.sleep(d); r1=rep()
    p,b=pop(); libc.munmap(p,n)
    print(f"delay {d:5.1f} s: first {a:6.0f} ns/page, again {b:6.0f} ns/page; reported meanwhile {r1-r0} MiB", flush=True)

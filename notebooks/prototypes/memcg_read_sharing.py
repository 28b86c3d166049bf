#!/usr/bin/env python3
"""Prototype, not part of the model: thread 001 with reads that share transfers.

The validate notes of thread 001 cite this. It is a discrete-event simulation of the memcg
counter lines as the model sees them (src/model/memcg.rs, src/model/lines.rs): 72 CPUs in 36
cores, each CPU alternating an exponential think (the fixed work) and a hierarchy walk whose
transfers it makes in program order; each line a FCFS queue of exponential transfers; a CPU
whose SMT sibling is queued at the line joins it (as in the model). On top of that, a read
(a run of plain loads) that arrives while the last request queued at the line is also a read
joins it and is served by the same transfer (reads need no exclusive ownership); locked RMWs
always queue alone.

The walks are thread 001's 6.0-rc1 transfers (and those of patches A, B, A+B) as
`counter_lines()`/`walk_visits()` derive them, written out by hand here, with the walk rate of
the model (0.0649 walks per payload page per CPU at batch 32, halved at 64) and the fixed work of
the root-memcg run (1510.4 ns per payload page). Run: python3 memcg_read_sharing.py [S_ns ...]
(S = one transfer, ns; 275 fits 6.0-rc1 at batch 32). About a minute per value of S.
"""
import heapq
import random
import sys
from collections import deque

W, R = 1, 0
# Lines: 0 level-3 usage, 1 level-2 usage, 2 level-1 usage, 3 level-1 protection counters,
# 4 root usage, 5 stats_flush_threshold.


def level(u, prot, charge, root=False, a=False, b=False):
    """Counted transfers (line, read/write) of one level of a walk, in program order."""
    s = []
    if b:
        s.append((u, W))
        if prot is not None and not a:
            s += [(prot, W), (prot, W)]
            if charge:
                s.append((prot, R))
        return s
    s.append((u, W))
    if charge:
        s.append((u, R))
        if prot is not None and not a:
            s += [(prot, R), (prot, W), (prot, W), (prot, R)]
    else:
        if prot is not None and not a:
            s += [(prot, R), (u, R), (prot, W), (prot, W), (prot, R)]
        elif not root:
            s.append((u, R))
    return s


def walks(a=False, b=False):
    ch = (level(0, None, True, a=a, b=b) + level(1, None, True, a=a, b=b)
          + level(2, 3, True, a=a, b=b) + level(4, None, True, root=True, a=a, b=b))
    ch += [(0, R), (1, R), (2, R), (4, R), (5, W)]  # memory.high loop, then the flush
    un = (level(0, None, False, a=a, b=b) + level(1, None, False, a=a, b=b)
          + level(2, 3, False, a=a, b=b) + level(4, None, False, root=True, a=a, b=b) + [(5, W)])
    return ch, un


def simulate(ch, un, think, s_ns, read_share=True, t_end=1.5e8, seed=1):
    n, lines = 72, 6
    rnd = random.Random(seed)
    queue = [deque() for _ in range(lines)]
    busy = [None] * lines
    ev = []
    pos = [0] * n
    seq = [ch if i % 2 == 0 else un for i in range(n)]
    done = 0

    def core(c):
        return c % (n // 2)

    def arrive(c, now):
        line, rw = seq[c][pos[c]]
        if busy[line] is not None and core(busy[line][1][0]) == core(c):
            busy[line][1].append(c)
            return
        for g in queue[line]:
            if core(g[1][0]) == core(c):
                g[1].append(c)
                return
        if read_share and rw == R and queue[line] and queue[line][-1][0] == R:
            queue[line][-1][1].append(c)
            return
        if busy[line] is None:
            busy[line] = (rw, [c])
            heapq.heappush(ev, (now + rnd.expovariate(1 / s_ns), 1, line))
        else:
            queue[line].append((rw, [c]))

    for c in range(n):
        heapq.heappush(ev, (rnd.expovariate(1 / think), 0, c))
    while ev:
        now, kind, x = heapq.heappop(ev)
        if now > t_end:
            break
        if kind == 0:
            pos[x] = 0
            arrive(x, now)
            continue
        group = busy[x]
        busy[x] = None
        if queue[x]:
            busy[x] = queue[x].popleft()
            heapq.heappush(ev, (now + rnd.expovariate(1 / s_ns), 1, x))
        for c in group[1]:
            pos[c] += 1
            if pos[c] >= len(seq[c]):
                done += 1
                heapq.heappush(ev, (now + rnd.expovariate(1 / think), 0, c))
            else:
                arrive(c, now)
    return n * t_end / done  # ns per walk per CPU


FIXED_NS = 1510.4
WALKS_32 = 0.0649
MEASURED = {"rc1@32": 10482.7, "rc1@64": 17064.7, "A@32": 14542.5, "B@32": 12413.7, "A+B@64": 20120.3}


def throughput(a, b, batch, s_ns, read_share=True):
    w = WALKS_32 * 32 / batch
    ch, un = walks(a, b)
    ns_per_walk = simulate(ch, un, FIXED_NS / w, s_ns, read_share)
    return 4096 * 8 / (ns_per_walk * w) * 1e3  # Mbit/s


if __name__ == "__main__":
    for s in [float(v) for v in sys.argv[1:]] or [275.0]:
        got = {
            "rc1@32": throughput(False, False, 32, s),
            "rc1@64": throughput(False, False, 64, s),
            "A@32": throughput(True, False, 32, s),
            "B@32": throughput(False, True, 32, s),
            "A+B@64": throughput(True, True, 64, s),
        }
        gain = 100 * (got["rc1@64"] / got["rc1@32"] - 1)
        print(f"S = {s:.0f} ns: gain 32 -> 64 {gain:+.1f} % (measured +62.8 %)")
        for k, v in got.items():
            print(f"  {k:7s} {v:8.0f} Mbit/s  measured {MEASURED[k]:8.1f}  {100 * (v / MEASURED[k] - 1):+.1f} %")

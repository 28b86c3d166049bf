#!/usr/bin/env python3
"""Trace the page allocator under an AF_UNIX stream pair (lmbench bw_unix's flow) or a UDP stream on this host.

Builds a small bw_unix-like program (a socketpair, the writer write()s --write-bytes at a time,
the reader read()s; writer and reader pinned to --writer-cpu / --reader-cpu), runs it for
--seconds with the kmem tracepoints mm_page_alloc, mm_page_free, mm_page_pcpu_drain and
mm_page_alloc_zone_locked on, and prints per CPU: allocations and frees by order, refills
(blocks taken under zone->lock with percpu_refill=1, grouped into calls) and drains
(mm_page_pcpu_drain runs, grouped into free_pcppages_bulk() calls), with pages per call.

Needs root and tracefs. Every tracefs setting it changes (tracing_on, buffer_size_kb, the
four events' enable, a tracefs mount it made) and vm.percpu_pagelist_high_fraction (with
--high-fraction) is restored on every exit path, including Ctrl-C and SIGTERM. Used for the lmbench-af-unix workload's af_unix_write_bytes provenance
(kernel 6.18: one page each of orders 3, 2, 1, 0 per 64 KiB write).

  sudo python3 tools/trace_pcp_flow.py [--seconds 0.3] [--write-bytes 65536] [--json]
  sudo python3 tools/trace_pcp_flow.py --udp --skb-defer-max 0 --json   # a 64 KiB UDP loopback stream
  sudo python3 tools/trace_pcp_flow.py -- gcc -O2 -c f.c      # any command instead
  sudo python3 tools/trace_pcp_flow.py --runs --json -- make -j2  # with alloc/free runs per CPU and task
"""
import argparse, collections, json, os, re, signal, subprocess, sys, tempfile

T = "/sys/kernel/tracing"
SYSCTL = "/proc/sys/vm/percpu_pagelist_high_fraction"
EVENTS = ["mm_page_alloc", "mm_page_free", "mm_page_pcpu_drain", "mm_page_alloc_zone_locked"]
BW_C = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void pin(int cpu) { if (cpu < 0) return; cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(1); } }
int main(int argc, char **argv) {
  double secs = atof(argv[1]); int wcpu = atoi(argv[2]), rcpu = atoi(argv[3]);
  size_t xfer = (size_t)atol(argv[4]); int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("socketpair"); return 1; }
  char *buf = malloc(xfer); memset(buf, 1, xfer);
  pid_t pid = fork();
  if (pid == 0) { pin(rcpu); close(sv[0]); while (read(sv[1], buf, xfer) > 0) {} return 0; }
  pin(wcpu); close(sv[1]);
  struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0); long long tot = 0, writes = 0;
  for (;;) { ssize_t n = write(sv[0], buf, xfer); if (n <= 0) break; tot += n; writes++;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) + 1e-9 * (t.tv_nsec - t0.tv_nsec) > secs) break; }
  close(sv[0]); wait(NULL);
  printf("%lld %lld\n", writes, tot); return 0; }
"""


UDP_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void pin(int cpu) { if (cpu < 0) return; cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(1); } }
int main(int argc, char **argv) {
  double secs = atof(argv[1]); int wcpu = atoi(argv[2]), rcpu = atoi(argv[3]);
  size_t xfer = (size_t)atol(argv[4]); if (xfer > 65507) xfer = 65507;
  int rs = socket(AF_INET, SOCK_DGRAM, 0), ss = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); a.sin_port = 0;
  if (bind(rs, (struct sockaddr *)&a, sizeof a)) { perror("bind"); return 1; }
  socklen_t al = sizeof a; getsockname(rs, (struct sockaddr *)&a, &al);
  char *buf = malloc(65536); memset(buf, 1, 65536);
  pid_t pid = fork();
  if (pid == 0) { pin(rcpu); close(ss); long long got = 0;
    while (recv(rs, buf, 65536, 0) > 0) got++; return 0; }
  pin(wcpu); close(rs);
  struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0); long long tot = 0, writes = 0;
  for (;;) { ssize_t n = sendto(ss, buf, xfer, 0, (struct sockaddr *)&a, sizeof a);
    if (n > 0) { tot += n; writes++; }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) + 1e-9 * (t.tv_nsec - t0.tv_nsec) > secs) break; }
  close(ss); kill(pid, SIGKILL); wait(NULL);
  printf("%lld %lld\n", writes, tot); return 0; }
"""
DEFER = "/proc/sys/net/core/skb_defer_max"


def rd(p):
    with open(os.path.join(T, p)) as f:
        return f.read().strip()


def wr(p, v):
    with open(os.path.join(T, p), "w") as f:
        f.write(str(v))


def pagesets():
    """Per zone and CPU: the pageset fields /proc/zoneinfo prints, and the zone's managed pages."""
    out, zone, cpu = {}, None, None
    with open("/proc/zoneinfo") as f:
        for line in f:
            t = line.split()
            if line.startswith("Node"):
                zone, cpu = f"{t[1].rstrip(',')}/{t[3]}", None
                out[zone] = {"cpus": {}}
            elif t and t[0] == "managed" and zone:
                out[zone]["managed"] = int(t[1])
            elif t[:1] == ["cpu:"] and zone:
                cpu = t[1]
                out[zone]["cpus"][cpu] = {}
            elif cpu is not None and len(t) == 2 and t[0].rstrip(":") in ("count", "high", "batch", "high_min", "high_max"):
                out[zone]["cpus"][cpu][t[0].rstrip(":")] = int(t[1])
    return {z: v for z, v in out.items() if v.get("managed")}


def calls_timed(seq, is_member):
    """(pages, blocks, seconds from the first block's event to the last) per call."""
    out, n, b, t0, t1 = [], 0, 0, 0.0, 0.0
    for e in seq:
        if is_member(e):
            if not b:
                t0 = e[3]
            n += 1 << e[1]
            b += 1
            t1 = e[3]
        elif n:
            out.append((n, b, t1 - t0))
            n, b = 0, 0
    if n:
        out.append((n, b, t1 - t0))
    return out


def ns_per_block(timed):
    """Mean time between two consecutive blocks' events inside a call, ns, over all calls of 2
    blocks or more (the trace prints microseconds; summed over many calls the rounding
    averages out): the hold's cost per block under zone->lock plus one tracepoint's own cost."""
    gaps = sum(b - 1 for _, b, _ in timed if b >= 2)
    return 1e9 * sum(t for _, b, t in timed if b >= 2) / gaps if gaps else None


def runs_of(flags):
    """Lengths of the runs of equal values in a sequence of booleans: (value, length) pairs."""
    out = []
    for f in flags:
        if out and out[-1][0] == f:
            out[-1][1] += 1
        else:
            out.append([f, 1])
    return [(f, n) for f, n in out]


def run_stats(runs, v):
    """Summary of the runs of value `v` in (value, length) pairs: pages, count, mean length, the
    page-weighted mean (the run the average page is in), the longest, and the pages in runs of at
    least 63 (a batch) and 2016 (batch << 5)."""
    ls = [n for f, n in runs if f == v]
    pages = sum(ls)
    return {"pages": pages, "runs": len(ls), "mean_run_pages": pages / len(ls) if ls else 0.0,
            "weighted_run_pages": sum(n * n for n in ls) / pages if pages else 0.0,
            "max_run_pages": max(ls) if ls else 0,
            "pages_in_runs_ge_63": sum(n for n in ls if n >= 63),
            "pages_in_runs_ge_2016": sum(n for n in ls if n >= 2016)}


def order0_runs(flags):
    """Order-0 allocation (True) and free (False) runs of one CPU: what alloc_factor and
    free_count see, since a free halves alloc_factor and an allocation halves free_count."""
    r = runs_of(flags)
    return {"alloc": run_stats(r, True), "free": run_stats(r, False)}


def page_runs(seq):
    """Runs of allocations and of frees of any order on one CPU, in base pages (a block of order
    o counts 2^o). A CPU that frees what it allocates (deferred skb freeing) shows its frees'
    bursts."""
    runs = []
    for ev, order, _refill, _ts in seq:
        if ev not in ("mm_page_alloc", "mm_page_free"):
            continue
        a, pages = ev == "mm_page_alloc", 1 << order
        if runs and runs[-1][0] == a:
            runs[-1][1] += pages
        else:
            runs.append([a, pages])
    return {"alloc": run_stats(runs, True), "free": run_stats(runs, False)}


def task_lives(tasks):
    """Per task (comm, pid) with order-0 traffic: pages allocated, freed, and freed in its last
    run of frees (at exit for a task that exits during the trace); summed over tasks by comm."""
    by_comm = collections.defaultdict(lambda: collections.Counter())
    for (comm, _pid), flags in tasks.items():
        r = runs_of(flags)
        last_free = r[-1][1] if r and not r[-1][0] else 0
        c = by_comm[comm]
        c["tasks"] += 1
        c["alloc"] += sum(flags)
        c["free"] += len(flags) - sum(flags)
        c["free_last_run"] += last_free
        c["alloc_runs"] += sum(1 for f, _ in r if f)
        c["free_runs"] += sum(1 for f, _ in r if not f)
        # Sums of squared run lengths: over the sums of lengths they give the page-weighted mean
        # run (the run the average page is in, which is what a list of limited size sees).
        c["alloc_run_sq"] += sum(n * n for f, n in r if f)
        life = r[:-1] if r and not r[-1][0] else r
        c["life_free"] += sum(n for f, n in life if not f)
        c["life_free_run_sq"] += sum(n * n for f, n in life if not f)
    out = {}
    for k, v in sorted(by_comm.items(), key=lambda kv: -kv[1]["alloc"]):
        d = dict(v)
        d["alloc_run_pages_weighted"] = v["alloc_run_sq"] / v["alloc"] if v["alloc"] else 0.0
        d["life_free_run_pages_weighted"] = v["life_free_run_sq"] / v["life_free"] if v["life_free"] else 0.0
        out[k] = d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="run time (default 0.3 s)")
    ap.add_argument("--write-bytes", type=int, default=65536, help="bytes per write (default 65536, lmbench's XFERSIZE)")
    ap.add_argument("--writer-cpu", type=int, default=0)
    ap.add_argument("--reader-cpu", type=int, default=1)
    ap.add_argument("--buffer-kb", type=int, default=200000, help="trace buffer per CPU (default 200000 KiB)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("--high-fraction", type=int, default=None,
                    help="set vm.percpu_pagelist_high_fraction to this (0, or 8 and up) for the run and restore it "
                         "after, on every exit path: a large value makes pcp->high small and fixed (4 x batch at least), "
                         "as on a server with many CPUs per zone")
    ap.add_argument("--udp", action="store_true",
                    help="a UDP loopback stream instead of the AF_UNIX pair: the sender (--writer-cpu) sends "
                         "datagrams of --write-bytes (at most 65507) to a receiver (--reader-cpu); 'writes' count sends")
    ap.add_argument("--skb-defer-max", type=int, default=None,
                    help="set net.core.skb_defer_max to this for the run and restore it after, on every exit path: "
                         "0 makes the receiving CPU free every skb itself instead of handing it back to the CPU "
                         "that allocated it (skb_attempt_defer_free())")
    ap.add_argument("--runs", action="store_true",
                    help="also report order-0 allocation and free runs per CPU and per task (a process's "
                         "pages freed during its life and in its last run, its exit)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER,
                    help="after --: trace this command instead of the AF_UNIX pair (e.g. -- gcc -O2 -c f.c)")
    a = ap.parse_args()
    if not (0 < a.seconds <= 60 and 0 < a.write_bytes <= 1 << 30):
        sys.exit("--seconds must be in (0, 60] and --write-bytes in (0, 1 GiB]")
    if a.high_fraction is not None and not (a.high_fraction == 0 or 8 <= a.high_fraction <= 2**31 - 1):
        sys.exit("--high-fraction must be 0 or 8..2^31-1 (the kernel refuses 1-7)")
    if a.skb_defer_max is not None and not (0 <= a.skb_defer_max <= 2**31 - 1):
        sys.exit("--skb-defer-max must be 0..2^31-1")
    if a.skb_defer_max is not None and not os.path.exists(DEFER):
        sys.exit(f"--skb-defer-max: {DEFER} does not exist on this kernel (no deferred skb freeing before 5.19)")
    if os.geteuid() != 0:
        sys.exit("needs root (tracefs)")
    tmp = tempfile.mkdtemp(prefix="pcp-trace-")
    src, exe = os.path.join(tmp, "bw.c"), os.path.join(tmp, "bw")
    with open(src, "w") as f:
        f.write(UDP_C if a.udp else BW_C)
    subprocess.run(["gcc", "-O2", "-o", exe, src], check=True)

    mounted = False
    if not os.path.exists(os.path.join(T, "trace")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", T], check=True)
        mounted = True
    saved = {"tracing_on": rd("tracing_on"), "buffer_size_kb": rd("buffer_size_kb").split()[0]}
    with open(SYSCTL) as f:
        saved_fraction = f.read().strip()
    saved_ev = {e: rd(f"events/kmem/{e}/enable") for e in EVENTS}
    saved_defer = None
    if os.path.exists(DEFER):
        with open(DEFER) as f:
            saved_defer = f.read().strip()

    def on_signal(signum, _frame):
        raise SystemExit(f"interrupted by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    text, out = "", ""
    try:
        if a.high_fraction is not None:
            with open(SYSCTL, "w") as f:
                f.write(str(a.high_fraction))
        if a.skb_defer_max is not None:
            with open(DEFER, "w") as f:
                f.write(str(a.skb_defer_max))
        wr("tracing_on", 0)
        wr("buffer_size_kb", a.buffer_kb)
        wr("trace", "")
        for e in EVENTS:
            wr(f"events/kmem/{e}/enable", 1)
        before = pagesets()
        wr("tracing_on", 1)
        cmd = [c for c in a.cmd if c != "--"]
        if cmd:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            out = "0 0"
        else:
            out = subprocess.run([exe, str(a.seconds), str(a.writer_cpu), str(a.reader_cpu), str(a.write_bytes)],
                                 capture_output=True, text=True, check=True).stdout
        wr("tracing_on", 0)
        after = pagesets()
        overrun = {}
        for c in range(os.cpu_count()):
            m = re.search(r"overrun: (\d+)", rd(f"per_cpu/cpu{c}/stats"))
            overrun[c] = int(m.group(1)) if m else None
        with open(os.path.join(T, "trace")) as f:
            text = f.read()
    finally:
        with open(SYSCTL, "w") as f:
            f.write(saved_fraction)
        if saved_defer is not None:
            with open(DEFER, "w") as f:
                f.write(saved_defer)
        wr("tracing_on", 0)
        for e in EVENTS:
            wr(f"events/kmem/{e}/enable", saved_ev[e])
        wr("trace", "")
        wr("buffer_size_kb", saved["buffer_size_kb"])
        wr("tracing_on", saved["tracing_on"])
        if mounted:
            subprocess.run(["umount", T], check=False)

    writes, nbytes = (int(x) for x in out.split())
    line = re.compile(r"^\s*(\S+)-(\d+)\s+\[(\d+)\].*?\s([\d.]+): (\w+): .*?pfn=0x[0-9a-f]+ order=(\d+)(.*)$")
    seq = collections.defaultdict(list)
    tasks = collections.defaultdict(list)
    for l in text.splitlines():
        m = line.match(l)
        if m:
            comm, pid, cpu, ts, ev, order, rest = m.groups()
            seq[int(cpu)].append((ev, int(order), "percpu_refill=1" in rest, float(ts)))
            if a.runs and int(order) == 0 and ev in ("mm_page_alloc", "mm_page_free"):
                tasks[(comm, int(pid))].append(ev == "mm_page_alloc")
    def node_of(cpu):
        d = f"/sys/devices/system/cpu/cpu{cpu}"
        nodes = [n for n in os.listdir(d) if re.fullmatch(r"node\d+", n)] if os.path.isdir(d) else []
        return int(nodes[0][4:]) if nodes else 0

    with open("/proc/sys/net/core/wmem_default") as f:
        wmem_default = int(f.read())
    report = {"writes": writes, "bytes": nbytes, "write_bytes": a.write_bytes,
              "seconds": a.seconds, "writer_cpu": a.writer_cpu, "reader_cpu": a.reader_cpu,
              "writer_node": node_of(a.writer_cpu), "wmem_default": wmem_default,
              "command": a.cmd, "kernel": os.uname().release, "overrun": overrun,
              "flow": "udp" if a.udp else ("command" if [c for c in a.cmd if c != "--"] else "af-unix"),
              "skb_defer_max": a.skb_defer_max if a.skb_defer_max is not None
              else (int(saved_defer) if saved_defer is not None else None),
              "high_fraction": a.high_fraction if a.high_fraction is not None else int(saved_fraction),
              "pagesets_before": before, "pagesets_after": after, "cpus": {}}
    for cpu, s in sorted(seq.items()):
        cnt = collections.Counter(f"{e[0]} order {e[1]}" for e in s)
        drains_t = calls_timed(s, lambda e: e[0] == "mm_page_pcpu_drain")
        refills_t = calls_timed(s, lambda e: e[0] == "mm_page_alloc_zone_locked" and e[2])
        drains = [p for p, _, _ in drains_t]
        refills = [p for p, _, _ in refills_t]
        report["cpus"][cpu] = {
            "events": dict(sorted(cnt.items())),
            "drain_calls": len(drains),
            "drain_pages_per_call": sorted(collections.Counter(drains).items()),
            "refill_calls": len(refills),
            "refill_pages_per_call": sorted(collections.Counter(refills).items()),
            "drain_ns_per_block": ns_per_block(drains_t),
            "page_runs": page_runs(s),
            "refill_ns_per_block": ns_per_block(refills_t),
        }
    if a.runs:
        report["runs"] = {"cpus": {c: order0_runs([e[0] == "mm_page_alloc" for e in s
                                                    if e[1] == 0 and e[0] in ("mm_page_alloc", "mm_page_free")])
                                   for c, s in sorted(seq.items())},
                          "tasks": task_lives(tasks)}
    if a.json:
        print(json.dumps(report, indent=1))
        return
    if writes:
        print(f"kernel {report['kernel']}: {writes} writes of {a.write_bytes} bytes ({nbytes} bytes), "
              f"writer CPU {a.writer_cpu}, reader CPU {a.reader_cpu}; trace overruns {overrun}")
    else:
        print(f"kernel {report['kernel']}: {' '.join(a.cmd)}; trace overruns {overrun}")
    for cpu, r in report["cpus"].items():
        print(f"cpu{cpu}:")
        for k, v in r["events"].items():
            per = f"  ({v / writes:.3f} per write)" if writes else ""
            print(f"  {k:34s} {v:8d}{per}")
        top = lambda h: sorted(h, key=lambda pc: -pc[1])[:8]
        print(f"  refill calls {r['refill_calls']}, pages per call (most common): {top(r['refill_pages_per_call'])}")
        print(f"  drain calls {r['drain_calls']}, pages per call (most common): {top(r['drain_pages_per_call'])}")
        for side in ("refill", "drain"):
            v = r[f"{side}_ns_per_block"]
            if v is not None:
                print(f"  {side}: {v:.1f} ns between two blocks' events inside a call (mean; includes one tracepoint)")


if __name__ == "__main__":
    main()

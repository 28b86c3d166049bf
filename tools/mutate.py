#!/usr/bin/env python3
"""Mutation harness for the pcpmodel CLI: every parser and every numeric flag.

Takes valid seed inputs (tools/mutate_seeds/, tests/fixtures/sysfs/), mutates them, runs the
release binary (--bin PATH, or $PCPMODEL_BIN; default target/release/pcpmodel) on each mutant and
checks two oracles:

  (a) every mutant: no crash (exit 101 = panic, 134 = abort, or killed by a signal), no run over
      the timeout (10 s), no panic text on stderr;
  (b) mutants that are invalid by construction (a value set to NaN, inf, -inf, a negative value
      where the quantity cannot be negative, or a value outside the physical range in RANGES
      below; an unknown unit; a zone or CPU the kernel would never print twice; in a workload
      file an unknown key, enum word, kind or machine, a duplicated, renamed or missing required
      key, a value of the wrong type, a source without a provenance kind) must exit 2 with a
      message on stderr naming the field or flag (and, for files, the file name).

Workload files (tools/mutate_seeds/workload/, copies of models/workloads/) go through
`predict --workload F` and one more command their kind accepts (latency, scale-max, optimal-high,
workload show, validate for `thread`); a run that exits 0 must print no NaN or inf and no number
of 1e100 or more ("nan-in-output", "absurd-output").

Structural mutants (deleted / duplicated / swapped lines, truncation, garbage bytes, changed
units, deleted fields) may exit 0, 1 or 2 but never crash or hang. Where the tool can tell, a
mutant that corrupts a row (rather than deleting it) and still exits 0 with fewer rows than the
valid seed is reported as a "silent drop". A `detect` root that exits 0 must give a machine file
that `machine show` accepts.

Every mutant is a pure function of (--seed, its id): `--only ID` rebuilds that one mutant, prints
the command and the input it wrote, and runs it.

  python3 tools/mutate.py                      # 3000 mutants, seed 1, 2 jobs
  python3 tools/mutate.py --quick              # about 200 mutants (CI)
  python3 tools/mutate.py --only machine-0042  # reproduce one mutant
  python3 tools/mutate.py --kinds workload:1000 # 1000 workload-file mutants only

Python 3.8+ standard library only. Exit status: 0 no failure, 1 failures found, 2 harness error.
"""

import argparse
import collections
import concurrent.futures
import csv
import difflib
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SEEDS = os.path.join(HERE, "mutate_seeds")
SYSFS_SEEDS = os.path.join(REPO, "tests", "fixtures", "sysfs")

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
INT_MAX = 2**31 - 1


# ---------------------------------------------------------------------------------------------
# Valid ranges: the harness's only knowledge of what is physically possible. A value inside its
# range is never reported as "accepted invalid" (it is checked by oracle (a) only), so the
# ranges are deliberately generous; the invalid probes sit far outside them.
# ---------------------------------------------------------------------------------------------


class Range:
    """lo..hi (inclusive unless lo_open), integer or real, with the physical reason."""

    def __init__(self, lo, hi, integer, reason, lo_open=False, allowed=None, probes=()):
        self.lo, self.hi, self.integer, self.reason = lo, hi, integer, reason
        self.lo_open = lo_open
        self.allowed = allowed  # optional predicate on a number (holes in the range)
        self.extra_probes = list(probes)

    def contains(self, x):
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return False
        if self.integer and x != int(x):
            return False
        if x < self.lo or (self.lo_open and x == self.lo) or x > self.hi:
            return False
        return self.allowed is None or self.allowed(x)

    def invalid_probes(self):
        """Text values that are outside the range by construction."""
        cands = ["nan", "inf", "-inf", "-1", "1e308", "4294967296", "18446744073709551616"]
        if self.integer:
            cands.append("1.5")
        cands += [str(p) for p in self.extra_probes]
        if self.lo > 0 or self.lo_open:
            cands.append("0")
        out = []
        for c in cands:
            v = parse_num(c)
            if v is not None and not self.contains(v) and c not in out:
                out.append(c)
        return out

    def valid_probes(self):
        """In-range values at the edges (oracle (a) only: other fields may still conflict)."""
        vals = []
        lo = self.lo if not self.lo_open else (self.lo + 1 if self.integer else self.lo * 2 or 1e-3)
        for v in (lo, self.hi):
            if self.contains(v):
                vals.append(fmt_num(v, self.integer))
        return vals


def parse_num(s):
    try:
        return float(s) if not re.fullmatch(r"-?\d+", s) else int(s)
    except ValueError:
        return None


def fmt_num(v, integer):
    return str(int(v)) if integer else repr(float(v))


PAGE = 4096
MIB_PAGES = 256  # 4 KiB pages per MiB
# Largest physical address space Linux supports on x86-64 / arm64: 52 bits (5-level paging,
# LPA2) = 4 PiB = 2^40 pages. No zone, node or counter of pages can exceed it.
MAX_PAGES = 2**40
# Machines the flag contexts below run on (from models/*.toml): CPUs and installed RAM.
MACHINE_FACTS = {
    "icelake-server": {"cpus": 128, "ram_mib": 131072},
    "skylake-desktop": {"cpus": 8, "ram_mib": 16384},
    "memcg-72cpu": {"cpus": 72, "ram_mib": 131072},
    "broadwell-2s": {"cpus": 88, "ram_mib": 131072},
    "epyc-7w83": {"cpus": 128, "ram_mib": 262144},
}
LAT = "latency in ns: a load or transfer cannot finish in under 0.1 ns (one cycle at 10 GHz) and \
none takes 100 us (slower than a page fault from an SSD); CXL and 8-socket remote DRAM are < 1 us"

RANGES = {
    # ---- machine TOML (models/README.md; src/hw/machine.rs) ----
    "topology.sockets": Range(1, 1024, True, "sockets: the largest single-image systems have 32; 1024 is generous", probes=[2**31]),
    "topology.cores_per_socket": Range(1, 4096, True, "cores per socket: 288 (Sierra Forest) is the most shipping today", probes=[2**31]),
    "topology.threads_per_core": Range(1, 16, True, "SMT: at most 8 threads per core (POWER8/9)", probes=[1000, 2**31]),
    "topology.numa_nodes": Range(1, 1024, True, "NUMA nodes: MAX_NUMNODES is 2^NODES_SHIFT, NODES_SHIFT <= 10", probes=[2**31]),
    "topology.llc_domains_per_socket": Range(1, 4096, True, "LLC domains per socket: at most one per core", probes=[2**31]),
    "memory.node_mib": Range(1, 2**26, True, "MiB per node: 64 TiB, the 46-bit physical address space of 4-level paging; the largest shipping sockets carry 6-12 TiB", probes=[2**30, 2**31]),
    "memory.below_4g_mib": Range(0, 4096, True, "RAM below 4 GiB: at most 4096 MiB by definition", probes=[8192, 2**31]),
    "memory.reserved_mib_per_node": Range(0, 2**26, True, "reserved MiB per node: cannot exceed the node", probes=[2**40]),
    "memory.struct_page_bytes": Range(1, 4095, True, "sizeof(struct page): less than the 4 KiB page it describes (56-80 in practice)", probes=[4096, 2**32]),
    "cache.level": Range(1, 4, True, "cache level: L1..L4", probes=[9, 255, 256]),
    "cache.size_kib": Range(1, 2**21, True, "KiB per cache instance: 2 GiB; the largest (3D V-Cache L3, eDRAM L4) are about 1 GiB", probes=[2**40, U64_MAX]),
    "cache.line_bytes": Range(16, 1024, True, "cache line: a power of two, 32-256 bytes on every CPU Linux runs on", allowed=lambda x: int(x) & (int(x) - 1) == 0, probes=[3, 2**32]),
    "cache.ways": Range(1, 1024, True, "associativity: at most 32 ways in shipping caches; 1024 is generous", probes=[100000, 2**32]),
    "latency_ns": Range(0.1, 1e5, False, LAT, probes=[1e-300, 1e300]),
    "clock": Range(0.1, 10.0, False, "GHz: no shipping CPU runs below 100 MHz or above 6.2 GHz; 10 GHz is generous", probes=[1e-300, 1e308]),
    # ---- fit CSV columns (native_columns in src/workload/kinds/*.rs, `pcpmodel fit --help`) ----
    "pcp_high_pages": Range(0, 131072 * MIB_PAGES, True, "pcp->high: at most the pages of the machine (icelake-server: 128 GiB = 2^25 pages)", probes=[2**31, 2**32]),
    "score": Range(0, 1e15, False, "netperf score (transactions or Mbit/s): 1e15 is beyond any link", probes=[1e300]),
    "memcg_charge_batch_pages": Range(1, 131072 * MIB_PAGES, True, "MEMCG_CHARGE_BATCH: a per-CPU stock cannot exceed the machine's pages (memcg-72cpu: 2^25)", probes=[2**31, U32_MAX]),
    "throughput_mbps": Range(0, 1e9, False, "throughput in Mbit/s: 1e9 Mbit/s = 1 Pbit/s, beyond any interconnect", probes=[1e300]),
    "threads": Range(1, 88, True, "page_bench threads: one per CPU of broadwell-2s (88 CPUs)", probes=[10000, 2**31]),
    "numa_stat": Range(0, 1, True, "vm.numa_stat is 0 or 1", probes=[2, 255]),
    "cycles_per_page": Range(0, 1e9, False, "cycles per page alloc+free: 1e9 cycles is a third of a second per page", lo_open=True, probes=[1e300]),
    "high_order_pcp": Range(0, 1, True, "a 0/1 flag", probes=[2]),
    "quantity_code": Range(0, 2, True, "0 contended, 1 total_wait_ns, 2 avg_wait_ns", probes=[3, 255]),
    "value": Range(0, 1.9e19, False, "perf lock counts and waits are u64 (ns)", probes=[1e300]),
    "lo_ns": Range(0, 1.9e19, True, "bucket bound in ns: u64 (BPF histogram slots)", probes=[1e300]),
    "hi_ns": Range(0, 1.9e19, True, "bucket bound in ns: u64 (BPF histogram slots)", probes=[1e300]),
    "count": Range(0, 1.9e19, True, "a histogram count: a non-negative u64", probes=[1e300]),
    # ---- /proc/zoneinfo fields (mm/vmstat.c zoneinfo_show_print) ----
    "zoneinfo.pages": Range(0, MAX_PAGES, True, "zone page counts (%lu): at most 2^40 pages, the 52-bit physical address space", probes=[2**41, 2**63]),
    "zoneinfo.pcp": Range(0, INT_MAX, True, "pcp count/high/batch/high_min/high_max are int in struct per_cpu_pages and never negative", probes=[2**31, 2**40]),
    "zoneinfo.cpu": Range(0, 2**20 - 1, True, "CPU number: below NR_CPUS (8192 max on x86 MAXSMP; 2^20 is the project's cap)", probes=[4000000000]),
    "zoneinfo.node": Range(0, 1023, True, "node id: below MAX_NUMNODES (1024)", probes=[2**31]),
    # ---- imported text (design/measurement-formats.md) ----
    "import.count": Range(0, 1.9e19, True, "histogram and contention counts are u64 BPF map values", probes=[1e30]),
    "import.bound": Range(0, 1.9e19, True, "log2/linear bucket bounds are u64 (ns, us, ms)"),
    "import.wait_ns": Range(0, 1.9e19, False, "perf lock wait times are u64 ns (584 years)"),
    # ---- numeric flags (each subcommand's --help) ----
    "--percpu-pagelist-high-fraction": Range(0, INT_MAX, True, "sysctl: 0 or 8..INT_MAX (MIN_PERCPU_PAGELIST_HIGH_FRACTION = 8)", allowed=lambda x: x == 0 or x >= 8, probes=[1, 7, 2**31]),
    "--percpu-pagelist-fraction": Range(0, INT_MAX, True, "sysctl (<= 5.13): 0 or 8..INT_MAX", allowed=lambda x: x == 0 or x >= 8, probes=[1, 7, 2**31]),
    "--scale-max": Range(0, 6, True, "CONFIG_PCP_BATCH_SCALE_MAX: Kconfig range 0..6", probes=[7, 255, 256]),
    "--watermark-scale-factor": Range(1, 3000, True, "sysctl vm.watermark_scale_factor: 1..3000", probes=[100000, 2**32]),
    "--min-free-kbytes": Range(0, 131072 * 1024, True, "vm.min_free_kbytes: an int (INT_MAX), and at most the RAM (icelake-server: 128 GiB)", probes=[2**31, 2**32]),
    "--cpus-per-node": Range(1, 2**20, True, "CPUs per node: at least one, at most the project's 2^20 CPU cap", probes=[2**31, 2**32]),
    "--high": Range(0, 131072 * MIB_PAGES, True, "pcp->high: at most the machine's pages (icelake-server: 2^25)", probes=[99999999, 2**31, U32_MAX]),
    "--highs": Range(0, 16384 * MIB_PAGES, True, "explain --high (a list): at most the smaller machine's pages (skylake-desktop: 2^22)", probes=[99999999, 2**31]),
    "--procs": Range(1, 2**22, True, "processes: at least one, at most PID_MAX_LIMIT (2^22)", probes=[2**31, 2**32]),
    "--tasks": Range(1, 2**22, True, "tasks: at least one, at most PID_MAX_LIMIT (2^22); --procs, --threads and --instances are its aliases", probes=[2**31, 2**32]),
    "--batch": Range(1, 131072 * MIB_PAGES, True, "MEMCG_CHARGE_BATCH: at most the machine's pages (memcg-72cpu: 2^25)", probes=[2**31, U32_MAX]),
    "--charge-batch": Range(1, 131072 * MIB_PAGES, True, "MEMCG_CHARGE_BATCH: at most the machine's pages (memcg-72cpu: 2^25)", probes=[2**31, U32_MAX]),
    "--free-high-threshold": Range(0, 1048576, True, "free_high threshold: pages of free_count on one list, at most 4 GiB (src/bounds.rs)", probes=[2**31, U32_MAX]),
    "--order": Range(0, 10, True, "allocation order: at most MAX_PAGE_ORDER (10)", probes=[11, 255, 256]),
    "--cgroup-depth": Range(0, 2048, True, "cgroup depth: a path of 1-character directories fits PATH_MAX (4096) to depth 2048", probes=[2**31, U32_MAX]),
    "--instances": Range(1, 36, True, "netperf instances: each pins a sender and a receiver CPU (memcg-72cpu: 72 CPUs)", probes=[1000, 2**32]),
    "--threads": Range(1, 88, True, "page_bench threads: one per CPU (broadwell-2s: 88)", probes=[10000, 2**32]),
    "--numa-stat": Range(0, 1, True, "vm.numa_stat is 0 or 1", probes=[2, 255]),
    "--skb-defer-max": Range(0, INT_MAX, True, "sysctl net.core.skb_defer_max: 0..INT_MAX", probes=[2**31, 2**32]),
    "--repeats": Range(1, 100, True, "measure: repeats of every setting; more than 100 would run for days", probes=[100000, 2**32]),
    "--seconds": Range(0, 600, False, "measure pcp: seconds per point, at most 10 minutes", lo_open=True, probes=[601, 1e9]),
    "--tasks": Range(1, 2**22, True, "page-fault tasks are processes: PID_MAX_LIMIT (2^22)", probes=[2**23, 2**32]),
    "--samples": Range(1, 100000, True, "Monte-Carlo samples for the 95 % interval; the tool documents 1..=100000", probes=[U64_MAX]),
    "--starts": Range(1, 1000, True, "multi-start count: each start is a whole fit; 1000 is far beyond any use", probes=[U64_MAX]),
    "--duration-s": Range(0, 1e9, False, "measurement interval in s: positive; 1e9 s is 31 years", lo_open=True),
    "--p99-us": Range(0, 1e9, False, "latency target in us: positive; 1e9 us is 1000 s", lo_open=True),
    "--index": Range(1, 64, True, "1-based histogram index: the seed text holds fewer than 64", probes=[99]),
    "--fix": Range(0, 1e12, False, "fitted parameters are non-negative, finite costs and scales"),
    "--memcgs": Range(1, 8192, True, "memcgs: each holds at least one task, at most CONFIG_NR_CPUS (8192) tasks", probes=[2**31, U32_MAX]),
    "--memcg-redraw": Range(0, 1, False, "a probability", probes=[2, 1e12]),
    # ---- workload TOML (models/workloads/README.md: every quantity finite, >= 0 and <= 1e12;
    # tighter where physics or the field's definition bounds it) ----
    "workload.op.order": Range(0, 10, True, "allocation order: at most MAX_PAGE_ORDER (10)", probes=[11, 255, 256]),
    "workload.op.alloc_pages": Range(0, 1e12, False, "pages per operation: a quantity, at most 1e12 (README)", probes=[1e13]),
    "workload.op.free_pages": Range(0, 1e12, False, "pages per operation: a quantity, at most 1e12 (README)", probes=[1e13]),
    "workload.op.touch_bytes_per_page": Range(0, 1048576, False, "bytes each page's use moves: at most 1 MiB (every byte of a 4 KiB page written 256 times; src/workload/spec.rs)", probes=[1e9, 1e12]),
    "workload.op.work.ns": Range(0, 1e12, False, "work per operation, ns: a quantity, at most 1e12 (README)", probes=[1e13]),
    "workload.op.work.cycles": Range(0, 1e12, False, "work per operation, cycles: a quantity, at most 1e12 (README)", probes=[1e13]),
    "workload.op.phase_pages": Range(1, 1e12, True, "pages per phase: a whole number >= 1 (README), at most 1e12", probes=[1e13]),
    "workload.tasks.count": Range(1, 2**22, True, "tasks: at least one, at most PID_MAX_LIMIT (2^22)", probes=[2**23, 2**31]),
    "workload.params.probe_ns": Range(0, 1e6, False, "tracing probe cost per call, ns: a probe costs ns to a few us; 1 ms is no probe (alloc-loop PARAM_RANGES)", probes=[1e9, 1e12]),
    "workload.params.alloc_work_share": Range(0.01, 1, False, "a share of the work: 0.01..1 (below 1 % refills follow each other with no work between them; alloc-loop PARAM_RANGES)", probes=[0, 1.5, 1e12]),
    "workload.params.clock_ghz": Range(0.1, 10.0, False, "GHz: no shipping CPU runs below 100 MHz or above 6.2 GHz; 10 GHz is generous", probes=[1e-300, 1e-310, 1e308]),
    "workload.params.lru_pages": Range(0, 1, False, "share of the pages that go through the LRU: 0..1", probes=[1.5, 1e12]),
    "workload.params.life_free_share": Range(0, 0.99, False, "share of a phase's pages a task frees while it runs: 0..0.99 (1 leaves nothing for its end; alloc-loop PARAM_RANGES)", probes=[1, 1.5, 1e12]),
    "workload.params.life_free_run_pages": Range(1, 1e12, True, "a life's frees come in runs of whole multiples of this: a whole number >= 1", probes=[0, 1e13]),
    "workload.params.alloc_run_pages": Range(1, 1e12, True, "allocations between a life's free runs: a whole number >= 1 (the built-in kbuild phases of 16384 pages take any; a phase over 2^20 runs is refused)", probes=[0, 1e13]),
    "workload.params.consumer_allocs_per_free": Range(0, 1000, False, "allocations per free on the consumer CPU: a rate, 0..1000 (the kind's bound)", probes=[1e12]),
    "workload.params.free_run_pages": Range(0, 1e9, False, "mean run of frees with no allocation, pages: positive, at most 1e9 (the kind's bound)", lo_open=True, probes=[1e12]),
    "workload.params.cgroup_depth": Range(0, 2048, True, "cgroup depth: a path of 1-character directories fits PATH_MAX (4096) to depth 2048", probes=[4096, 2**31]),
    "workload.params.memcg_charge_batch": Range(1, 131072 * MIB_PAGES, True, "MEMCG_CHARGE_BATCH: at most the machine's pages (memcg-72cpu: 2^25)", probes=[2**31, U32_MAX]),
}

# Flags that take a value but are not numbers (or are handled as names); anything else a
# --help lists without a RANGES entry is reported as "no range known".
NON_NUMERIC_FLAGS = {
    "--format", "--machine", "--workload", "--placement", "--thp", "--model", "--data",
    "--residual", "--free", "--output", "--root", "--unit", "--kernel", "--nodes", "--thread",
    "--high-order-pcp", "--fix", "--highs", "--free-high", "--no-loo", "--toml", "--quiet",
    "--lenient", "--fractions", "--cpus", "--from", "--to", "--out", "--raw", "--journal",
    "--save-toml", "--sysctl-path", "--zoneinfo", "--no-progress", "--realtime", "--dry-run",
    "--recover", "--quick",
}

# Kernel version strings: valid are releases the tool may meet; invalid are not versions at all
# or centuries away (Linux majors bump every ~4 years).
KERNEL_INVALID = ["nan", "-1", "99.99", "1000", "6.18.4294967296", "", "six"]
KERNEL_VALID = ["5.18", "6.1", "6.6", "6.18.44"]

# ---------------------------------------------------------------------------------------------
# Seeds and the commands each input kind is run through.
# ---------------------------------------------------------------------------------------------

FIT_SEEDS = {
    # file: (model, extra args). Extra args keep a valid run well under a second where the
    # defaults are slow (page-fault1 simulates every fit evaluation: ~40 CPU-s with defaults).
    "netperf-pcp-high.csv": ("netperf-pcp-high", []),
    "memcg-netperf.csv": ("memcg-netperf", ["--starts", "1", "--no-loo"]),
    "page-bench.csv": ("page-bench", []),
    "page-fault1.csv": ("page-fault1", ["--no-loo", "--starts", "1", "--fix", "fault_ns_per_folio=8000"]),
    "zone-lock.csv": ("zone-lock", ["--residual", "absolute", "--no-loo", "--starts", "1"]),
}

ZONEINFO_SEEDS = {
    "host-6.18.txt": ["--kernel", "6.18.44", "--cpus-per-node", "2", "--thp", "madvise"],
    "desktop-6.6.txt": ["--kernel", "6.6", "--cpus-per-node", "8", "--thp", "never"],
    "desktop-6.8.txt": ["--kernel", "6.8", "--cpus-per-node", "8", "--thp", "madvise"],
    "numa2-6.18.txt": ["--kernel", "6.18", "--cpus-per-node", "16"],
    "handset-min-free-6.1.txt": ["--kernel", "6.1", "--cpus-per-node", "4"],
    "icelake-5.18.txt": ["--kernel", "5.18", "--cpus-per-node", "64"],
    "live-high-below-min-6.18.txt": ["--kernel", "6.18.44", "--cpus-per-node", "2"],
}

IMPORT_SEEDS = {
    "000_excerpt.txt": "funclatency",
    "funclatency_paste.txt": "funclatency",
    "funclatency_usecs.txt": "funclatency",
    "funclatency_multiline_qp.txt": "funclatency",
    "bpftrace_hist.txt": "bpftrace",
    "bpftrace_lhist.txt": "bpftrace",
    "003_excerpt.txt": "perf-lock",
    "perf_lock_addr.txt": "perf-lock",
    "perf_lock_minwait.txt": "perf-lock",
    "perf_lock_default.txt": "perf-lock",
}

# Extra commands a mutated machine file also goes through (one per mutant, by id).
MACHINE_EXTRA = [
    ["kernel", "--machine", "{F}"],
    ["predict", "--machine", "{F}"],
    ["explain", "{F}", "icelake-server"],
    ["latency", "--machine", "{F}"],
    ["memcg", "--machine", "{F}"],
]

# Numeric flags by context: (base argv, flags). {Z} is a zoneinfo seed, {I} a funclatency seed,
# {N} the netperf fit seed, {O} an output file in the mutant's directory.
FLAG_CONTEXTS = [
    (["measure", "pcp", "--workload", "page-fault", "--dry-run"], ["--repeats", "--seconds", "--tasks"]),
    (["kernel", "changes"], ["--from", "--to"]),
    (["kernel", "--machine", "icelake-server"], ["--percpu-pagelist-high-fraction", "--percpu-pagelist-fraction", "--scale-max", "--watermark-scale-factor", "--min-free-kbytes", "--kernel"]),
    (["zoneinfo", "{Z}", "--kernel", "6.18.44", "--thp", "madvise"], ["--cpus-per-node"]),
    (["zoneinfo", "{Z}", "--cpus-per-node", "2", "--thp", "madvise"], ["--percpu-pagelist-high-fraction", "--watermark-scale-factor", "--kernel"]),
    (["predict", "--workload", "netperf-udp", "--machine", "icelake-server"], ["--high", "--kernel"]),
    (["predict", "--workload", "mmap-fill"], ["--tasks", "--scale-max", "--nodes"]),
    (["predict", "--workload", "memcg-netperf"], ["--charge-batch", "--cgroup-depth", "--tasks"]),
    (["predict", "--workload", "memcg-netperf-cgroups"], ["--memcgs", "--memcg-redraw"]),
    (["predict", "--workload", "page-bench"], ["--tasks", "--numa-stat"]),
    (["predict", "--workload", "page-fault1"], ["--tasks"]),
    (["predict", "--workload", "lmbench-af-unix"], ["--tasks", "--order"]),
    (["optimal-high", "--machine", "icelake-server"], ["--samples", "--kernel"]),
    (["explain", "icelake-server", "skylake-desktop"], ["--high", "--kernel"]),
    (["fit", "--model", "netperf-pcp-high", "--data", "{N}", "--no-loo"], ["--starts", "--fix"]),
    (["latency"], ["--tasks", "--duration-s", "--scale-max", "--nodes", "--kernel"]),
    (["scale-max"], ["--tasks", "--duration-s", "--p99-us", "--nodes"]),
    (["memcg"], ["--charge-batch", "--cgroup-depth", "--tasks"]),
    (["predict", "--workload", "netperf-udp"], ["--skb-defer-max"]),
    (["import", "funclatency", "{I}"], ["--index"]),
    (["plot", "optimal-high", "-o", "{O}", "--samples", "20"], ["--samples"]),
    (["plot", "latency", "-o", "{O}"], ["--tasks", "--scale-max", "--duration-s"]),
    (["validate"], ["--thread"]),
]
FIT_FIX_PARAMS = ["score_scale", "fixed_ns", "mlp_lines"]
STRUCTURAL_FLAG_VALUES = ["", "1e3", "0x10", "5abc", "+3", " 7", "1_000", "٣"]
NODES_INVALID = ["0", "-1", "2", "99", "nan"]
THREAD_INVALID = ["005", "999", "-1", "nan"]

KIND_WEIGHTS = collections.OrderedDict([
    ("machine", 0.18), ("fit", 0.13), ("zoneinfo", 0.11), ("import", 0.14), ("detect", 0.09),
    ("workload", 0.13), ("trace", 0.04), ("flag", 0.18),
])

# ---------------------------------------------------------------------------------------------
# Mutants
# ---------------------------------------------------------------------------------------------


class Mutant:
    def __init__(self, mid, kind, seed_name, desc, expect, cmds, files=None, tree=None,
                 tokens=(), file_label=None, line=None, drop_check=False):
        self.id = mid
        self.kind = kind
        self.seed_name = seed_name
        self.desc = desc
        self.expect = expect  # "invalid" (oracle b) or "any" (oracle a)
        self.cmds = cmds  # list of argv lists (no binary), may contain {F}
        self.files = files or {}  # name -> bytes written into the mutant's directory
        self.tree = tree  # (seed dir, op) for detect
        self.tokens = list(tokens)  # field / flag names one of which the error must name
        self.file_label = file_label  # file name the error must name
        self.line = line  # 1-based line mutated (reported, checked softly)
        self.drop_check = drop_check
        self.seed_bytes = None  # for --only diffs


def rng_for(seed, kind, index):
    return random.Random("%s:%s:%d" % (seed, kind, index))


def read_seed(sub, name):
    with open(os.path.join(SEEDS, sub, name), "rb") as f:
        return f.read()


def lines_of(data):
    return data.decode("utf-8", "surrogateescape").split("\n")


def join_lines(ls):
    return "\n".join(ls).encode("utf-8", "surrogateescape")


GARBAGE = [b"\x00", b"\xff\xfe", b"\x1b[31m", b"\xe2\x80\xaf", b"=3D", b"> ", b"\t", b"\r",
           b"#", b"\"", b"'", b"[", b"{", b"]]", b"-", b"9999999999999999999999"]


def structural_text(rng, data, protect_header=0):
    """One structural mutation of a text file: returns (new bytes, description, line or None)."""
    ls = lines_of(data)
    n = len(ls)
    op = rng.choice(["delete", "duplicate", "swap", "truncate", "garbage", "charflip",
                     "blank", "join", "dup_block"])
    i = rng.randrange(protect_header, n) if n > protect_header else 0
    if op == "delete":
        return join_lines(ls[:i] + ls[i + 1:]), "deleted line %d" % (i + 1), i + 1
    if op == "duplicate":
        return join_lines(ls[:i + 1] + [ls[i]] + ls[i + 1:]), "duplicated line %d" % (i + 1), i + 1
    if op == "swap" and n > 1:
        j = min(n - 1, i + 1)
        ls[i], ls[j] = ls[j], ls[i]
        return join_lines(ls), "swapped lines %d and %d" % (i + 1, j + 1), i + 1
    if op == "truncate":
        k = rng.randrange(0, max(1, len(data)))
        return data[:k], "truncated after byte %d" % k, None
    if op == "garbage":
        k = rng.randrange(0, max(1, len(data)))
        g = rng.choice(GARBAGE)
        return data[:k] + g + data[k:], "inserted %r at byte %d" % (g, k), None
    if op == "charflip":
        k = rng.randrange(0, max(1, len(data)))
        b = bytes([rng.randrange(0, 256)])
        return data[:k] + b + data[k + 1:], "byte %d replaced by %r" % (k, b), None
    if op == "blank":
        ls[i] = ""
        return join_lines(ls), "blanked line %d" % (i + 1), i + 1
    if op == "join" and i + 1 < n:
        ls[i] = ls[i] + " " + ls[i + 1]
        del ls[i + 1]
        return join_lines(ls), "joined lines %d and %d" % (i + 1, i + 2), i + 1
    # dup_block: duplicate a run of lines
    j = min(n, i + rng.randint(2, 12))
    return join_lines(ls[:j] + ls[i:j] + ls[j:]), "duplicated lines %d-%d" % (i + 1, j), i + 1


# ---- machine TOML ----

TOML_VALUE = re.compile(r"^(\s*)([a-z_0-9]+)(\s*=\s*\{\s*value\s*=\s*)(\[[^\]]*\]|[^,\[]+)(\s*,.*)$")
TOML_PLAIN = re.compile(r"^(level)(\s*=\s*)(\d+)\s*$")


def machine_sites(text):
    """(line index, dotted field, RANGES key, value text) of every numeric value."""
    sites = []
    section, cache_i = "", -1
    for i, line in enumerate(text.split("\n")):
        s = line.strip()
        if s.startswith("[["):
            section = s.strip("[]")
            if section == "cache":
                cache_i += 1
            continue
        if s.startswith("["):
            section = s.strip("[]")
            continue
        m = TOML_VALUE.match(line)
        if m:
            key, val = m.group(2), m.group(4).strip()
            if section == "cache":
                rk, field = "cache." + key, "cache[%d].%s" % (cache_i, key)
            elif section in ("latency_ns", "clock"):
                rk, field = section, "%s.%s" % (section, key)
            else:
                rk, field = "%s.%s" % (section, key), "%s.%s" % (section, key)
            if rk in RANGES and (re.fullmatch(r"-?[\d.eE+]+", val) or val.startswith("[")):
                sites.append((i, field, rk, val))
            continue
        m = TOML_PLAIN.match(line)
        if m and section == "cache":
            sites.append((i, "cache[%d].level" % cache_i, "cache.level", m.group(3)))
    return sites


def set_machine_value(lines, site, new):
    i, field, rk, val = site
    line = lines[i]
    if rk == "cache.level":
        lines[i] = re.sub(r"=\s*\d+", "= " + new, line)
        return
    m = TOML_VALUE.match(line)
    if val.startswith("["):
        items = [x.strip() for x in val.strip("[]").split(",")]
        items[0] = new
        newval = "[" + ", ".join(items) + "]"
    else:
        newval = new
    lines[i] = m.group(1) + m.group(2) + m.group(3) + newval + m.group(5)


def machine_seed_list():
    return sorted(os.listdir(os.path.join(SEEDS, "machine")))


def machine_systematic(seed="1"):
    """Value mutants: every (field, probe) once on a randomly chosen seed file first (invalid
    before valid), then the remaining (file, field, probe) combinations."""
    allc = []
    for name in machine_seed_list():
        text = read_seed("machine", name).decode()
        for site in machine_sites(text):
            r = RANGES[site[2]]
            for p in r.invalid_probes():
                allc.append((name, site, p, "invalid"))
            for p in r.valid_probes():
                allc.append((name, site, p, "any"))
    rng = random.Random("%s:machine:order" % seed)
    rng.shuffle(allc)
    first, rest, seen = [], [], set()
    for c in allc:
        key = (c[1][1], c[2])
        (rest if key in seen else first).append(c)
        seen.add(key)
    first.sort(key=lambda c: c[3] != "invalid")
    return first + rest


def machine_cmds(index):
    extra = MACHINE_EXTRA[index % len(MACHINE_EXTRA)]
    return [["optimal-high", "--machine", "{F}", "--samples", "5"],
            ["machine", "show", "{F}"], extra]


def gen_machine(seed, index, cache):
    if "machine" not in cache:
        cache["machine"] = machine_systematic(seed)
    sysl = cache["machine"]
    mid = "machine-%04d" % index
    rng = rng_for(seed, "machine", index)
    # Two thirds value mutants (systematic, in shuffled order), one third structural.
    if index % 3 != 2 and index // 3 * 2 + index % 3 < len(sysl):
        name, site, probe, expect = sysl[index // 3 * 2 + index % 3]
        data = read_seed("machine", name)
        ls = lines_of(data)
        set_machine_value(ls, site, probe)
        leaf = site[1].split(".")[-1]
        desc = "%s = %s (line %d; range %s: %s)" % (site[1], probe or "''", site[0] + 1,
                                                    range_text(RANGES[site[2]]),
                                                    RANGES[site[2]].reason)
        return Mutant(mid, "machine", name, desc, expect, machine_cmds(index),
                      files={name: join_lines(ls)}, tokens=[leaf, site[1]], file_label=name,
                      line=site[0] + 1)
    name = rng.choice(machine_seed_list())
    data = read_seed("machine", name)
    op = rng.random()
    if op < 0.15:
        # changed unit: a size or latency scaled by 1024 or 1/1000 (still a number)
        text = data.decode()
        sites = machine_sites(text)
        site = rng.choice(sites)
        v = parse_num(site[3]) if not site[3].startswith("[") else None
        if v is not None:
            f = rng.choice([1024, 1000, 1e-3])
            nv = v * f
            nv = fmt_num(nv, RANGES[site[2]].integer and nv == int(nv))
            ls = lines_of(data)
            set_machine_value(ls, site, nv)
            return Mutant(mid, "machine", name, "unit change: %s %s -> %s" % (site[1], site[3], nv),
                          "any", machine_cmds(index), files={name: join_lines(ls)},
                          file_label=name, line=site[0] + 1)
    if op < 0.25:
        # duplicated [[cache]] section or a removed one
        text = data.decode()
        blocks = [m.start() for m in re.finditer(r"^\[\[cache\]\]", text, re.M)]
        if blocks:
            k = rng.randrange(len(blocks))
            end = blocks[k + 1] if k + 1 < len(blocks) else text.find("\n[", blocks[k] + 1)
            end = len(text) if end < 0 else end
            blk = text[blocks[k]:end]
            if rng.random() < 0.5:
                new = text[:end] + blk + text[end:]
                d = "duplicated [[cache]] section %d" % k
            else:
                new = text[:blocks[k]] + text[end:]
                d = "removed [[cache]] section %d" % k
            return Mutant(mid, "machine", name, d, "any", machine_cmds(index),
                          files={name: new.encode()}, file_label=name)
    new, d, line = structural_text(rng, data)
    return Mutant(mid, "machine", name, d, "any", machine_cmds(index), files={name: new},
                  file_label=name, line=line)


def range_text(r):
    lo = ("(%s" if r.lo_open else "[%s") % fmt_num(r.lo, r.integer)
    return "%s, %s]" % (lo, fmt_num(r.hi, r.integer))


# ---- fit CSV ----


def fit_cmd(name):
    model, extra = FIT_SEEDS[name]
    return [["fit", "--model", model, "--data", "{F}"] + extra]


def csv_parse(data):
    ls = lines_of(data)
    hdr_i = next(i for i, l in enumerate(ls) if l and not l.startswith("#"))
    header = next(csv.reader([ls[hdr_i]]))
    return ls, hdr_i, header


def fit_systematic():
    out = []
    for name in sorted(FIT_SEEDS):
        ls, hi, header = csv_parse(read_seed("fit", name))
        rows = [i for i in range(hi + 1, len(ls)) if ls[i].strip() and not ls[i].startswith("#")]
        for col, cname in enumerate(header):
            if cname not in RANGES:
                continue
            r = RANGES[cname]
            for p in r.invalid_probes():
                out.append((name, col, cname, p, "invalid"))
            for p in r.valid_probes():
                out.append((name, col, cname, p, "any"))
        # lo_ns > hi_ns in one bucket is impossible by construction
        if "lo_ns" in header:
            out.append((name, header.index("lo_ns"), "lo_ns", "HI+1", "invalid"))
        del rows
    return out


def set_csv_cell(line, col, new):
    cells = next(csv.reader([line]))
    cells[col] = new
    return ",".join(('"%s"' % c if ("," in c or '"' in c) else c) for c in cells)


def gen_fit(seed, index, cache):
    if "fit" not in cache:
        sysl = fit_systematic()
        random.Random("%s:fit:order" % seed).shuffle(sysl)
        cache["fit"] = sysl
    sysl = cache["fit"]
    mid = "fit-%04d" % index
    rng = rng_for(seed, "fit", index)
    k = index // 2
    if index % 2 == 0 and k < len(sysl) * 3:
        name, col, cname, probe, expect = sysl[k % len(sysl)]
        data = read_seed("fit", name)
        ls, hi, header = csv_parse(data)
        rows = [i for i in range(hi + 1, len(ls)) if ls[i].strip() and not ls[i].startswith("#")]
        r = rng.choice(rows)
        if probe == "HI+1":
            cells = next(csv.reader([ls[r]]))
            probe = str(int(cells[header.index("hi_ns")]) + 1)
        ls[r] = set_csv_cell(ls[r], col, probe)
        desc = "%s = %s on line %d (range %s: %s)" % (cname, probe or "''", r + 1,
                                                       range_text(RANGES[cname]),
                                                       RANGES[cname].reason)
        return Mutant(mid, "fit", name, desc, expect, fit_cmd(name), files={name: join_lines(ls)},
                      tokens=[cname], file_label=name, line=r + 1)
    name = rng.choice(sorted(FIT_SEEDS))
    data = read_seed("fit", name)
    ls, hi, header = csv_parse(data)
    rows = [i for i in range(hi + 1, len(ls)) if ls[i].strip() and not ls[i].startswith("#")]
    op = rng.random()
    if op < 0.3:
        r = rng.choice(rows)
        cells = next(csv.reader([ls[r]]))
        sub = rng.choice(["drop_field", "extra_field", "swap_fields", "empty_cell", "text_cell",
                          "quote"])
        c = rng.randrange(len(cells))
        if sub == "drop_field":
            del cells[c]
        elif sub == "extra_field":
            cells.insert(c, "7")
        elif sub == "swap_fields" and len(cells) > 1:
            d = (c + 1) % len(cells)
            cells[c], cells[d] = cells[d], cells[c]
        elif sub == "empty_cell":
            cells[c] = ""
        elif sub == "text_cell":
            cells[c] = rng.choice(["n/a", "-", "1,5", "12 ms", "0x10", "1e", "TRUE"])
        else:
            cells[c] = '"' + cells[c]
        ls[r] = ",".join(cells)
        return Mutant(mid, "fit", name, "%s in column %d of line %d" % (sub, c + 1, r + 1), "any",
                      fit_cmd(name), files={name: join_lines(ls)}, file_label=name, line=r + 1,
                      drop_check=True)
    if op < 0.4:
        h = list(header)
        a, b = rng.sample(range(len(h)), 2) if len(h) > 1 else (0, 0)
        h[a], h[b] = h[b], h[a]
        ls[hi] = ",".join(h)
        return Mutant(mid, "fit", name, "header columns %s and %s swapped" % (header[a], header[b]),
                      "any", fit_cmd(name), files={name: join_lines(ls)}, file_label=name,
                      line=hi + 1)
    new, d, line = structural_text(rng, data)
    return Mutant(mid, "fit", name, d, "any", fit_cmd(name), files={name: new}, file_label=name,
                  line=line)


# ---- /proc/zoneinfo ----

# The fields src/kernel/zoneinfo.rs reads (cma and the counters are skipped by design).
ZI_PAGES = re.compile(r"^(\s*(?:pages free|boost|min|low|high|promo|spanned|present|managed)\s+)(\d+)\s*$")
ZI_PCP = re.compile(r"^(\s*(count|high|batch|high_min|high_max):\s+)(-?\d+)\s*$")
ZI_CPU = re.compile(r"^(\s*cpu:\s+)(\d+)\s*$")
ZI_NODE = re.compile(r"^(Node\s+)(\d+)(,\s*zone\s+\S+)\s*$")


def zoneinfo_sites(ls):
    sites = []
    for i, l in enumerate(ls):
        for rx, rk in ((ZI_PAGES, "zoneinfo.pages"), (ZI_PCP, "zoneinfo.pcp"),
                       (ZI_CPU, "zoneinfo.cpu"), (ZI_NODE, "zoneinfo.node")):
            m = rx.match(l)
            if m:
                field = l.strip().split()[0].rstrip(":")
                if field == "pages":
                    field = "free"
                if rk == "zoneinfo.node":
                    field = "Node"
                sites.append((i, rk, field))
                break
    return sites


def set_zoneinfo_value(l, rk, new):
    if rk == "zoneinfo.node":
        return ZI_NODE.sub(lambda m: m.group(1) + new + m.group(3), l)
    rx = {"zoneinfo.pages": ZI_PAGES, "zoneinfo.pcp": ZI_PCP, "zoneinfo.cpu": ZI_CPU}[rk]
    m = rx.match(l)
    return m.group(1) + new


def zoneinfo_cmd(name):
    return [["zoneinfo", "{F}"] + ZONEINFO_SEEDS[name]]


def gen_zoneinfo(seed, index, cache):
    mid = "zoneinfo-%04d" % index
    rng = rng_for(seed, "zoneinfo", index)
    name = rng.choice(sorted(ZONEINFO_SEEDS))
    data = read_seed("zoneinfo", name)
    ls = lines_of(data)
    op = index % 4
    if op in (0, 1):
        sites = zoneinfo_sites(ls)
        i, rk, field = rng.choice(sites)
        r = RANGES[rk]
        if op == 0:
            probe = rng.choice(r.invalid_probes())
            expect = "invalid"
        else:
            probe = str(rng.choice([0, 1, 7, 63, 4242, 2**20]))
            expect = "any"
            if rk == "zoneinfo.cpu":
                probe = str(rng.choice([0, 1, 3, 17]))
            if rk == "zoneinfo.node":
                probe = str(rng.choice([0, 1, 3]))
        ls[i] = set_zoneinfo_value(ls[i], rk, probe)
        desc = "%s = %s on line %d (range %s: %s)" % (field, probe, i + 1, range_text(r), r.reason)
        return Mutant(mid, "zoneinfo", name, desc, expect, zoneinfo_cmd(name),
                      files={name: join_lines(ls)}, tokens=[field], file_label=name, line=i + 1,
                      drop_check=(expect == "any" and rk in ("zoneinfo.pages", "zoneinfo.pcp")))
    if op == 2 and rng.random() < 0.5:
        # a zone section or a CPU's pageset printed twice: the kernel never does that
        starts = [i for i, l in enumerate(ls) if ZI_NODE.match(l)]
        if rng.random() < 0.5 and starts:
            k = rng.randrange(len(starts))
            end = starts[k + 1] if k + 1 < len(starts) else len(ls)
            while end > starts[k] and not ls[end - 1].strip():
                end -= 1
            new = ls[:end] + ls[starts[k]:end] + ls[end:]
            return Mutant(mid, "zoneinfo", name, "zone section at line %d printed twice" % (starts[k] + 1),
                          "invalid", zoneinfo_cmd(name), files={name: join_lines(new)},
                          tokens=["zone", "Node", "duplicate", "twice", "again"], file_label=name,
                          line=end + 1)
        cpus = [i for i, l in enumerate(ls) if ZI_CPU.match(l)]
        if cpus:
            i = rng.choice(cpus)
            j = i + 1
            while j < len(ls) and not ZI_CPU.match(ls[j]) and not ZI_NODE.match(ls[j]) and "vm stats" not in ls[j]:
                j += 1
            new = ls[:j] + ls[i:j] + ls[j:]
            return Mutant(mid, "zoneinfo", name, "pageset of '%s' (line %d) printed twice" % (ls[i].strip(), i + 1),
                          "invalid", zoneinfo_cmd(name), files={name: join_lines(new)},
                          tokens=["cpu", "duplicate", "twice", "again"], file_label=name, line=j + 1)
    new, d, line = structural_text(rng, data)
    return Mutant(mid, "zoneinfo", name, d, "any", zoneinfo_cmd(name), files={name: new},
                  file_label=name, line=line)


# ---- imported text ----

FL_ROW = re.compile(r"^(.*?)(\d+)(\s*->\s*)(\d+)(\s*:\s*)(\d+)(\s*\|.*)$")
BT_ROW = re.compile(r"^(.*?\[)([^,\]\s]+)(, *)([^)\]\s]+)(\)\s+)(\d+)(\s*\|.*)$")
PL_ROW = re.compile(r"^(\W*?\s*)(\d+)(\s+)([\d.]+)( +)(ns|us|ms|s)(\s+)([\d.]+)( +)(ns|us|ms|s)(\s+)([\d.]+)( +)(ns|us|ms|s)(.*)$")
UNIT_WORDS = {"nsecs": ["usecs", "msecs", "fortnights", "nsec"], "usecs": ["nsecs", "msecs", "weeks"],
              "msecs": ["usecs", "nsecs", "parsecs"]}


def import_sites(ls, kind):
    """(line, group index, role) of mutable numeric tokens in data rows."""
    sites = []
    for i, l in enumerate(ls):
        if kind == "funclatency":
            m = FL_ROW.match(l)
            if m:
                sites += [(i, 2, "bound", "lower bound"), (i, 4, "bound", "upper bound"),
                          (i, 6, "count", "count")]
        elif kind == "bpftrace":
            m = BT_ROW.match(l)
            if m:
                sites += [(i, 2, "bound", "bucket"), (i, 6, "count", "count")]
        else:
            m = PL_ROW.match(l)
            if m:
                sites += [(i, 2, "count", "contended"), (i, 4, "wait", "total wait"),
                          (i, 8, "wait", "max wait"), (i, 12, "wait", "avg wait")]
    return sites


def regex_for(kind):
    return {"funclatency": FL_ROW, "bpftrace": BT_ROW, "perf-lock": PL_ROW}[kind]


def replace_group(m, g, new):
    parts = [m.group(k) for k in range(1, m.lastindex + 1)]
    parts[g - 1] = new
    return "".join(p or "" for p in parts)


def import_cmd(name):
    return [["import", IMPORT_SEEDS[name], "{F}", "--format", "csv"]]


def gen_import(seed, index, cache):
    mid = "import-%04d" % index
    rng = rng_for(seed, "import", index)
    name = rng.choice(sorted(IMPORT_SEEDS))
    kind = IMPORT_SEEDS[name]
    data = read_seed("import", name)
    ls = lines_of(data)
    sites = import_sites(ls, kind)
    op = index % 5
    if op in (0, 1) and sites:
        i, g, role, field = rng.choice(sites)
        m = regex_for(kind).match(ls[i])
        if op == 0:
            rk = {"count": "import.count", "bound": "import.bound", "wait": "import.wait_ns"}[role]
            probes = RANGES[rk].invalid_probes()
            if role == "wait":
                probes = [p for p in probes if p not in ("4294967296",)] + ["18446744073709551616"]
            if role == "count" and kind == "perf-lock":
                probes = probes + ["-713"]
            probe = rng.choice(probes)
            expect = "invalid"
        else:
            old = m.group(g)
            probe = rng.choice([str(int(float(old)) + 1) if re.fullmatch(r"[\d.]+", old) else old + "0",
                                "0", "00" + old, old + ".0", old + "K", "1e3"])
            expect = "any"
        ls[i] = replace_group(m, g, probe)
        desc = "%s on line %d set to %r (%s)" % (field, i + 1, probe,
                                                 "invalid: outside " + RANGES[{"count": "import.count", "bound": "import.bound", "wait": "import.wait_ns"}[role]].reason
                                                 if expect == "invalid" else "changed value")
        return Mutant(mid, "import", name, desc, expect, import_cmd(name), files={name: join_lines(ls)},
                      tokens=[field, field.split()[-1], "line %d" % (i + 1), ":%d:" % (i + 1),
                              "'%s" % probe],
                      file_label=name, line=i + 1, drop_check=True)
    if op == 2 and sites:
        # changed or unknown units; a row missing a field; fields swapped in a row
        i, g, role, field = rng.choice(sites)
        l = ls[i]
        sub = rng.random()
        if kind == "perf-lock" and sub < 0.4:
            m = regex_for(kind).match(l)
            ug = rng.choice([6, 10, 14])
            unit = rng.choice(["fortnights", "xs", "us", "ns", "s", "ms", "", "µs"])
            ls[i] = replace_group(m, ug, unit)
            expect = "invalid" if unit in ("fortnights", "xs", "") else "any"
            return Mutant(mid, "import", name, "unit of a wait on line %d set to %r" % (i + 1, unit),
                          expect, import_cmd(name), files={name: join_lines(ls)},
                          tokens=["wait", "unit", unit or "time", "line %d" % (i + 1), ":%d:" % (i + 1)],
                          file_label=name, line=i + 1, drop_check=True)
        if kind == "funclatency" and sub < 0.4:
            hdr = [k for k, x in enumerate(ls) if re.search(r"\b(nsecs|usecs|msecs)\b\s*:", x)]
            if hdr:
                k = rng.choice(hdr)
                w = re.search(r"\b(nsecs|usecs|msecs)\b", ls[k]).group(1)
                new = rng.choice(UNIT_WORDS[w])
                ls[k] = ls[k].replace(w, new, 1)
                expect = "invalid" if new in ("fortnights", "weeks", "parsecs") else "any"
                return Mutant(mid, "import", name, "histogram unit on line %d: %s -> %s" % (k + 1, w, new),
                              expect, import_cmd(name), files={name: join_lines(ls)},
                              tokens=[new, "unit", "line %d" % (k + 1), ":%d:" % (k + 1)],
                              file_label=name, line=k + 1, drop_check=(expect == "any"))
        toks = re.split(r"(\s+)", l)
        words = [k for k, t in enumerate(toks) if t.strip() and t.strip() not in ("|", ">")]
        if len(words) > 2:
            if rng.random() < 0.5:
                k = rng.choice(words[1:])
                del toks[k]
                d = "deleted field %r on line %d" % (l.split()[words.index(k)] if False else toks[k - 1:k], i + 1)
                d = "deleted a field on line %d" % (i + 1)
            else:
                a, b = rng.sample(words, 2)
                toks[a], toks[b] = toks[b], toks[a]
                d = "swapped two fields on line %d" % (i + 1)
            ls[i] = "".join(toks)
            return Mutant(mid, "import", name, d, "any", import_cmd(name), files={name: join_lines(ls)},
                          file_label=name, line=i + 1, drop_check=True)
    new, d, line = structural_text(rng, data)
    # a changed byte inside a data row corrupts it: rows may not silently vanish
    return Mutant(mid, "import", name, d, "any", import_cmd(name), files={name: new},
                  file_label=name, line=line,
                  drop_check=d.startswith(("byte", "inserted", "joined")) and False)


# ---- detect roots ----

DETECT_VALUES = {
    # file name -> (RANGES-like note, invalid values, valid-but-odd values)
    "size": (["-32K", "nanK", "18446744073709551615K", "4294967296K", "0K", "1e308K", "99999999999999999999K"], ["32K", "1024K", "64M", "1G", "48"]),
    "ways_of_associativity": (["-1", "4294967296", "nan", "18446744073709551616", "100000"], ["0", "1", "16", "64"]),
    "coherency_line_size": (["0", "3", "-64", "4294967296", "nan"], ["32", "128", "256"]),
    "level": (["0", "9", "-1", "nan", "4294967296"], ["1", "2", "3", "4"]),
    "shared_cpu_list": (["0-4294967295", "0-99999999999", "-1", "nan", "5-2"], ["0", "0-1", "0-15", "0,8"]),
    "physical_package_id": (["4294967296", "nan"], ["0", "1", "3", "-1"]),
    "core_id": (["4294967296", "nan"], ["0", "63", "-1"]),
    "thread_siblings_list": (["0-4294967295", "nan", "3-1"], ["0", "0-1"]),
    "online": (["0-4294967295", "0-99999999", "nan", "-1"], ["0", "0-3"]),
    "possible": (["0-4294967295", "nan"], ["0-15", "0-8191"]),
    "cpulist": (["0-4294967295", "nan", "-1"], ["0", ""]),
    "base_frequency": (["-1", "nan", "18446744073709551616", "99999999999999"], ["0", "800000", "3800000"]),
    "cpuinfo_max_freq": (["-1", "nan", "18446744073709551616", "99999999999999"], ["0", "800000"]),
    "cpuinfo_min_freq": (["-1", "nan", "99999999999999"], ["0", "800000"]),
}
# Files detect does not read (src/hw/detect.rs): never "invalid by construction" there.
DETECT_NOT_READ = {"cpuinfo_min_freq", "possible"}
# meminfo lines: "MemTotal:  N kB" and "Node n MemTotal:  N kB"
MEMINFO_INVALID = ["-1", "nan", "18446744073709551616", "4611686018427387904"]


def detect_trees():
    return sorted(d for d in os.listdir(SYSFS_SEEDS) if os.path.isdir(os.path.join(SYSFS_SEEDS, d)))


def detect_files(tree):
    base = os.path.join(SYSFS_SEEDS, tree)
    out = []
    for dp, dn, fn in os.walk(base):
        for f in fn:
            out.append(os.path.relpath(os.path.join(dp, f), base))
    return sorted(out)


def gen_detect(seed, index, cache):
    mid = "detect-%04d" % index
    rng = rng_for(seed, "detect", index)
    tree = rng.choice(detect_trees())
    if ("detect", tree) not in cache:
        cache[("detect", tree)] = detect_files(tree)
    files = cache[("detect", tree)]
    cmds = [["detect", "--root", "root", "--toml"]]
    op = index % 6
    if index == 0 or (op == 5 and rng.random() < 0.15):
        which = rng.choice(["empty", "no-sys", "no-proc", "no-cpu", "no-node"])
        if index == 0:
            which = "empty"
        ops = {"empty": ("rmtree", ""), "no-sys": ("rmtree", "sys"), "no-proc": ("rmtree", "proc"),
               "no-cpu": ("rmtree", "sys/devices/system/cpu"), "no-node": ("rmtree", "sys/devices/system/node")}
        kind, path = ops[which]
        expect = "invalid" if which in ("empty", "no-sys", "no-cpu") else "any"
        return Mutant(mid, "detect", tree, "root with %s removed" % (path or "everything"), expect, cmds,
                      tree=(tree, [(kind, path, None)]),
                      tokens=["cpu", "sys", "missing", "empty", "no "], file_label=None)
    cand = [f for f in files if os.path.basename(f) in DETECT_VALUES or f.endswith("meminfo")]
    f = rng.choice(cand)
    base = os.path.basename(f)
    if op in (0, 1, 2):
        # detect reads the first online CPU's caches and clocks and some files not at all, so an
        # invalid value is "invalid by construction" only when every copy of the file has it
        # (op 0 and 5); a value changed in one copy is checked by oracle (a) only.
        if base == "meminfo":
            if op == 0:
                v = rng.choice(MEMINFO_INVALID)
                return Mutant(mid, "detect", tree, "every meminfo: MemTotal = %s kB" % v, "invalid",
                              cmds, tree=(tree, [("memtotal_all", "", v)]),
                              tokens=["MemTotal", "meminfo"], file_label="meminfo")
            v = rng.choice(MEMINFO_INVALID + ["1", "0", "1048576"])
            return Mutant(mid, "detect", tree, "%s: MemTotal = %s kB" % (f, v), "any", cmds,
                          tree=(tree, [("memtotal", f, v)]), file_label=None)
        inv, val = DETECT_VALUES[base]
        if op == 0 and base not in DETECT_NOT_READ:
            v = rng.choice(inv)
            pat = re.sub(r"cpu\d+/", "cpu*/", f)
            pat = re.sub(r"node\d+/", "node*/", pat)
            return Mutant(mid, "detect", tree, "every %s = %r" % (pat, v), "invalid", cmds,
                          tree=(tree, [("writeall", pat, v + "\n")]), tokens=[base], file_label=base)
        v = rng.choice(inv + val)
        return Mutant(mid, "detect", tree, "%s = %r" % (f, v), "any", cmds,
                      tree=(tree, [("write", f, v + "\n")]), file_label=None)
    if op == 3:
        sub = rng.choice(["delete", "empty", "garbage", "dir->file", "file->dir", "rmdir"])
        if sub == "delete":
            action = [("delete", f, None)]
        elif sub == "empty":
            action = [("write", f, "")]
        elif sub == "garbage":
            action = [("write", f, rng.choice(["\x00\xff", "abc", "  \n\n", "1 2 3", "0x40", "∞"]))]
        elif sub == "dir->file":
            d = os.path.dirname(f)
            action = [("dir2file", d, "junk\n")]
            f = d
        elif sub == "file->dir":
            action = [("file2dir", f, None)]
        else:
            d = os.path.dirname(os.path.dirname(f)) if "cache/index" in f else os.path.dirname(f)
            action = [("rmtree", d, None)]
            f = d
        return Mutant(mid, "detect", tree, "%s: %s" % (sub, f), "any", cmds, tree=(tree, action),
                      file_label=None)
    if op == 4:
        # /proc/cpuinfo or /proc/zoneinfo text: structural edits
        txt = [x for x in files if x.startswith("proc/") and not x.endswith("meminfo")]
        if txt:
            p = rng.choice(txt)
            with open(os.path.join(SYSFS_SEEDS, tree, p), "rb") as fh:
                data = fh.read()
            new, d, line = structural_text(rng, data)
            return Mutant(mid, "detect", tree, "%s: %s" % (p, d), "any", cmds,
                          tree=(tree, [("writeb", p, new)]), file_label=None)
    # same value written to every CPU's copy of one file (a consistent but invalid tree)
    if base == "meminfo" or base in DETECT_NOT_READ:
        new, d, line = structural_text(rng, open(os.path.join(SYSFS_SEEDS, tree, f), "rb").read())
        return Mutant(mid, "detect", tree, "%s: %s" % (f, d), "any", cmds,
                      tree=(tree, [("writeb", f, new)]), file_label=None)
    inv, val = DETECT_VALUES[base]
    v = rng.choice(val)
    pat = re.sub(r"cpu\d+/", "cpu*/", f)
    pat = re.sub(r"node\d+/", "node*/", pat)
    return Mutant(mid, "detect", tree, "every %s = %r" % (pat, v), "any", cmds,
                  tree=(tree, [("writeall", pat, v + "\n")]), file_label=None)


def build_tree(src, dst, actions):
    shutil.copytree(src, dst, symlinks=True)
    import fnmatch
    for kind, rel, arg in actions:
        p = os.path.join(dst, rel)
        if kind == "rmtree":
            if rel == "":
                for x in os.listdir(dst):
                    shutil.rmtree(os.path.join(dst, x))
            elif os.path.exists(p):
                shutil.rmtree(p)
        elif kind == "delete":
            os.unlink(p)
        elif kind == "write":
            with open(p, "w") as fh:
                fh.write(arg)
        elif kind == "writeb":
            with open(p, "wb") as fh:
                fh.write(arg)
        elif kind == "writeall":
            for dp, dn, fn in os.walk(dst):
                for f in fn:
                    r = os.path.relpath(os.path.join(dp, f), dst)
                    if fnmatch.fnmatch(r, rel):
                        with open(os.path.join(dp, f), "w") as fh:
                            fh.write(arg)
        elif kind == "memtotal":
            with open(p) as fh:
                t = fh.read()
            t = re.sub(r"(MemTotal:\s+)\d+", lambda m: m.group(1) + arg, t, count=1)
            with open(p, "w") as fh:
                fh.write(t)
        elif kind == "memtotal_all":
            for dp, dn, fn in os.walk(dst):
                for f in fn:
                    if f == "meminfo":
                        q = os.path.join(dp, f)
                        with open(q) as fh:
                            t = fh.read()
                        t = re.sub(r"(MemTotal:\s+)\d+", lambda m: m.group(1) + arg, t, count=1)
                        with open(q, "w") as fh:
                            fh.write(t)
        elif kind == "dir2file":
            shutil.rmtree(p)
            with open(p, "w") as fh:
                fh.write(arg)
        elif kind == "file2dir":
            os.unlink(p)
            os.makedirs(p)


# ---- workload TOML (models/workloads/README.md; src/workload/spec.rs, src/workload/kinds/) ----

# Commands a mutated workload file goes through besides `predict --workload F` (one per mutant,
# by id), by the seed's kind: only commands that accept the kind (latency and scale-max need a
# zone->lock kind, optimal-high a reuse path; `explain` takes netperf-udp only and `memcg` no
# --workload, so neither is run).
WORKLOAD_EXTRA = {
    "alloc-loop": [["latency", "--workload", "{F}"],
                   ["scale-max", "--workload", "{F}", "--kernel", "6.8"],
                   ["workload", "show", "{F}"]],
    "producer-consumer": [["optimal-high", "--workload", "{F}", "--samples", "5"],
                          ["workload", "show", "{F}"]],
    "memcg-charge": [["workload", "show", "{F}"],
                     ["predict", "--workload", "{F}", "--format", "csv"]],
}
# Fields every file must have (WorkloadSpec) and those a kind needs besides.
WORKLOAD_REQUIRED = {"name", "kind", "description", "source", "default_machine", "reference_kernel",
                     "op", "tasks", "op.what", "op.order", "op.alloc_pages", "op.free_pages",
                     "op.freed_by", "op.touch_bytes_per_page", "op.work", "tasks.count",
                     "tasks.nodes", "tasks.mode"}
WORKLOAD_KIND_REQUIRED = {
    "producer-consumer": {"op.placement", "params.consumer_allocs_per_free"},
    "memcg-charge": {"params.cgroup_depth", "params.memcg_charge_batch"},
}
WORKLOAD_KINDS = ["alloc-loop", "producer-consumer", "memcg-charge", "numa-stat", "high-order-fault"]
# String fields: (invalid by construction, valid alternatives). Enum words, kernel versions,
# machine names, thread ids and names as the README and `pcpmodel workloads --kinds` define them.
WORKLOAD_STRINGS = {
    "op.freed_by": (["sometimes", "", "Same", "remote_node", "partner "], ["same", "partner", "remote-node", "later"]),
    "op.placement": (["same-core", "", "SMT", "cross_llc", "numa"], ["smt", "same-llc", "cross-llc", "cross-socket"]),
    "tasks.nodes": (["two", "", "0", "ALL", "half"], ["one", "all", "cores"]),
    "tasks.mode": (["fiber", "", "Process", "threads"], ["process", "thread", "kernel"]),
    "basis": (["guessed", "", "Given", "estimated"], ["given", "fitted", "measured", "derived"]),
    "kind": (["queue-hold", "", "alloc_loop", "Alloc-Loop", "netperf-udp"], WORKLOAD_KINDS),
    "reference_kernel": (KERNEL_INVALID, KERNEL_VALID),
    "op.work.kernel": (KERNEL_INVALID, KERNEL_VALID),
    "default_machine": (["nosuch-machine", "", "icelake-server.toml", "../nosuch/m.toml"], ["icelake-server", "skylake-desktop", "epyc-7w83"]),
    "thread": (["999", "", "abc", "-1"], ["000", "001", "004"]),
    "name": (["", "two words", "tab\there"], ["x", "my-workload"]),
    "source": (["", "guess: from memory", "spec", "no provenance kind here"], ["assumed: x", "derived: y", "seed 004: z"]),
    "text": (["ctl\u0000char", "esc\u001b[31m"], ["", "plain text", "ünïcödé"]),
}
WORKLOAD_TEXT = {"description", "op.what"}
WORKLOAD_RENAMES = [lambda k: k + "s", lambda k: k[:-1], lambda k: k.replace("_", "-") if "_" in k else k + "-x",
                    lambda k: k.upper(), lambda k: k + "_ns"]
WORKLOAD_WORK_UNITS = ["ms", "us", "seconds", "cycle", "nsecs"]
WORKLOAD_WRONG_VALUES = ['"12"', "{ x = 1 }", "[1, 2]", "true", "1979-05-27"]
WL_KEY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)(.*)$")
WL_VALUE = re.compile(r"(\bvalue\s*=\s*)(\"(?:[^\"\\]|\\.)*\"|[-+0-9a-z_.]+)")
WL_SOURCE = re.compile(r"(\bsource\s*=\s*)(\"(?:[^\"\\]|\\.)*\"|'[^']*')")
WL_BASIS = re.compile(r"(\bbasis\s*=\s*)(\"[^\"]*\")")
WL_KERNEL = re.compile(r"(\bkernel\s*=\s*)(\"[^\"]*\")")
WL_STRING = re.compile(r"^(\s*[A-Za-z_]+\s*=\s*)(\"(?:[^\"\\]|\\.)*\"|'[^']*')(\s*(#.*)?)$")


def workload_seed_list():
    return sorted(os.listdir(os.path.join(SEEDS, "workload")))


def workload_kind_of(name):
    m = re.search(r'^kind\s*=\s*"([^"]*)"', read_seed("workload", name).decode(), re.M)
    return m.group(1) if m else "?"


def workload_keys(ls):
    """(line index, section, key, dotted field, rest) of every key line outside multi-line
    arrays; a key starting a multi-line array is listed with dotted None."""
    out, section, in_array = [], "", False
    for i, l in enumerate(ls):
        s = l.strip()
        if in_array:
            in_array = s != "]"
            continue
        if s.startswith("[") and not s.startswith("[["):
            section = s.strip("[] ")
            continue
        m = WL_KEY.match(l)
        if not m:
            continue
        key, rest = m.group(2), m.group(4).strip()
        if rest == "[":
            in_array = True
            out.append((i, section, key, None, rest))
            continue
        dotted = "%s.%s" % (section, key) if section else key
        if key == "work":
            inner = re.match(r"\{\s*(\w+)\s*=", rest)
            dotted = "op.work.%s" % inner.group(1) if inner else "op.work"
        out.append((i, section, key, dotted, rest))
    return out


def workload_sites(name):
    """(line, dotted field, site type, range or string key, current text) of every mutable value."""
    ls = lines_of(read_seed("workload", name))
    sites = []
    for i, section, key, dotted, rest in workload_keys(ls):
        if dotted is None:
            continue
        m = WL_VALUE.search(rest)
        if m:
            val = m.group(2)
            if val.startswith('"'):
                if dotted in WORKLOAD_STRINGS:
                    sites.append((i, dotted, "string", dotted, val))
            else:
                rk = "workload." + (dotted if section != "params" else "params." + key)
                if rk in RANGES:
                    sites.append((i, dotted, "number", rk, val))
            if WL_SOURCE.search(rest):
                sites.append((i, dotted, "source", "source", None))
            if WL_BASIS.search(rest):
                sites.append((i, dotted, "basis", "basis", None))
            if key == "work" and WL_KERNEL.search(rest):
                sites.append((i, "op.work.kernel", "kernel", "op.work.kernel", None))
        elif WL_STRING.match(ls[i]):
            if dotted == "source":
                sites.append((i, dotted, "top", "source-top", None))
            elif dotted in WORKLOAD_STRINGS:
                sites.append((i, dotted, "top", dotted, None))
            elif dotted in WORKLOAD_TEXT:
                sites.append((i, dotted, "top", "text", None))
    return sites


def toml_str(s):
    return json.dumps(s, ensure_ascii=False)


def set_workload_site(ls, site, new):
    """Writes `new` (TOML text) into the site's value."""
    i, dotted, typ, rk, _ = site
    l = ls[i]
    if typ in ("number", "string"):
        ls[i] = WL_VALUE.sub(lambda m: m.group(1) + new, l, count=1)
    elif typ == "source":
        ls[i] = WL_SOURCE.sub(lambda m: m.group(1) + new, l, count=1)
    elif typ == "basis":
        ls[i] = WL_BASIS.sub(lambda m: m.group(1) + new, l, count=1)
    elif typ == "kernel":
        ls[i] = WL_KERNEL.sub(lambda m: m.group(1) + new, l, count=1)
    else:
        m = WL_STRING.match(l)
        ls[i] = m.group(1) + new + (m.group(3) or "")


def workload_systematic(seed="1"):
    """Value mutants: every (field, probe) once on a randomly chosen seed first (invalid before
    valid), then the remaining (seed, field, probe) combinations."""
    allc = []
    for name in workload_seed_list():
        for site in workload_sites(name):
            i, dotted, typ, rk, val = site
            if typ == "number":
                r = RANGES[rk]
                allc += [(name, site, p, "invalid") for p in r.invalid_probes()]
                allc += [(name, site, p, "any") for p in r.valid_probes()]
            else:
                key = {"source": "source", "source-top": "source", "basis": "basis",
                       "text": "text"}.get(rk, rk)
                inv, val_ = WORKLOAD_STRINGS[key]
                # the workload's own source line is free text (e.g. "seed 004 (...)")
                exp = "any" if rk == "source-top" else "invalid"
                allc += [(name, site, toml_str(p), exp) for p in inv]
                allc += [(name, site, toml_str(p), "any") for p in val_]
    rng = random.Random("%s:workload:order" % seed)
    rng.shuffle(allc)
    first, rest, seen = [], [], set()
    for c in allc:
        key = (c[1][1], c[1][2], c[2])
        (rest if key in seen else first).append(c)
        seen.add(key)
    first.sort(key=lambda c: c[3] != "invalid")
    return first + rest


def workload_cmds(name, index):
    extra = WORKLOAD_EXTRA.get(workload_kind_of(name), [["workload", "show", "{F}"]])
    return [["predict", "--workload", "{F}"], extra[index % len(extra)]]


def workload_sections(ls):
    """{section: (header line, end line)} of the [op], [tasks], [params] tables."""
    heads = [(i, l.strip().strip("[] ")) for i, l in enumerate(ls)
             if l.strip().startswith("[") and not l.strip().startswith("[[") and WL_KEY.match(l) is None
             and re.fullmatch(r"\[\s*[\w.]+\s*\]", l.strip())]
    out = {}
    for k, (i, s) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(ls)
        out[s] = (i, end)
    return out


def gen_workload(seed, index, cache):
    if "workload" not in cache:
        cache["workload"] = workload_systematic(seed)
    sysl = cache["workload"]
    mid = "workload-%04d" % index
    rng = rng_for(seed, "workload", index)
    if index % 2 == 0 and index // 2 < len(sysl):
        name, site, probe, expect = sysl[index // 2]
        ls = lines_of(read_seed("workload", name))
        set_workload_site(ls, site, probe)
        i, dotted, typ, rk, _ = site
        leaf = dotted.split(".")[-1]
        if typ == "number":
            r = RANGES[rk]
            desc = "%s = %s (line %d; range %s: %s)" % (dotted, probe, i + 1, range_text(r), r.reason)
        else:
            desc = "%s = %s (line %d)" % (dotted, probe, i + 1)
            if typ in ("source", "basis"):
                desc = "%s = %s (line %d; %s of %s)" % (dotted + "." + typ, probe, i + 1, typ, dotted)
        tokens = [leaf, dotted]
        if dotted == "op.work.kernel":
            tokens = ["kernel", dotted]
        cmds = workload_cmds(name, index // 2)
        if dotted == "thread":
            cmds = [cmds[0], ["validate", "--workload", "{F}"]]
        return Mutant(mid, "workload", name, desc, expect, cmds,
                      files={name: join_lines(ls)}, tokens=tokens, file_label=name, line=i + 1)
    name = rng.choice(workload_seed_list())
    data = read_seed("workload", name)
    kind = workload_kind_of(name)
    ls = lines_of(data)
    keys = [k for k in workload_keys(ls) if k[3] is not None]
    cmds = workload_cmds(name, index // 2)
    required = WORKLOAD_REQUIRED | WORKLOAD_KIND_REQUIRED.get(kind, set())
    op = rng.choice(["delete_key", "duplicate_key", "rename_key", "unknown_key", "wrong_type",
                     "remove_table", "change_kind", "array_table", "work_unit", "aliases",
                     "structural", "structural", "structural"])

    def mk(desc, expect, tokens=(), line=None):
        return Mutant(mid, "workload", name, desc, expect, cmds, files={name: join_lines(ls)},
                      tokens=tokens, file_label=name, line=line)

    if op == "delete_key":
        i, section, key, dotted, rest = rng.choice(keys)
        del ls[i]
        req = dotted.split(".work.")[0] + ".work" if ".work." in dotted else dotted
        return mk("deleted %s (line %d)" % (dotted, i + 1), "invalid" if req in required else "any",
                  [key, req], i + 1)
    if op == "duplicate_key":
        i, section, key, dotted, rest = rng.choice(keys)
        ls.insert(i + 1, ls[i])
        return mk("duplicated %s (line %d)" % (dotted, i + 1), "invalid", [key, "duplicate"], i + 2)
    if op == "rename_key":
        i, section, key, dotted, rest = rng.choice(keys)
        new = rng.choice(WORKLOAD_RENAMES)(key)
        m = WL_KEY.match(ls[i])
        ls[i] = m.group(1) + new + m.group(3) + m.group(4)
        return mk("renamed %s to %s (line %d)" % (dotted, new, i + 1), "invalid", [new, key], i + 1)
    if op == "unknown_key":
        secs = workload_sections(ls)
        where = rng.choice(["top", "inline"] + sorted(secs))
        if where == "inline":
            cand = [k for k in keys if k[4].startswith("{") and k[4].rstrip().endswith("}")]
            i, section, key, dotted, rest = rng.choice(cand)
            extra = rng.choice(['unit = "pages"', "min = 0", 'note = "x"'])
            k = ls[i].rstrip().rfind("}")
            ls[i] = ls[i][:k].rstrip() + ", " + extra + " }" + ls[i][k + 1:]
            return mk("%s gained an unknown key: %s (line %d)" % (dotted, extra, i + 1), "invalid",
                      [extra.split()[0]], i + 1)
        new = rng.choice(["comment", "bogus_ns", "think_time_ns", "Order", "nodes_count"])
        if where == "top":
            at = next(i for i, l in enumerate(ls) if WL_KEY.match(l))
            line = '%s = "x"' % new
        else:
            at = secs[where][0] + 1
            line = '%s = { value = 1, source = "assumed: x" }' % new
        ls.insert(at, line)
        return mk("unknown key %s added to %s (line %d)" % (new, where if where != "top" else "the top level", at + 1),
                  "invalid", [new], at + 1)
    if op == "wrong_type":
        i, section, key, dotted, rest = rng.choice(keys)
        m = WL_KEY.match(ls[i])
        vm = WL_VALUE.search(rest)
        if vm and rng.random() < 0.6:
            new = rng.choice(WORKLOAD_WRONG_VALUES)
            ls[i] = WL_VALUE.sub(lambda mm: mm.group(1) + new, ls[i], count=1)
            d = "%s value = %s (wrong type for a %s)" % (dotted, new, "string" if vm.group(2).startswith('"') else "number")
        else:
            new = rng.choice(["3", "1.5", '"x"', "{ }", "[ ]", "true"] if not rest.startswith('"') else ["3", "{ value = \"x\" }", "[\"x\"]", "false"])
            ls[i] = m.group(1) + key + m.group(3) + new
            d = "%s = %s (whole field replaced by a wrong type)" % (dotted, new)
        return mk(d + " (line %d)" % (i + 1), "invalid", [key, dotted], i + 1)
    if op == "remove_table":
        secs = workload_sections(ls)
        s = rng.choice(sorted(secs))
        a, b = secs[s]
        header_only = rng.random() < 0.3
        moved = [WL_KEY.match(l).group(2) for l in ls[a + 1:b] if WL_KEY.match(l)]
        if header_only:
            del ls[a]
            # the table's keys land in the table above: unknown there (or duplicates)
            return mk("table header [%s] removed (line %d)" % (s, a + 1), "invalid" if moved else "any",
                      moved + [s], a + 1)
        del ls[a:b]
        if s in ("op", "tasks"):
            return mk("table [%s] removed (lines %d-%d)" % (s, a + 1, b), "invalid", [s], a + 1)
        need = sorted(x.split(".", 1)[1] for x in required if x.startswith("params."))
        return mk("table [%s] removed (lines %d-%d)" % (s, a + 1, b), "invalid" if need else "any",
                  need, a + 1)
    if op == "change_kind":
        i = next(i for i, l in enumerate(ls) if re.match(r'^kind\s*=', l))
        new = rng.choice([k for k in WORKLOAD_KINDS if k != kind])
        ls[i] = 'kind = "%s"' % new
        return mk("kind %s -> %s (line %d)" % (kind, new, i + 1), "any", (), i + 1)
    if op == "array_table":
        secs = workload_sections(ls)
        s = rng.choice(sorted(secs))
        a = secs[s][0]
        ls[a] = "[[%s]]" % s
        return mk("[%s] written as an array of tables [[%s]] (line %d)" % (s, s, a + 1), "invalid", [s], a + 1)
    if op == "work_unit":
        i = next(k[0] for k in keys if k[2] == "work")
        unit = rng.choice(WORKLOAD_WORK_UNITS)
        ls[i] = re.sub(r"\{\s*(ns|cycles)\s*=", lambda m: "{ %s =" % unit, ls[i], count=1)
        return mk("work unit changed to %s (line %d)" % (unit, i + 1), "invalid", [unit, "work"], i + 1)
    if op == "aliases":
        # aliases are command-line names like `name` (README): one word each
        at = next(i for i, l in enumerate(ls) if re.match(r"^description\s*=", l)) + 1
        bad, ok = ["", "two words", "tab\tx", "ctl\u0000x"], ["old-name", "v2"]
        vals = [rng.choice(bad + ok)] + ([rng.choice(ok)] if rng.random() < 0.5 else [])
        rng.shuffle(vals)
        if rng.random() < 0.2:
            text, expect = toml_str(vals[0]), "invalid"  # a string where a list belongs
        else:
            text, expect = "[%s]" % ", ".join(toml_str(v) for v in vals), \
                "invalid" if any(v in bad for v in vals) else "any"
        ls.insert(at, "aliases = " + text)
        return mk("aliases = %s (line %d)" % (text, at + 1), expect, ["aliases"], at + 1)
    new, d, line = structural_text(rng, data)
    return Mutant(mid, "workload", name, d, "any", cmds, files={name: new}, file_label=name, line=line)


# ---- numeric flags ----


def flag_systematic():
    out = []
    for ci, (base, flags) in enumerate(FLAG_CONTEXTS):
        for fl in flags:
            if fl in ("--kernel", "--from", "--to"):
                out += [(ci, fl, v, "invalid") for v in KERNEL_INVALID]
                out += [(ci, fl, v, "any") for v in KERNEL_VALID]
            elif fl == "--nodes":
                out += [(ci, fl, v, "invalid") for v in NODES_INVALID]
                out += [(ci, fl, v, "any") for v in ["1", "all"]]
            elif fl == "--thread":
                out += [(ci, fl, v, "invalid") for v in THREAD_INVALID]
                out += [(ci, fl, "004", "any")]
            elif fl == "--fix":
                r = RANGES["--fix"]
                for p in FIT_FIX_PARAMS:
                    out += [(ci, fl, "%s=%s" % (p, v), "invalid") for v in ["nan", "inf", "-inf", "-1", "1e308"]]
                    out += [(ci, fl, "%s=%s" % (p, v), "any") for v in ["0", "1", "1e6"]]
                out += [(ci, fl, v, "any") for v in ["nosuch=1", "=1", "score_scale", "score_scale=", "score_scale=1=2"]]
            elif fl == "--high" and base[0] == "explain":
                # explain's --high takes a comma-separated list, bounded by the smaller machine.
                r = RANGES["--highs"]
                for v in r.invalid_probes():
                    out.append((ci, fl, "0," + v, "invalid"))
                out += [(ci, fl, v, "any") for v in ["0", "0,320,640", "", "320,,640", "1e3"]]
            else:
                r = RANGES.get(fl)
                if r is None:
                    continue
                out += [(ci, fl, v, "invalid") for v in r.invalid_probes()]
                out += [(ci, fl, v, "any") for v in r.valid_probes()]
                out += [(ci, fl, v, "any") for v in STRUCTURAL_FLAG_VALUES]
    return out


def gen_flag(seed, index, cache):
    if "flag" not in cache:
        sysl = flag_systematic()
        random.Random("%s:flag:order" % seed).shuffle(sysl)
        rank = lambda c: 0 if c[3] == "invalid" else (2 if c[2] in STRUCTURAL_FLAG_VALUES else 1)
        sysl.sort(key=rank)  # stable: invalid values first, then valid edges, then structural
        cache["flag"] = sysl
    sysl = cache["flag"]
    mid = "flag-%04d" % index
    ci, fl, v, expect = sysl[index % len(sysl)]
    base, _ = FLAG_CONTEXTS[ci]
    files = {}
    argv = []
    for a in base:
        if a == "{Z}":
            files["zoneinfo.txt"] = read_seed("zoneinfo", "host-6.18.txt")
            a = "zoneinfo.txt"
        elif a == "{I}":
            files["paste.txt"] = read_seed("import", "000_excerpt.txt")
            a = "paste.txt"
        elif a == "{N}":
            files["data.csv"] = read_seed("fit", "netperf-pcp-high.csv")
            a = "data.csv"
        elif a == "{O}":
            a = "out.svg"
        argv.append(a)
    argv.append("%s=%s" % (fl, v))
    r = RANGES.get(fl)
    why = (" (range %s: %s)" % (range_text(r), r.reason)) if r and fl not in ("--fix", "--kernel") else ""
    return Mutant(mid, "flag", " ".join(base[:1]) + " " + fl, "%s %s=%r%s" % (base[0], fl, v, why),
                  expect, [argv], files=files,
                  tokens=[fl, fl.lstrip("-"), fl.lstrip("-").replace("-", "_")], file_label=None)


# ---- host traces (compare-trace) ----

# (JSON path, invalid value, field the error must name); paths into the seed trace.
TRACE_INVALID = [
    (("writes",), 0, "writes"), (("writes",), -5, "writes"), (("writes",), 10 ** 15, "writes"),
    (("seconds",), 0, "seconds"), (("seconds",), -1.5, "seconds"), (("seconds",), 1e9, "seconds"),
    (("seconds",), "fast", "seconds"), (("write_bytes",), 0, "write_bytes"),
    (("write_bytes",), 2 ** 40, "write_bytes"), (("wmem_default",), 0, "wmem_default"),
    (("wmem_default",), 2 ** 40, "wmem_default"), (("kernel",), "banana", "kernel"),
    (("kernel",), "4.9.0", "kernel"), (("writer_node",), 7, "pagesets_before"),
    (("reader_cpu",), 9, "cpus.9"), (("writer_cpu",), 9, "cpus.9"),
    (("pagesets_before", "0/Normal", "cpus", "1", "batch"), 0, "batch"),
    (("pagesets_before", "0/Normal", "cpus", "1", "batch"), 10 ** 6, "batch"),
    (("pagesets_before", "0/Normal", "cpus", "1", "batch"), -63, "batch"),
    (("pagesets_before", "0/Normal", "cpus", "1", "high_min"), 10 ** 9, "high_min"),
    (("pagesets_before", "0/Normal", "cpus", "1", "high_max"), 2 ** 33, "high_max"),
    (("pagesets_before", "0/Normal", "cpus", "1", "high_max"), None, "high_max"),
    (("command",), ["gcc", "-c", "f.c"], "command"),
]
TRACE_VALID = [
    (("writes",), 1), (("writes",), 10 ** 6), (("seconds",), 0.5), (("write_bytes",), 1 << 20),
    (("write_bytes",), 4096), (("wmem_default",), 4608), (("kernel",), "6.6.30"),
    (("kernel",), "6.7.0"), (("pagesets_before", "0/Normal", "cpus", "1", "batch"), 1),
    (("pagesets_before", "0/Normal", "cpus", "1", "high_min"), 0),
    (("pagesets_before", "0/Normal", "cpus", "1", "high_max"), 7419),
]


def trace_set(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    if value is None:
        d.pop(path[-1], None)
    else:
        d[path[-1]] = value


def gen_trace(seed, index, cache):
    mid = "trace-%04d" % index
    rng = rng_for(seed, "trace", index)
    name = "trace-af-unix-64k.json"
    data = read_seed("trace", name)
    cmds = [["compare-trace", "{F}"]]
    op = index % 3
    if op in (0, 1):
        doc = json.loads(data)
        if op == 0:
            path, value, token = rng.choice(TRACE_INVALID)
            expect, tokens = "invalid", [token]
        else:
            path, value = rng.choice(TRACE_VALID)
            expect, tokens = "any", []
        trace_set(doc, path, value)
        desc = "%s = %s" % (".".join(path), "(removed)" if value is None else json.dumps(value))
        return Mutant(mid, "trace", name, desc, expect, cmds,
                      files={name: json.dumps(doc, indent=1).encode()}, tokens=tokens,
                      file_label=name)
    new, d, line = structural_text(rng, data)
    return Mutant(mid, "trace", name, d, "any", cmds, files={name: new}, file_label=name,
                  line=line)


GENERATORS = {"machine": gen_machine, "fit": gen_fit, "zoneinfo": gen_zoneinfo,
              "import": gen_import, "detect": gen_detect, "workload": gen_workload,
              "trace": gen_trace, "flag": gen_flag}


def quotas(count):
    q = collections.OrderedDict()
    left = count
    kinds = list(KIND_WEIGHTS)
    for k in kinds[:-1]:
        q[k] = int(round(count * KIND_WEIGHTS[k]))
        left -= q[k]
    q[kinds[-1]] = left
    return q


def make(seed, mid, cache):
    kind, idx = mid.rsplit("-", 1)
    return GENERATORS[kind](seed, int(idx), cache)


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

PANIC = re.compile(r"panicked at|RUST_BACKTRACE|memory allocation of \d+ bytes failed|stack backtrace")
# A number that is not one: Rust prints NaN, inf and -inf; JSON has no such values.
NONFINITE = re.compile(r"(?<![\w.])-?(?:NaN|nan|inf|Infinity)(?![\w])")
# A result beyond any physical quantity (ns, ops/s, pages): 1e100 and more.
HUGE = re.compile(r"(?<![\w.])\d(?:\.\d+)?e\+?(\d{3,})(?![\w])")
# Kinds whose successful runs are also checked for NaN/inf and absurd numbers in their output.
OUTPUT_CHECKED = {"workload"}


def run_one(binary, argv, cwd, timeout):
    t0 = time.monotonic()
    p = subprocess.Popen([binary] + argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        timed_out = True
    wall = time.monotonic() - t0
    return {"rc": p.returncode, "wall": wall, "timeout": timed_out,
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def materialise(m, root):
    d = os.path.join(root, m.id)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for name, data in m.files.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
    if m.tree:
        tree, actions = m.tree
        build_tree(os.path.join(SYSFS_SEEDS, tree), os.path.join(d, "root"), actions)
    return d


def argv_for(m, cmd):
    fname = next(iter(m.files), "")
    return [a.replace("{F}", fname) for a in cmd]


def out_rows(m, res):
    """Rows the tool says it read, where it says (import CSV rows, fit 'N rows', zoneinfo 'N values')."""
    if m.kind == "import":
        ls = [l for l in res["stdout"].splitlines() if l.strip()]
        return max(0, len(ls) - 1)
    if m.kind == "fit":
        mm = re.search(r"^(\d+) rows,", res["stdout"], re.M)
        return int(mm.group(1)) if mm else None
    if m.kind == "zoneinfo":
        mm = re.search(r"(\d+) values", res["stdout"])
        return int(mm.group(1)) if mm else None
    return None


def names(m, stderr, cmdi):
    s = stderr.lower()
    field = any(t.lower() in s for t in m.tokens if t) if m.tokens else True
    fil = (m.file_label.lower() in s) if m.file_label else True
    return field, fil


def judge(m, results, baseline):
    """Failure classes of one mutant (empty = pass)."""
    fails = []
    for ci, res in enumerate(results):
        rc = res["rc"]
        if res["timeout"]:
            fails.append("timeout")
        elif rc is not None and (rc < 0 or rc in (101, 134, 137, 139)):
            fails.append("crash")
        if PANIC.search(res["stderr"]):
            fails.append("panic-text")
        if res["timeout"] or "crash" in fails:
            continue
        if m.kind in OUTPUT_CHECKED and rc == 0:
            if NONFINITE.search(res["stdout"]):
                fails.append("nan-in-output")
            elif any(int(x) >= 100 for x in HUGE.findall(res["stdout"])):
                fails.append("absurd-output")
        if m.expect == "invalid":
            if m.kind == "detect" and ci > 0:
                continue
            if rc == 0:
                if m.kind == "detect" and m.file_label and m.file_label.lower() in res["stderr"].lower():
                    pass  # accepted with a warning naming the file
                else:
                    fails.append("accepted-invalid")
            elif rc == 1:
                fails.append("invalid-as-check-failure")
            elif rc == 2:
                field, fil = names(m, res["stderr"], ci)
                if not res["stderr"].strip():
                    fails.append("error-without-message")
                elif not fil:
                    fails.append("unlocated-error")
                elif not field:
                    # located in the file, but blames another (derived or related) field
                    fails.append("error-names-other-field")
            else:
                fails.append("unexpected-exit-%s" % rc)
        elif m.drop_check and rc == 0 and baseline is not None:
            rows = out_rows(m, res)
            if rows is not None and baseline.get("rows") is not None and rows < baseline["rows"]:
                fails.append("silent-drop")
        if m.kind == "detect" and ci == 1 and rc != 0:
            fails.append("detect-output-rejected")
    return sorted(set(fails))


def execute(m, binary, root, timeout, baseline):
    d = materialise(m, root)
    results = []
    for cmd in m.cmds:
        argv = argv_for(m, cmd)
        res = run_one(binary, argv, d, timeout)
        res["argv"] = argv
        results.append(res)
        if m.kind == "detect" and res["rc"] == 0 and not res["timeout"]:
            with open(os.path.join(d, "detected.toml"), "w") as fh:
                fh.write(res["stdout"])
            r2 = run_one(binary, ["machine", "show", "detected.toml"], d, timeout)
            r2["argv"] = ["machine", "show", "detected.toml"]
            results.append(r2)
    fails = judge(m, results, baseline)
    rows = out_rows(m, results[0]) if results else None
    return {"id": m.id, "rows": rows, "kind": m.kind, "seed": m.seed_name, "desc": m.desc, "expect": m.expect,
            "fails": fails, "dir": d,
            "runs": [{"argv": r["argv"], "rc": r["rc"], "wall": round(r["wall"], 3),
                      "timeout": r["timeout"], "stderr": r["stderr"][-600:],
                      "stdout_hit": output_hit(r["stdout"])} for r in results]}


def output_hit(stdout):
    """The first line of stdout holding a non-finite or absurd number (for the report)."""
    for l in stdout.splitlines():
        if NONFINITE.search(l) or any(int(x) >= 100 for x in HUGE.findall(l)):
            return l.strip()[:200]
    return ""


def baselines(binary, root, timeout):
    """Each seed run unmutated: its exit status, wall time and row count."""
    base = {}
    for name in FIT_SEEDS:
        m = Mutant("seed-fit-" + name, "fit", name, "seed", "any", fit_cmd(name),
                   files={name: read_seed("fit", name)})
        base[("fit", name)] = seed_result(m, binary, root, timeout)
    for name in ZONEINFO_SEEDS:
        m = Mutant("seed-zi-" + name, "zoneinfo", name, "seed", "any", zoneinfo_cmd(name),
                   files={name: read_seed("zoneinfo", name)})
        base[("zoneinfo", name)] = seed_result(m, binary, root, timeout)
    for name in IMPORT_SEEDS:
        m = Mutant("seed-imp-" + name, "import", name, "seed", "any", import_cmd(name),
                   files={name: read_seed("import", name)})
        base[("import", name)] = seed_result(m, binary, root, timeout)
    for name in machine_seed_list():
        m = Mutant("seed-m-" + name, "machine", name, "seed", "any", machine_cmds(0)[:2],
                   files={name: read_seed("machine", name)})
        base[("machine", name)] = seed_result(m, binary, root, timeout)
    for name in workload_seed_list():
        kind = workload_kind_of(name)
        cmds = [["predict", "--workload", "{F}"]] + WORKLOAD_EXTRA.get(kind, [])
        m = Mutant("seed-w-" + name, "workload", name, "seed", "any", cmds,
                   files={name: read_seed("workload", name)})
        base[("workload", name)] = seed_result(m, binary, root, timeout)
    for tree in detect_trees():
        m = Mutant("seed-d-" + tree, "detect", tree, "seed", "any",
                   [["detect", "--root", "root", "--toml"]], tree=(tree, []))
        base[("detect", tree)] = seed_result(m, binary, root, timeout)
    return base


def seed_result(m, binary, root, timeout):
    r = execute(m, binary, root, timeout, None)
    shutil.rmtree(r["dir"], ignore_errors=True)
    return {"rc": [x["rc"] for x in r["runs"]], "wall": max(x["wall"] for x in r["runs"]),
            "rows": r["rows"], "fails": r["fails"]}


def help_flags(binary, sub):
    r = run_one(binary, sub + ["--help"], None, 30)
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z0-9-]+)(?: <|=)", r["stdout"], re.M))


def check_flag_coverage(binary):
    """Flags the binary has that the harness does not know, and known flags the binary lacks."""
    unknown, missing = [], []
    subs = [["kernel"], ["zoneinfo"], ["detect"], ["predict"], ["optimal-high"], ["explain"],
            ["fit"], ["latency"], ["scale-max"], ["memcg"], ["import"], ["plot", "optimal-high"],
            ["plot", "explain"], ["plot", "latency"], ["validate"], ["data"], ["machine", "show"],
            ["measure", "pcp"], ["measure", "latency"], ["kernel", "changes"], ["compare"],
            ["assumptions"]]
    known_in_ctx = collections.defaultdict(set)
    for base, flags in FLAG_CONTEXTS:
        two = base[0] in ("plot", "measure") or base[:2] == ["kernel", "changes"]
        sub = tuple(base[:2]) if two else (base[0],)
        known_in_ctx[sub] |= set(flags)
    for sub in subs:
        have = help_flags(binary, sub)
        for fl in sorted(have):
            if fl in NON_NUMERIC_FLAGS or fl in ("--help", "--version"):
                continue
            if fl not in RANGES:
                unknown.append("%s %s" % (" ".join(sub), fl))
        two = sub[0] in ("plot", "measure") or sub[:2] == ["kernel", "changes"]
        key = tuple(sub[:2]) if two else (sub[0],)
        for fl in sorted(known_in_ctx.get(key, ())):
            if fl not in have:
                missing.append("%s %s" % (" ".join(sub), fl))
    return unknown, missing


def shell_line(binary, m, res_dir):
    lines = []
    for cmd in m.cmds:
        lines.append("cd %s && %s %s" % (shlex.quote(res_dir), shlex.quote(binary),
                                         " ".join(shlex.quote(a) for a in argv_for(m, cmd))))
    if m.kind == "detect":
        lines.append("# then, if detect exits 0: its stdout > detected.toml; %s machine show detected.toml" % binary)
    return lines


def only(args, binary):
    cache = {}
    m = make(args.seed, args.only, cache)
    root = args.workdir
    os.makedirs(root, exist_ok=True)
    base = None
    if m.drop_check:
        base = baselines_for(m, binary, root, args.timeout)
    r = execute(m, binary, root, args.timeout, base)
    print("mutant %s (seed %s): %s" % (m.id, args.seed, m.desc))
    print("input: %s, expectation: %s" % (m.seed_name, "exit 2 naming %s%s" % (
        " or ".join(repr(t) for t in m.tokens[:2]), (" and " + m.file_label) if m.file_label else "")
        if m.expect == "invalid" else "no crash, no hang"))
    print("reproduce: python3 tools/mutate.py --seed %s --only %s --bin %s" % (args.seed, m.id, binary))
    print("commands:")
    for l in shell_line(binary, m, r["dir"]):
        print("  " + l)
    for name, data in m.files.items():
        sub = {"machine": "machine", "fit": "fit", "zoneinfo": "zoneinfo", "import": "import",
               "workload": "workload"}.get(m.kind)
        seedp = os.path.join(SEEDS, sub, m.seed_name) if sub else None
        print("input written: %s" % os.path.join(r["dir"], name))
        if seedp and os.path.exists(seedp):
            a = read_seed(sub, m.seed_name).decode("utf-8", "replace").splitlines()
            b = data.decode("utf-8", "replace").splitlines()
            for l in list(difflib.unified_diff(a, b, "seed/" + m.seed_name, "mutant/" + name, n=1, lineterm=""))[:40]:
                print("  " + l)
    if m.tree:
        print("tree written: %s (from tests/fixtures/sysfs/%s; %s)" % (os.path.join(r["dir"], "root"), m.tree[0], m.tree[1]))
    for run in r["runs"]:
        print("  $ pcpmodel %s\n    exit %s in %.2f s%s" % (" ".join(run["argv"]), run["rc"], run["wall"],
                                                           " (TIMEOUT)" if run["timeout"] else ""))
        for l in run["stderr"].strip().splitlines()[:6]:
            print("    stderr: " + l)
        if run.get("stdout_hit"):
            print("    stdout: " + run["stdout_hit"])
    print("verdict: %s" % (", ".join(r["fails"]) or "pass"))
    return 1 if r["fails"] else 0


def baselines_for(m, binary, root, timeout):
    sub = m.kind
    s = Mutant("seed-" + m.id, m.kind, m.seed_name, "seed", "any", m.cmds,
               files={m.seed_name: read_seed(sub, m.seed_name)})
    return seed_result(s, binary, root, timeout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--bin", default=os.environ.get("PCPMODEL_BIN") or os.path.join(REPO, "target", "release", "pcpmodel"),
                    help="the binary to test (default $PCPMODEL_BIN, else target/release/pcpmodel)")
    ap.add_argument("--seed", default="1", help="random seed: same seed, same mutants (default 1)")
    ap.add_argument("--count", type=int, default=3000, help="mutants in all (default 3000)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants run in parallel (default 2)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per run (default 10)")
    ap.add_argument("--quick", action="store_true", help="about 200 mutants, for CI")
    ap.add_argument("--only", help="rebuild, show and run one mutant by id (e.g. machine-0042)")
    ap.add_argument("--kinds", help="comma-separated subset of: " + ", ".join(KIND_WEIGHTS)
                    + "; KIND:N runs N mutants of KIND (ids KIND-0000..), whatever --count says")
    ap.add_argument("--workdir", default=None, help="where mutants are written (default: a temp dir)")
    ap.add_argument("--out", default="mutate-failures", help="stem of the failure files (.json, .csv)")
    ap.add_argument("--list", action="store_true", help="print the mutants' ids and descriptions only")
    ap.add_argument("--ranges", action="store_true", help="print the valid ranges and their reasons")
    args = ap.parse_args()
    if args.ranges:
        for k, r in RANGES.items():
            print("%-34s %-26s %s" % (k, range_text(r), r.reason))
        return 0
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print("mutate.py: %s is not an executable (cargo build --release first, or --bin PATH)" % binary,
              file=sys.stderr)
        return 2
    if args.workdir is None:
        args.workdir = tempfile.mkdtemp(prefix="pcpmodel-mutate-")
    if args.only:
        return only(args, binary)
    count = 200 if args.quick and args.count == 3000 else args.count
    q = quotas(count)
    if args.kinds:
        keep, counts = set(), {}
        for k in args.kinds.split(","):
            k, _, n = k.partition(":")
            if k not in KIND_WEIGHTS or (n and not n.isdigit()):
                print("mutate.py: --kinds: '%s' is not KIND or KIND:N (kinds: %s)" % (k + (":" + n if n else ""), ", ".join(KIND_WEIGHTS)),
                      file=sys.stderr)
                return 2
            keep.add(k)
            if n:
                counts[k] = int(n)
        q = collections.OrderedDict((k, counts.get(k, v)) for k, v in q.items() if k in keep)
    cache = {}
    mutants = [make(args.seed, "%s-%04d" % (k, i), cache) for k, n in q.items() for i in range(n)]
    if args.list:
        for m in mutants:
            print("%s\t%s\t%s\t%s" % (m.id, m.expect, m.seed_name, m.desc))
        return 0
    t_start = time.monotonic()
    print("pcpmodel mutation run: seed %s, %d mutants, %d jobs, timeout %g s, binary %s"
          % (args.seed, len(mutants), args.jobs, args.timeout, binary), flush=True)
    unknown, missing = check_flag_coverage(binary)
    base = baselines(binary, args.workdir, args.timeout)
    bad_seeds = {k: v for k, v in base.items() if v["fails"] or any(rc not in (0,) for rc in v["rc"])}
    results = []
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {}
        for m in mutants:
            b = base.get((m.kind, m.seed_name))
            futs[ex.submit(execute, m, binary, args.workdir, args.timeout, b)] = m
        for f in concurrent.futures.as_completed(futs):
            r = f.result()
            results.append(r)
            done += 1
            shutil.rmtree(r["dir"], ignore_errors=True) if not r["fails"] else None
            if done % 100 == 0:
                nf = sum(1 for x in results if x["fails"])
                print("  %d/%d done, %d failing, %.0f s" % (done, len(mutants), nf, time.monotonic() - t_start),
                      file=sys.stderr, flush=True)
    # A timeout on a loaded machine is re-run alone once: only a repeated timeout counts.
    for r in results:
        if "timeout" in r["fails"]:
            m = make(args.seed, r["id"], cache)
            again = execute(m, binary, args.workdir, args.timeout, base.get((m.kind, m.seed_name)))
            if "timeout" not in again["fails"]:
                r["fails"] = [x for x in r["fails"] if x != "timeout"]
                r["note"] = "timed out under load, finished in %.1f s alone" % max(x["wall"] for x in again["runs"])
    results.sort(key=lambda r: r["id"])
    report(args, binary, q, results, base, bad_seeds, unknown, missing, time.monotonic() - t_start)
    return 1 if any(r["fails"] for r in results) else 0


CLASSES = ["crash", "timeout", "panic-text", "accepted-invalid", "invalid-as-check-failure",
           "unlocated-error", "error-names-other-field", "error-without-message", "silent-drop",
           "detect-output-rejected", "nan-in-output", "absurd-output"]


def group_of(r):
    """What was mutated, without the value: groups failures into classes."""
    kind, desc, seed = r["kind"], r["desc"], r["seed"]
    if kind == "flag":
        return "flag " + seed
    m = re.match(r"^(every )?([\w\[\].*/-]+) = ", desc)
    if m:
        f = re.sub(r"\[\d+\]", "[*]", m.group(2))
        f = re.sub(r"cpu\d+", "cpu*", f)
        f = re.sub(r"index\d+", "index*", f)
        f = re.sub(r"node\d+", "node*", f)
        if kind == "fit":
            return "fit %s %s" % (FIT_SEEDS.get(seed, ("?",))[0], f)
        return "%s %s" % (kind, f)
    m = re.match(r"^(.+?) on line \d+ set to", desc)
    if m:
        return "import %s %s" % (IMPORT_SEEDS.get(seed, "?"), m.group(1))
    m = re.match(r"^(unit of a wait|histogram unit)", desc)
    if m:
        return "import %s %s" % (IMPORT_SEEDS.get(seed, "?"), m.group(1))
    words = re.sub(r"[\d'\"\\]+", "", desc.split(":")[-1] if kind == "detect" else desc).split()
    tag = " ".join(words[:2])
    if kind == "fit":
        return "fit %s structural: %s" % (FIT_SEEDS.get(seed, ("?",))[0], tag)
    if kind == "import":
        return "import %s structural: %s" % (IMPORT_SEEDS.get(seed, "?"), tag)
    return "%s structural: %s" % (kind, tag)


def report(args, binary, q, results, base, bad_seeds, unknown, missing, elapsed):
    by_kind = collections.OrderedDict((k, []) for k in q)
    for r in results:
        by_kind[r["kind"]].append(r)
    hdr = ["input kind", "mutants", "invalid", "crash", "timeout", "panic", "acc-invalid",
           "inv-as-exit1", "unlocated", "other-field", "silent-drop", "detect-bad-toml",
           "nan/huge-out", "max wall (s)"]
    rows = []
    tot = collections.Counter()
    for k, rs in by_kind.items():
        c = collections.Counter(f for r in rs for f in r["fails"])
        maxw = max((x["wall"] for r in rs for x in r["runs"]), default=0.0)
        row = [k, len(rs), sum(1 for r in rs if r["expect"] == "invalid"), c["crash"], c["timeout"],
               c["panic-text"], c["accepted-invalid"], c["invalid-as-check-failure"],
               c["unlocated-error"] + c["error-without-message"], c["error-names-other-field"],
               c["silent-drop"],
               c["detect-output-rejected"], c["nan-in-output"] + c["absurd-output"], "%.2f" % maxw]
        rows.append(row)
        for i, v in enumerate(row[1:-1], 1):
            tot[i] += v
    maxall = max((x["wall"] for r in results for x in r["runs"]), default=0.0)
    rows.append(["total"] + [tot[i] for i in range(1, len(hdr) - 1)] + ["%.2f" % maxall])
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    print()
    print("  ".join(str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(hdr, widths))))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    failing = [r for r in results if r["fails"]]
    print()
    print("%d mutants, %d failing (%d crashes, %d timeouts over %g s, %d accepted invalid), %.0f s"
          % (len(results), len(failing), tot[3], tot[4], args.timeout, tot[6], elapsed))
    if bad_seeds:
        print("seeds that do not run clean unmutated (exit status, wall s):")
        for (k, n), v in sorted(bad_seeds.items()):
            print("  %s %s: exit %s, %.2f s %s" % (k, n, v["rc"], v["wall"], ",".join(v["fails"])))
    if unknown:
        print("numeric flags without a range in RANGES (only structural values tried): " + ", ".join(unknown))
    if missing:
        print("flags the harness knows but --help no longer lists (skipped or renamed?): " + ", ".join(missing))
    notes = [r for r in results if r.get("note")]
    if notes:
        print("%d runs timed out with %d jobs on a loaded machine but finished alone (not counted)" % (len(notes), args.jobs))
    out_json = args.out + ".json"
    out_csv = args.out + ".csv"
    rec = []
    for r in failing:
        r["group"] = group_of(r)
        m_cmds = ["cd %s && pcpmodel %s" % (r["dir"], " ".join(shlex.quote(a) for a in x["argv"])) for x in r["runs"]]
        rec.append({"id": r["id"], "classes": r["fails"], "group": r["group"], "kind": r["kind"], "seed_input": r["seed"],
                    "mutation": r["desc"], "expect": r["expect"],
                    "exit": [x["rc"] for x in r["runs"]], "wall_s": [x["wall"] for x in r["runs"]],
                    "stderr": [x["stderr"].strip()[-300:] for x in r["runs"]],
                    "stdout_hit": [x.get("stdout_hit", "") for x in r["runs"]],
                    "reproduce": "python3 tools/mutate.py --seed %s --only %s" % (args.seed, r["id"]),
                    "commands": m_cmds})
    with open(out_json, "w") as fh:
        json.dump({"seed": args.seed, "count": len(results), "binary": binary,
                   "summary": {h: v for h, v in zip(hdr[1:-1], rows[-1][1:-1])},
                   "max_wall_s": round(maxall, 3),
                   "seeds_not_clean": {"%s %s" % k: v for k, v in bad_seeds.items()},
                   "flags_without_range": unknown, "flags_missing": missing,
                   "failures": rec}, fh, indent=1)
    with open(out_csv, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "classes", "group", "kind", "seed_input", "mutation", "exit", "max_wall_s", "stderr", "reproduce"])
        for x in rec:
            w.writerow([x["id"], " ".join(x["classes"]), x["group"], x["kind"], x["seed_input"], x["mutation"],
                        " ".join(str(e) for e in x["exit"]), max(x["wall_s"]),
                        (x["stderr"][0] if x["stderr"] else "").replace("\n", " | ")[:200], x["reproduce"]])
    print("failures: %s and %s; reproduce one with: python3 tools/mutate.py --seed %s --only ID"
          % (out_json, out_csv, args.seed))
    if failing:
        print()
        print("failure classes: what was mutated and how it failed (count, first example):")
        seen = collections.OrderedDict()
        for r in failing:
            seen.setdefault((r["group"], tuple(r["fails"])), []).append(r)
        order = sorted(seen.items(), key=lambda kv: (min(CLASSES.index(f) for f in kv[0][1] if f in CLASSES), -len(kv[1])))
        for (group, fails), rs in order:
            r = rs[0]
            print("  %4d  %-44s %-30s e.g. %s: %s" % (len(rs), group[:44], ",".join(fails), r["id"], r["desc"][:90]))


if __name__ == "__main__":
    sys.exit(main())

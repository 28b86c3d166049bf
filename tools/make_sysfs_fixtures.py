#!/usr/bin/env python3
"""Writes the fake sysfs/proc trees under tests/fixtures/sysfs/ used by tests/it/detect.rs.

Only the files `pcpmodel detect` reads are written. The layouts follow what Linux shows on the
real parts (CPU numbering, SMT sibling numbering, core_id gaps, cache sizes), so the trees are
small but realistic:

  amd-ryzen9-5900x/       AMD Ryzen 9 5900X: Zen 3, 1 socket, 2 CCDs x 6 cores, SMT2 = 24 CPUs,
                          one 32 MiB L3 per CCD, 1 NUMA node, 32 GiB; no cpufreq, no zoneinfo.
  intel-xeon-gold-5222-2s/ 2 x Intel Xeon Gold 5222: Cascade Lake, 2 sockets x 4 cores, SMT2 =
                          16 CPUs, 16.5 MiB L3 per socket, 2 NUMA nodes x 48 GiB, cpufreq and
                          /proc/zoneinfo present.

Run from the repository root: python3 tools/make_sysfs_fixtures.py
"""
import os
import shutil

ROOT = os.path.join("tests", "fixtures", "sysfs")


def cpulist(cpus):
    cpus = sorted(cpus)
    out, start, prev = [], None, None
    for c in cpus:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = c
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def machine(name, cpus, caches, nodes, cpuinfo, meminfo_kb, node_meminfo_kb, cpufreq=None,
            zoneinfo=None):
    """cpus: {cpu: (package, core_id, [siblings])}; caches: [(level, type, size, ways, sharers_fn)]"""
    base = os.path.join(ROOT, name)
    shutil.rmtree(base, ignore_errors=True)
    sysc = os.path.join(base, "sys/devices/system/cpu")
    write(os.path.join(sysc, "online"), cpulist(cpus))
    write(os.path.join(sysc, "possible"), cpulist(cpus))
    for cpu, (pkg, core, sibs) in cpus.items():
        d = os.path.join(sysc, f"cpu{cpu}")
        write(os.path.join(d, "topology/physical_package_id"), str(pkg))
        write(os.path.join(d, "topology/core_id"), str(core))
        write(os.path.join(d, "topology/thread_siblings_list"), cpulist(sibs))
        for k, (level, typ, size, ways, sharers) in enumerate(caches):
            c = os.path.join(d, f"cache/index{k}")
            write(os.path.join(c, "level"), str(level))
            write(os.path.join(c, "type"), typ)
            write(os.path.join(c, "size"), size)
            write(os.path.join(c, "ways_of_associativity"), str(ways))
            write(os.path.join(c, "coherency_line_size"), "64")
            write(os.path.join(c, "shared_cpu_list"), cpulist(sharers(cpu)))
        if cpufreq:
            for f, v in cpufreq.items():
                write(os.path.join(d, "cpufreq", f), str(v))
    sysn = os.path.join(base, "sys/devices/system/node")
    write(os.path.join(sysn, "online"), cpulist(nodes))
    for n, ncpus in nodes.items():
        write(os.path.join(sysn, f"node{n}/cpulist"), cpulist(ncpus))
        kb = node_meminfo_kb[n]
        write(os.path.join(sysn, f"node{n}/meminfo"),
              f"Node {n} MemTotal:       {kb} kB\n"
              f"Node {n} MemFree:        {kb * 9 // 10} kB\n"
              f"Node {n} MemUsed:        {kb - kb * 9 // 10} kB")
    proc = os.path.join(base, "proc")
    blocks = []
    for cpu, (pkg, core, sibs) in cpus.items():
        b = [f"processor\t: {cpu}"]
        for k, v in cpuinfo:
            b.append(f"{k}\t: {v}")
        b.append(f"physical id\t: {pkg}")
        b.append(f"core id\t\t: {core}")
        blocks.append("\n".join(b))
    write(os.path.join(proc, "cpuinfo"), "\n\n".join(blocks) + "\n")
    write(os.path.join(proc, "meminfo"),
          f"MemTotal:       {meminfo_kb} kB\n"
          f"MemFree:        {meminfo_kb * 9 // 10} kB\n"
          f"MemAvailable:   {meminfo_kb * 9 // 10} kB\n"
          f"Buffers:            2048 kB")
    if zoneinfo:
        write(os.path.join(proc, "zoneinfo"), zoneinfo)


def zoneinfo_text(zones, cpus):
    """zones: [(node, zone, spanned, present, managed)]"""
    out = []
    seen = set()
    for node, zone, spanned, present, managed in zones:
        out.append(f"Node {node}, zone {zone:>8}")
        if node not in seen:
            seen.add(node)
            out.append("  per-node stats")
            out.append("      nr_inactive_anon 1024")
            out.append("      nr_active_anon 2048")
            out.append("      nr_file_pages 65536")
        mn = managed // 1000
        out.append(f"  pages free     {managed * 9 // 10}")
        out.append(f"        boost    0")
        out.append(f"        min      {mn}")
        out.append(f"        low      {mn + managed // 1000}")
        out.append(f"        high     {mn + 2 * (managed // 1000)}")
        out.append(f"        promo    {mn + 3 * (managed // 1000)}")
        out.append(f"        spanned  {spanned}")
        out.append(f"        present  {present}")
        out.append(f"        managed  {managed}")
        out.append(f"        cma      0")
        out.append(f"        protection: (0, 0, 0, 0, 0)")
        out.append(f"      nr_free_pages {managed * 9 // 10}")
        out.append("  pagesets")
        for c in cpus:
            out.append(f"    cpu: {c}")
            out.append(f"              count:    0")
            out.append(f"              high:     {0 if zone == 'DMA' else 252}")
            out.append(f"              batch:    {1 if zone == 'DMA' else 63}")
            out.append(f"              high_min: {0 if zone == 'DMA' else 252}")
            out.append(f"              high_max: {0 if zone == 'DMA' else 12288}")
            out.append(f"  vm stats threshold: 0")
        out.append(f"  node_unreclaimable:  0")
        out.append(f"  start_pfn:           1")
    return "\n".join(out)


def ryzen_5900x():
    # Linux numbers the 12 cores 0-11 and their SMT siblings 12-23; the second CCD's core_id
    # starts at 8 (APIC ids leave a gap for the 2 disabled cores of each 8-core CCD).
    core_ids = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]
    cpus = {}
    for i in range(24):
        c = i % 12
        cpus[i] = (0, core_ids[c], [c, c + 12])
    ccd = lambda cpu: [x for x in range(24) if (x % 12) // 6 == (cpu % 12) // 6]
    core = lambda cpu: [cpu % 12, cpu % 12 + 12]
    caches = [
        (1, "Data", "32K", 8, core),
        (1, "Instruction", "32K", 8, core),
        (2, "Unified", "512K", 8, core),
        (3, "Unified", "32768K", 16, ccd),
    ]
    cpuinfo = [("vendor_id", "AuthenticAMD"), ("cpu family", "25"), ("model", "33"),
               ("model name", "AMD Ryzen 9 5900X 12-Core Processor"), ("stepping", "0"),
               ("cpu MHz", "3700.000"), ("cache size", "512 KB"), ("siblings", "24"),
               ("cpu cores", "12")]
    machine("amd-ryzen9-5900x", cpus, caches, {0: list(range(24))}, cpuinfo,
            meminfo_kb=32819148, node_meminfo_kb={0: 32819148})


def xeon_gold_5222_2s():
    # 2 sockets x 4 cores: CPUs 0-3 socket 0, 4-7 socket 1, 8-15 their SMT siblings; Cascade
    # Lake core_id values have gaps (they follow the mesh tile positions).
    core_ids = {0: [0, 3, 9, 11], 1: [1, 4, 8, 10]}
    cpus = {}
    for i in range(16):
        p = (i % 8) // 4
        c = i % 4
        cpus[i] = (p, core_ids[p][c], [i % 8, i % 8 + 8])
    core = lambda cpu: [cpu % 8, cpu % 8 + 8]
    socket = lambda cpu: [x for x in range(16) if (x % 8) // 4 == (cpu % 8) // 4]
    caches = [
        (1, "Data", "32K", 8, core),
        (1, "Instruction", "32K", 8, core),
        (2, "Unified", "1024K", 16, core),
        (3, "Unified", "16896K", 11, socket),
    ]
    cpuinfo = [("vendor_id", "GenuineIntel"), ("cpu family", "6"), ("model", "85"),
               ("model name", "Intel(R) Xeon(R) Gold 5222 CPU @ 3.80GHz"), ("stepping", "7"),
               ("cpu MHz", "3800.000"), ("cache size", "16896 KB"), ("siblings", "8"),
               ("cpu cores", "4")]
    # 48 GiB per node = 12582912 pages; node 0 has 2 GiB below 4 GiB less firmware holes.
    node_pages = 12582912
    dma, dma32 = 3998, 486400
    normal0 = node_pages - dma - dma32
    memmap = node_pages // 64
    zones = [
        (0, "DMA", 4095, dma, 3840),
        (0, "DMA32", 1044480, dma32, 470000),
        (0, "Normal", 12582912, normal0, normal0 - memmap - 30000),
        (0, "Movable", 0, 0, 0),
        (1, "DMA", 0, 0, 0),
        (1, "DMA32", 0, 0, 0),
        (1, "Normal", node_pages, node_pages, node_pages - memmap - 8000),
        (1, "Movable", 0, 0, 0),
    ]
    managed = {0: 3840 + 470000 + normal0 - memmap - 30000, 1: node_pages - memmap - 8000}
    node_kb = {n: m * 4 for n, m in managed.items()}
    machine("intel-xeon-gold-5222-2s", cpus, caches,
            {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12, 13, 14, 15]}, cpuinfo,
            meminfo_kb=sum(node_kb.values()), node_meminfo_kb=node_kb,
            cpufreq={"base_frequency": 3800000, "cpuinfo_max_freq": 3900000,
                     "cpuinfo_min_freq": 1000000},
            zoneinfo=zoneinfo_text(zones, range(16)))


if __name__ == "__main__":
    ryzen_5900x()
    xeon_gold_5222_2s()

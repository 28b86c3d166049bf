#!/usr/bin/env python3
"""Where pages freed in interrupt context went, from a raw kmem trace (tracefs `trace`).

Behind `record`'s direct frees (`b` lines, src/measure/record/parse.rs): a free in interrupt
context that lands while the interrupted task holds its CPU's pcp lock cannot take it
(pcp_spin_trylock() fails) and goes to the buddy allocator. Such a page comes back through a
refill (mm_page_alloc_zone_locked) without a drain first; a page freed to the lists comes back
through mm_page_alloc from the lists, or is drained (mm_page_pcpu_drain).

For every mm_page_free in interrupt context (the flags' third character s/h/H/z/Z) the script
prints the interrupted task's last kmem event on that CPU, the time since it, and the page's next
event anywhere in the trace ('none': not seen again).

    # with mm_page_alloc, mm_page_free, mm_page_free_batched, mm_page_pcpu_drain and
    # mm_page_alloc_zone_locked enabled while a workload runs:
    cat /sys/kernel/tracing/trace > raw.txt
    tools/direct_free_fates.py raw.txt
"""
import collections
import re
import sys

EVENT = re.compile(
    r'^\s*(\S.*?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+):\s+(\w+):.*?pfn=0x([0-9a-f]+)')


def in_interrupt(flags):
    return len(flags) > 2 and flags[2] in 'shHzZ'


def main(path):
    events = []
    with open(path) as f:
        for line in f:
            m = EVENT.match(line)
            if m:
                _, _, cpu, flags, ts, name, pfn = m.groups()
                events.append((int(cpu), flags, name, int(pfn, 16), float(ts)))
    last = {}
    context = {}
    for i, (cpu, flags, name, _, ts) in enumerate(events):
        if not in_interrupt(flags):
            last[cpu] = (name, ts)
        elif name == 'mm_page_free' and cpu in last:
            context[i] = (last[cpu][0], (ts - last[cpu][1]) * 1e6)
    fate = {}
    pending = {}
    for i, (_, _, name, pfn, _) in enumerate(events):
        if pfn in pending:
            fate[pending.pop(pfn)] = name
        if i in context:
            pending[pfn] = i
    table = collections.defaultdict(collections.Counter)
    for i, (prev, gap_us) in context.items():
        band = '<50us' if gap_us < 50 else '>=50us'
        table[(prev, band)][fate.get(i, 'none')] += 1
    print('task\'s last event, time since it: next event of the freed page (count)')
    for key in sorted(table):
        print(f'{key[0]}, {key[1]}: {dict(table[key])}')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

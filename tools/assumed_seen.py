#!/usr/bin/env python3
"""Writes data/assumed-seen.csv: for every assumed constant of src/assumptions.rs and every field
of models/**/*.toml whose source starts with "assumed", the commit that introduced it (`git log
-S`: the constant's identifier, the field's source text) and the validation tables whose data
was in the repository at that commit (the tables visible while the value was chosen).

    tools/assumed_seen.py > data/assumed-seen.csv

Table ids are validate's: the seed threads' tables by thread ("000".."004": visible from the first
commit, since the threads are the source material) and the literature tables (visible from the
commit that added their CSV to data/literature/ or data/lkp/).
"""
import csv
import tomllib
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = ["000", "001", "002", "003", "004"]
LITERATURE = {
    "literature-halbuer": "data/literature/halbuer_2023-02_rmqueue_bulk_zone_lock_alloc_latency_vs_cores.csv",
    "literature-kemiwang": "data/literature/kemiwang_2017-08_numa_counter_threshold_page_bench03_broadwell.csv",
    "literature-jordan": "data/literature/danieljordan_2018-01_pcp_batch310_high1860_will-it-scale_page_fault1.csv",
    "literature-huang": "data/literature/huang_pcp_autotune_series_2023_cover_tables.csv",
    "literature-huang-prose": "data/literature/huang_pcp_series_2023_patch_changelog_prose_numbers.csv",
    "literature-dhama-sweep": "data/literature/nikhil_dhama_amd_2025_free_high_threshold_iperf3_sweep.csv",
    "literature-dhama-multi": "data/literature/nikhil_dhama_amd_2025_free_high_multi_benchmark.csv",
    "literature-lkp": "data/lkp/lkp_netperf_sctp_stream_many_10k_icelake_2022.csv",
}


def git(*args):
    return subprocess.run(["git", *args], cwd=here, check=True, capture_output=True,
                          text=True).stdout


def tables_at(commit, cache={}):
    if commit not in cache:
        files = set(git("ls-tree", "-r", "--name-only", commit, "data/").split())
        # The seed threads' tables were visible from the first commit: the threads are the
        # project's source material, read before anything was written (their CSVs came later).
        seen = THREADS + [t for t, f in LITERATURE.items() if f in files]
        cache[commit] = seen
    return cache[commit]


def walk(path, v, out):
    """(path, table) of every table whose source starts with 'assumed', as src/assumptions.rs
    walks them (keys sorted, as the toml crate's map keeps them; arrays add no index)."""
    if isinstance(v, dict):
        src = v.get("source")
        if isinstance(src, str) and src.startswith("assumed"):
            out.append((path, v))
            return
        for k in sorted(v):
            walk(f"{path}.{k}" if path else k, v[k], out)
    elif isinstance(v, list):
        for x in v:
            walk(path, x, out)


def fields(path):
    """(field id, needle for git log -S) of every assumed field of a model file."""
    with open(os.path.join(here, path), "rb") as f:
        doc = tomllib.load(f)
    found, counts, out = [], {}, []
    walk("", doc, found)
    for p, t in found:
        n = counts.get(p, 0)
        counts[p] = n + 1
        # The longest run of the source without quotes or backslashes: it appears verbatim in
        # the file whatever string syntax the file used.
        needle = max(re.split(r"[\\\"']", t["source"]), key=len)[:120]
        out.append((p if n == 0 else f"{p}#{n}", needle))
    return out


def constants():
    """(name, identifier) of every constant in src/assumptions.rs's registry."""
    text = open(os.path.join(here, "src", "assumptions.rs")).read()
    for name in re.findall(r'name: "([^"]+)"', text):
        yield name, name.rsplit("::", 1)[-1]


def main():
    files = sorted(git("ls-files", "models").split())
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["id", "introduced", "seen_tables"])
    for name, ident in constants():
        # The constant's own module file where there is one (an identifier such as PAIRS also
        # occurs elsewhere); a name not yet in any commit is taken as seeing every table now.
        module = name.split("::")[0] if "::" in name else ""
        paths = [p for p in git("ls-files", "src").split()
                 if module and (p.endswith(f"/{module}.rs") or p.endswith(f"/{module}/mod.rs"))]
        commits = git("log", "--format=%h", "-S", ident, "--", *(paths or ["src"])).split()
        commit = commits[-1] if commits else git("log", "-1", "--format=%h").strip()
        w.writerow([name, commit, " ".join(tables_at(commit))])
    for f in files:
        if not f.endswith(".toml"):
            continue
        for field, needle in fields(f):
            commits = git("log", "--format=%h", "-S", needle, "--", f).split()
            commit = commits[-1] if commits else git("log", "-1", "--format=%h", "--", f).strip()
            w.writerow([f"{f}:{field}", commit, " ".join(tables_at(commit))])


if __name__ == "__main__":
    main()

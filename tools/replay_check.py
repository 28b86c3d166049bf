#!/usr/bin/env python3
"""The checks of `pcpmodel replay` on the host flows (data/host/flows/README.md).

mode `own`: every flow replayed at the setting it was recorded at (the engine against the
kernel on the same stream of allocations and frees). mode `blind`: for each workload, the flow
recorded at the kernel's default (fraction 0) replayed at each other recorded setting
(`replay --against`), its rates per 1000 allocations beside the ones the kernel made at that
setting in the other recording. mode `blind-start`: the same, its lists starting as the other
recording's /proc/zoneinfo showed them before its workload ran (`--start-from-against`): what
earlier work left on the lists is the machine's state, not the workload's. A rate is checked where the recording at that setting counted
at least 100 events of it; the direction (blind rows) is the sign of the change from the
default's recorded rate, replayed against recorded. Where the start decides a setting, a blind
replay also gives the rate from empty lists (`empty_lists`); `within_band` says whether the
recorded rate lies between the two ends, widened by 10 % (empty when the two starts agree).
`change_resolved` says whether the kernel's change from the default is larger than twice its
counting noise (a rate from N counts is uncertain by rate / sqrt(N)): a change of 3 refills in
25 is not one the recordings can tell, so its direction is no test of the replay.

    tools/replay_check.py [FLOWDIR] > check.csv
"""
import csv
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.environ.get("PCPMODEL", os.path.join(here, "target", "release", "pcpmodel"))
flows = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "data", "host", "flows", "sweep-typed-2026-12-06")
RATES = {
    "refills per 1000 allocations": "refills",
    "drains per 1000 allocations": "drains",
    "drains on an order 1-3 free per 1000 allocations": "drains on an order 1-3 free",
}


def replay(*args):
    out = subprocess.run([binary, "replay", *args, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def counts(d):
    """Recorded event counts of a replay at its own setting, by rate name."""
    tot = {"refills": 0, "drains": 0, "drains on an order 1-3 free": 0}
    for p in d["pagesets"]:
        r = p["recorded"]
        tot["refills"] += r["refills"]
        tot["drains"] += r["drains"]
        tot["drains on an order 1-3 free"] += r["drains_on_high_order_free"]
    return tot


def main():
    names = sorted(f for f in os.listdir(flows) if f.endswith(".flow.gz"))
    workloads = sorted({n.rsplit("-f", 1)[0] for n in names})
    w = csv.writer(sys.stdout)
    w.writerow(["mode", "workload", "fraction", "quantity", "recorded_default", "recorded", "replayed",
                "diff_pct", "recorded_count", "checked", "within_10pct", "direction_right",
                "empty_lists", "within_band", "change_resolved"])
    for wl in workloads:
        base = os.path.join(flows, f"{wl}-f0.flow.gz")
        if not os.path.exists(base):
            continue
        default_replay = replay(base)
        at_default = {q["name"]: q for q in default_replay["quantities"]}
        n_default = counts(default_replay)
        fractions = sorted(int(n.rsplit("-f", 1)[1].split(".")[0]) for n in names
                           if n.startswith(wl + "-f"))
        for f in fractions:
            other = os.path.join(flows, f"{wl}-f{f}.flow.gz")
            own = replay(other)
            n = counts(own)
            mine = {q["name"]: q for q in own["quantities"]}
            for name, short in RATES.items():
                rec, rep = mine[name]["recorded"], mine[name]["replayed"]
                diff = (rep - rec) / rec * 100 if rec else None
                checked = n[short] >= 100
                within = checked and diff is not None and abs(diff) <= 10
                w.writerow(["own", wl, f, short, "", f"{rec:.4g}", f"{rep:.4g}",
                            "" if diff is None else f"{diff:+.1f}", n[short], int(checked),
                            int(within), "", "", "", ""])
            if f == 0:
                continue
            for mode, extra in (("blind", []), ("blind-start", ["--start-from-against"])):
                blind_rows(w, wl, f, n, n_default, at_default, mode,
                           replay(base, "--against", other, *extra)["quantities"])


def blind_rows(w, wl, f, n, n_default, at_default, mode, quantities):
    blind = {q["name"]: q for q in quantities}
    for name, short in RATES.items():
        q = blind[name]
        rec, rep = q["recorded"], q["replayed"]
        d0 = at_default[name]["recorded"]
        diff = (rep - rec) / rec * 100 if rec else None
        checked = n[short] >= 100
        within = checked and diff is not None and abs(diff) <= 10
        sign = lambda x: 0 if abs(x) < 1e-12 else (1 if x > 0 else -1)
        direction = sign(rep - d0) == sign(rec - d0) or (
            abs(rec - d0) <= 0.1 * max(d0, 1e-9) and abs(rep - d0) <= 0.1 * max(d0, 1e-9))
        empty = blind.get(name + ", from empty lists")
        band = ""
        if empty is not None:
            lo, hi = sorted((rep, empty["replayed"]))
            band = int(checked and 0.9 * lo <= rec <= 1.1 * hi)
        noise = 2 * ((rec * rec / max(n[short], 1)) + (d0 * d0 / max(n_default[short], 1))) ** 0.5
        resolved = int(abs(rec - d0) > noise)
        w.writerow([mode, wl, f, short, f"{d0:.4g}", f"{rec:.4g}", f"{rep:.4g}",
                    "" if diff is None else f"{diff:+.1f}", n[short], int(checked),
                    int(within), int(direction),
                    "" if empty is None else f"{empty['replayed']:.4g}", band, resolved])


if __name__ == "__main__":
    main()

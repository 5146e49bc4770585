#!/usr/bin/env python3
"""Writes expect/json/*: what HF's save_metrics (json.dumps(d, indent=4, sort_keys=True)) writes
for the golden inputs, as the reference for --json-dir and the JSON writer."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def groups(doc):
    """The documented grouping, written independently of the C code."""
    names = []
    for s in doc["stages"]:
        if s["name"] not in names:
            names.append(s["name"])
    per, fold, proc = {n: {} for n in names}, {}, {}
    for k, v in doc["metrics"].items():
        if k.startswith("process_"):
            proc[k] = v
            continue
        match = [n for n in names if k.startswith(n + "_")]
        best = max(match, key=len) if match else None
        if k.startswith("before_init_") or best in (None, "init"):
            fold[k] = v
        else:
            per[best][k] = v
    out = [(n, per[n]) for n in names if per[n] and n != "init"]
    if fold:
        if out:
            out[0][1].update(fold)
        else:
            out.append(("init", fold))
    if proc:
        out.append(("process", proc))
    return out


def dump(path, d):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(d, indent=4, sort_keys=True))


def results(name, inputs, existing=None):
    for sub, inp in inputs:
        doc = json.load(open(os.path.join(HERE, "in", inp)))
        base = os.path.join(HERE, "expect", "json", name, sub)
        for stage, keys in groups(doc):
            dump(os.path.join(base, stage + "_results.json"), keys)
        allr = json.load(open(os.path.join(HERE, "in", existing))) if existing else {}
        allr.update(doc["metrics"])
        dump(os.path.join(base, "all_results.json"), allr)


def combined(docs):
    """The whole job's keys (doc/format.md, --json-dir), written independently of the C code: each
    process's timeline as a step function on one clock (its start_time less the earliest), a forked
    child's CPU above what it inherited, back to 0 at its end_time; summed, the sum's peak read
    after every step of one instant."""
    origin = min(d["start_time"] for d in docs)
    devices = sorted({s["device"] for d in docs for s in d.get("timeline", {}).get("series", [])
                      if s["component"] == "gpu"})
    def own_rank(d):  # a rank, not a worker that inherited its parent's
        return "rank" in d and not any(p["pid"] == d["ppid"] and p.get("rank") == d["rank"] for p in docs)

    ranks = [d["rank"]["rank"] for d in docs if own_rank(d)]

    def label(d):
        if own_rank(d) and ranks.count(d["rank"]["rank"]) == 1:
            return "rank%d" % d["rank"]["rank"]
        return "pid%d" % d["pid"]

    out = {}
    for comp, dev in [("cpu", None)] + [("gpu", x) for x in devices]:
        steps, with_ = [], []
        for i, d in enumerate(docs):
            pts = [s["points"] for s in d.get("timeline", {}).get("series", [])
                   if s["component"] == comp and (dev is None or s["device"] == dev)]
            if not pts:
                continue
            with_.append(i)
            base = d["metrics"].get("inherited_mem_cpu", 0) if comp == "cpu" and d.get("forked") else 0
            shift = d["start_time"] - origin
            last = shift
            for t, v in pts[0]:
                last = shift + t
                steps.append((last, max(v - base, 0), i))
            if d["end_time"] - origin > last:
                steps.append((d["end_time"] - origin, 0, i))
        if len(with_) < 2:
            continue
        steps.sort(key=lambda s: s[0])
        now, own, peak, at, held = [0] * len(docs), [0] * len(docs), 0, 0.0, None
        for t in sorted({s[0] for s in steps}):
            for _, v, i in (s for s in steps if s[0] == t):
                now[i] = v
                own[i] = max(own[i], v)
            if sum(now) > peak:
                peak, at, held = sum(now), t, list(now)
        name = "cpu" if comp == "cpu" else "gpu%d" % dev
        out["job_mem_%s_peak" % name] = peak
        out["job_mem_%s_peak_at" % name] = round(at, 6)
        out["job_mem_%s_peak_within" % name] = round(sum(max(1048576, o / 100) for o in own if o > 0))
        out["job_mem_%s_own_peaks_sum" % name] = sum(own)
        for i in with_:
            out["job_mem_%s_peak_%s" % (name, label(docs[i]))] = held[i]
    return out


def job(name, mode_dirs, inputs):
    """--json-dir over one run's files: a directory per process, and the whole job's keys."""
    results(name, mode_dirs)
    keys = combined([json.load(open(os.path.join(HERE, "in", inp))) for inp in inputs])
    base = os.path.join(HERE, "expect", "json", name)
    dump(os.path.join(base, "job_results.json"), keys)
    dump(os.path.join(base, "all_results.json"), keys)


results("seed", [("", "seed.json")])
results("widths", [("", "widths.json")])
results("update", [("", "seed.json")], existing="all_results-existing.json")
results("ranks", [("rank0", "rank0.json"), ("rank1", "rank1.json")])
# A snapshot: open stages' numbers so far are not results; eval's last finished call is.
results("died", [("", "died.json")])
# One run's processes over time (issue 42): the whole job's combined peaks beside each one's results.
WHOLEJOB = ["job-parent.json", "job-forked.json", "job-spawned.json"]
job("wholejob", [("pid%d" % (6000 + i), f) for i, f in enumerate(WHOLEJOB)], WHOLEJOB)
dump(os.path.join(HERE, "expect", "json", "pyjson.json"),
     json.load(open(os.path.join(HERE, "in", "pyjson.json"))))

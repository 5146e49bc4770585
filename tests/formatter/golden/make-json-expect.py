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


results("seed", [("", "seed.json")])
results("widths", [("", "widths.json")])
results("update", [("", "seed.json")], existing="all_results-existing.json")
results("ranks", [("rank0", "rank0.json"), ("rank1", "rank1.json")])
# A snapshot: open stages' numbers so far are not results; eval's last finished call is.
results("died", [("", "died.json")])
dump(os.path.join(HERE, "expect", "json", "pyjson.json"),
     json.load(open(os.path.join(HERE, "in", "pyjson.json"))))

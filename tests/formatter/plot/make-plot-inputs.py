#!/usr/bin/env python3
"""Writes the --plot test inputs: hand-made metrics files with a timeline (the shim's format,
doc/metrics-format.md), shaped like real runs. Deterministic; run from anywhere."""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
MB = 1 << 20


class Run:
    """Builds one file: series points, stage events and the stages[] entries that match them."""

    def __init__(self, pid, argv, start_time, gpus=0):
        self.pid, self.argv, self.start_time, self.gpus = pid, argv, start_time, gpus
        self.cpu, self.gpu = [], [[] for _ in range(gpus)]
        self.events, self.stages = [], {}
        self.t, self.live, self.glive = 0.0, 60 * MB, [0] * gpus
        self.open = {}

    def point(self, cpu=None, gpu=None, dev=0):
        if cpu is not None:
            self.live = int(cpu)
        if gpu is not None:
            self.glive[dev] = int(gpu)
        self.cpu.append([round(self.t, 6), self.live])
        for d in range(self.gpus):
            self.gpu[d].append([round(self.t, 6), self.glive[d]])
        for s in self.open.values():
            s["peak"] = max(s["peak"], self.live)
            s["gpeak"] = [max(a, b) for a, b in zip(s["gpeak"], self.glive)]

    def begin(self, name):
        self.events.append({"t": round(self.t, 6), "stage": name, "kind": "begin"})
        self.open[name] = {"start": self.t, "begin": self.live, "peak": self.live,
                           "gpeak": list(self.glive), "gbegin": list(self.glive)}
        self.point()

    def end(self, name):
        self.point()
        self.events.append({"t": round(self.t, 6), "stage": name, "kind": "end"})
        o = self.open.pop(name)
        st = self.stages.setdefault(name, {"name": name, "implicit": False, "calls": 0,
                                           "open": False, "closed_at_exit": False, "history": []})
        st["calls"] += 1
        rt = self.t - o["start"]
        cpu = {"begin": o["begin"], "end": self.live, "alloc_delta": self.live - o["begin"],
               "peaked_delta": o["peak"] - self.live, "peak": o["peak"]}
        st.update(start=round(o["start"], 6), runtime=round(rt, 6), cpu=cpu)
        if self.gpus:
            devs = [{"device": d, "begin": o["gbegin"][d], "end": self.glive[d],
                     "alloc_delta": self.glive[d] - o["gbegin"][d],
                     "peaked_delta": o["gpeak"][d] - self.glive[d], "peak": o["gpeak"][d]}
                    for d in range(self.gpus)]
            st["gpu"] = {"begin": sum(o["gbegin"]), "end": sum(self.glive), "peak": max(o["gpeak"]),
                         "alloc_delta": 0, "peaked_delta": 0, "failed_allocs": 0, "devices": devs}
        if len(st["history"]) < 128:
            st["history"].append({"call": st["calls"], "start": round(o["start"], 6),
                                  "runtime": round(rt, 6), "cpu_alloc_delta": cpu["alloc_delta"],
                                  "cpu_peaked_delta": cpu["peaked_delta"]})

    def metrics_file(self, complete=True, **extra):
        peak = max(p[1] for p in self.cpu)
        d = {"format": "memshim-metrics", "version": 1, "complete": complete,
             "reason": "exit" if complete else "signal", "pid": self.pid, "ppid": 1,
             "root_pid": self.pid, "is_child": False, "forked": False, "argv": self.argv,
             "argv_truncated": False, "start_time": self.start_time,
             "end_time": round(self.start_time + self.t, 6), "elapsed": round(self.t, 6),
             "gpu_used": self.gpus > 0, "metrics": {}, "stages": list(self.stages.values()),
             "process": {"cpu": {"peak": peak, "live": self.live}, "mmap_untracked": 0},
             "timeline": {"merges": 0, "points_dropped": 0,
                          "series": [{"component": "cpu", "points": self.cpu}] +
                          [{"component": "gpu", "device": d, "points": self.gpu[d]}
                           for d in range(self.gpus)],
                          "events": self.events, "events_dropped": 0}}
        for s in d["stages"]:
            for k in ("runtime", "calls"):
                d["metrics"][f"{s['name']}_{k}"] = s[k]
        if self.gpus:
            d["process"]["gpu"] = {"peak": max(max(p[1] for p in g) for g in self.gpu),
                                   "live": sum(self.glive),
                                   "devices": [{"device": i, "peak": max(p[1] for p in g),
                                                "live": self.glive[i]}
                                               for i, g in enumerate(self.gpu)]}
        d.update(extra)
        return d


def walk(run, seconds, to, gpu_to=None, steps=20, dev=0):
    """Live memory moving from where it is to TO (and a GPU to GPU_TO) over SECONDS."""
    c0, g0 = run.live, run.glive[dev] if run.gpus else 0
    for i in range(1, steps + 1):
        run.t += seconds / steps
        f = i / steps
        run.point(cpu=c0 + (to - c0) * f + random.uniform(-1, 1) * MB,
                  gpu=None if gpu_to is None else g0 + (gpu_to - g0) * f, dev=dev)


def training(pid, start, gpus, rank=None, eval_peak=0):
    argv = ["/usr/bin/python3", "train.py", "--epochs", "2"]
    r = Run(pid, argv, start, gpus)
    r.point()
    walk(r, 1.5, 110 * MB)
    r.begin("init")
    walk(r, 0.4, 180 * MB, 900 * MB if gpus else None)
    r.end("init")
    r.begin("train")
    for epoch in range(2):
        walk(r, 1.2, 260 * MB, 2400 * MB if gpus else None)
        walk(r, 0.6, 200 * MB, 1600 * MB if gpus else None)
        if epoch == 0:
            r.begin("eval")
            walk(r, 0.5, 240 * MB + eval_peak, 2000 * MB if gpus else None, steps=8)
            walk(r, 0.2, 200 * MB, 1600 * MB if gpus else None, steps=4)
            r.end("eval")
    if gpus > 1:
        walk(r, 0.4, 210 * MB, 1200 * MB, dev=1)
    r.end("train")
    r.begin("eval")
    walk(r, 0.4, 230 * MB, 1900 * MB if gpus else None, steps=8)
    walk(r, 0.2, 200 * MB, 1600 * MB if gpus else None, steps=4)
    r.end("eval")
    r.begin("test")
    walk(r, 0.4, 225 * MB, 1800 * MB if gpus else None, steps=8)
    r.end("test")
    walk(r, 0.3, 120 * MB, 0 if gpus else None, steps=5)
    extra = {}
    if rank is not None:
        extra["rank"] = {"rank": rank, "local_rank": rank, "world_size": 2, "source": "torchrun"}
    return r.metrics_file(**extra)


def snapshot():
    r = Run(6001, ["/usr/bin/python3", "crash.py"], 1796000000.0, gpus=1)
    r.point()
    r.begin("init")
    walk(r, 0.5, 150 * MB, 500 * MB)
    r.end("init")
    r.begin("train")
    walk(r, 2, 400 * MB, 3000 * MB)
    d = r.metrics_file(complete=False, signal=11)
    d["stages"].append({"name": "train", "calls": 0, "open": True, "start": 0.5 + 1.5 / 30,
                        "runtime": 2.0, "cpu": {"peak": 400 * MB}})
    d["stages"][-1]["start"] = r.open["train"]["start"]
    return d


def write(name, d):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(d, f, separators=(",", ":"))
        f.write("\n")


def main():
    random.seed(9)
    write("cpu.json", training(4242, 1796000000.0, 0))
    write("gpu2.json", training(4343, 1796000000.0, 2))
    write("rank0.json", training(7000, 1796000000.0, 1, rank=0))
    write("rank1.json", training(7001, 1796000000.8, 1, rank=1, eval_peak=60 * MB))
    write("snapshot.json", snapshot())


main()

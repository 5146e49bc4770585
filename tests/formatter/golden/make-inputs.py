#!/usr/bin/env python3
"""Writes the golden input metrics files (in/*.json).  Run once; the outputs are committed."""
import json
import os

M = 1048576
HERE = os.path.dirname(os.path.abspath(__file__))


def stage(name, calls=1, start=0.0, runtime=1.0, cpu=(0, 0), hist=None, dropped=0, open_=False,
          needed=None):
    if hist is None:
        hist = [{"call": 1, "start": start, "runtime": runtime,
                 "cpu_alloc_delta": cpu[0], "cpu_peaked_delta": cpu[1]}]
    return {"name": name, "implicit": name == "init", "calls": calls, "open": open_,
            "closed_at_exit": False, "start": start, "runtime": runtime,
            "cpu": {"begin": 0, "end": cpu[0], "alloc_delta": cpu[0], "peaked_delta": cpu[1],
                    "peak": cpu[0] + cpu[1]},
            "max_needed": needed or {"cpu": cpu[0] + cpu[1], "cpu_call": calls, "gpu": 0,
                                     "gpu_call": 0},
            "history": hist, "history_dropped": dropped}


def doc(metrics, stages, pid=4242, **extra):
    d = {"format": "memshim-metrics", "version": 1, "complete": True, "reason": "exit",
         "pid": pid, "ppid": 4200, "root_pid": pid, "is_child": False, "forked": False,
         "argv": ["python3", "train.py"], "argv_truncated": False,
         "start_time": 1764675000.123456, "end_time": 1764675012.654321, "elapsed": 12.530865,
         "gpu_used": False, "metrics": metrics, "stages": stages,
         "process": {"cpu": {"peak": 0, "live": 0}, "mmap_untracked": 0}}
    d.update(extra)
    return d


def write(name, d, raw=None):
    with open(os.path.join(HERE, "in", name), "w") as f:
        f.write(raw if raw is not None else json.dumps(d, indent=2))


def seed():
    m = {"epoch": 1.0,
         "init_mem_cpu_alloc_delta": 2 * M + 123, "init_mem_cpu_peaked_delta": 0,
         "init_mem_gpu_alloc_delta": 230 * M + 5000, "init_mem_gpu_peaked_delta": 0,
         "total_flos": 2285698228224.0,
         "train_mem_cpu_alloc_delta": 55 * M, "train_mem_cpu_peaked_delta": 0,
         "train_mem_gpu_alloc_delta": 692 * M + M - 1, "train_mem_gpu_peaked_delta": 661 * M,
         "train_runtime": 2.311412, "train_samples": 100, "train_samples_per_second": 3.028,
         "eval_bleu": 24.6502, "eval_gen_len": 32.9, "eval_loss": 3.75331,
         "eval_mem_cpu_alloc_delta": 0, "eval_mem_cpu_peaked_delta": 4096,
         "eval_mem_gpu_alloc_delta": 0, "eval_mem_gpu_peaked_delta": 510 * M,
         "eval_runtime": 3.9266, "eval_samples": 100, "eval_samples_per_second": 25.467,
         "test_bleu": 27.146, "test_gen_len": 41.37, "test_loss": 3.6682,
         "test_mem_cpu_alloc_delta": 0, "test_mem_cpu_peaked_delta": 0,
         "test_mem_gpu_alloc_delta": 0, "test_mem_gpu_peaked_delta": 645 * M,
         "test_runtime": 5.1136, "test_samples": 100, "test_samples_per_second": 19.556}
    st = [stage("init", runtime=0.5, cpu=(2 * M + 123, 0)),
          stage("train", start=0.6, runtime=2.311412, cpu=(55 * M, 0)),
          stage("eval", start=3.0, runtime=3.9266, cpu=(0, 4096)),
          stage("test", start=7.0, runtime=5.1136)]
    write("seed.json", doc(m, st, gpu_used=True))
    # Since 2026-12-05: another tool held Python's frame hook twice and gave it back.
    write("hook-lost.json", doc(m, st, gpu_used=True, python_hook_lost=2))


def widths():
    m = {"before_init_mem_cpu": 12 * M + 7,
         "init_mem_cpu_alloc_delta": -(64 * M + 4200), "init_mem_cpu_peaked_delta": 0,
         "init_runtime": 2,
         "train_mem_cpu_alloc_delta": -1, "train_mem_cpu_peaked_delta": M - 1,
         "train_mem_gpu_failed_allocs": 3, "train_runtime": 0.00005, "train_calls": 1,
         "train_extra_mem_cpu_alloc_delta": 1024 * 1024 * M, "train_extra_runtime": 1e16,
         "train_extra_calls": 12, "train_extra_note": "caf\u00e9 ok", "train_extra_flag": True,
         "train_extra_none": None, "train_extra_ratio": 0.00001, "train_extra_big": 12345678901234,
         "train_extra_neg": -0.5, "train_extra_small": 0.1234567,
         "eval_mem_cpu_alloc_delta": 123456789012345, "eval_runtime": 1.0,
         "eval_r\u00e9sum\u00e9": 1.5, "eval_calls": 3,
         "process_mem_cpu_peak": 300 * M + 1, "process_mem_cpu_malloc_peak": 200 * M,
         "process_mem_cpu_mmap_peak": 0, "total_flos": -1.5}
    st = [stage("init"), stage("train"), stage("train_extra"), stage("eval")]
    st[2]["closed_at_exit"] = True
    st[0]["closed_at_exit"] = True   # implicit init: not worth a note
    write("widths.json", doc(m, st))


def snapshot():
    m = {"init_mem_cpu_alloc_delta": 5 * M, "init_mem_cpu_peaked_delta": M, "init_runtime": 0.25,
         "init_calls": 1}
    st = [stage("init", runtime=0.25, cpu=(5 * M, M)),
          stage("train", calls=0, start=0.3, runtime=4.0, hist=[], open_=True),
          stage("eval", calls=0, start=2.0, runtime=1.0, hist=[], open_=True)]
    write("snapshot.json", doc(m, st, complete=False, reason="signal", signal=15))
    st[2]["open"] = False
    write("snapshot-odd.json", doc(m, st, complete=False, reason="snapshot", end_time=1e300))


def calls():
    hist = []
    for i in range(1, 129):
        hist.append({"call": i, "start": i * 0.5, "runtime": 0.1 + (i % 7) * 0.01,
                     "cpu_alloc_delta": (i % 5 - 2) * M, "cpu_peaked_delta": (i % 11) * 4096 * 64})
    m = {"train_mem_cpu_alloc_delta": 0, "train_mem_cpu_peaked_delta": 4096,
         "train_runtime": 0.12, "train_calls": 300}
    st = [stage("train", calls=300, hist=hist, dropped=172,
                needed={"cpu": 7 * M, "cpu_call": 250, "gpu": 0, "gpu_call": 0})]
    write("calls.json", doc(m, st))
    # Since 2026-12-05 a stage has runtime_total: the dump says what all calls took.
    st[0]["runtime_total"] = 36.5
    code = stage("code", calls=8243, runtime=0.000033, hist=hist[:1], dropped=8242)
    code["runtime_total"] = 24.93
    m.update({"code_mem_cpu_alloc_delta": 0, "code_mem_cpu_peaked_delta": 0, "code_runtime": 0.000033,
              "code_calls": 8243})
    write("calls-total.json", doc(m, st + [code]))
    ghist = [{"call": i, "start": i * 1.0, "runtime": 0.25 * i, "cpu_alloc_delta": i * M,
              "cpu_peaked_delta": 0, "gpu_alloc_delta": (3 - i) * 256 * M,
              "gpu_peaked_delta": i * 512 * M} for i in (1, 2, 3)]
    gm = {"eval_mem_cpu_alloc_delta": 3 * M, "eval_mem_cpu_peaked_delta": 0,
          "eval_mem_gpu_alloc_delta": 0, "eval_mem_gpu_peaked_delta": 1536 * M,
          "eval_mem_gpu_failed_allocs": 0, "eval_runtime": 0.75, "eval_calls": 3}
    gst = [stage("eval", calls=3, hist=ghist,
                 needed={"cpu": 3 * M, "cpu_call": 3, "gpu": 1536 * M, "gpu_call": 3})]
    write("calls-gpu.json", doc(gm, gst, gpu_used=True))


def ranks():
    for r, pid, a, t in ((1, 5002, 70 * M, 2.5), (0, 5001, 55 * M, 2.25), (2, 5003, 60 * M, 2.0)):
        m = {"init_mem_cpu_alloc_delta": (r + 1) * M, "train_mem_cpu_alloc_delta": a,
             "train_mem_cpu_peaked_delta": r * M, "train_runtime": t, "train_calls": 1,
             "process_mem_cpu_peak": a + 100 * M}
        if r == 2:
            m["eval_runtime"] = 0.75
            m["eval_mem_cpu_alloc_delta"] = 3 * M
        st = [stage("init"), stage("train")] + ([stage("eval")] if r == 2 else [])
        rank = {"rank": r, "local_rank": r, "world_size": 3, "source": "torchrun"}
        write("rank%d.json" % r, doc(m, st, pid=pid, rank=rank))
    m = {"work_mem_cpu_alloc_delta": 2 * M, "work_runtime": 0.5, "work_calls": 1}
    write("child.json", doc(m, [stage("work")], pid=5100, ppid=5001, root_pid=5001,
                            is_child=True, forked=True))


def diffs():
    old = {"train_mem_cpu_alloc_delta": 100 * M, "train_mem_cpu_peaked_delta": 10 * M,
           "train_runtime": 2.0, "train_calls": 1, "eval_mem_cpu_alloc_delta": 0,
           "eval_mem_cpu_peaked_delta": -50 * M, "eval_loss": 0.5, "removed_mem_cpu_x": 1,
           "process_mem_cpu_peak": 400 * M, "tag": "a"}
    new = {"train_mem_cpu_alloc_delta": 104 * M, "train_mem_cpu_peaked_delta": 12 * M,
           "train_runtime": 2.5, "train_calls": 1, "eval_mem_cpu_alloc_delta": 0,
           "eval_mem_cpu_peaked_delta": -40 * M, "eval_loss": 0.25, "added_mem_cpu_x": 5 * M,
           "process_mem_cpu_peak": 399 * M, "tag": "b"}
    st = [stage("train"), stage("eval")]
    write("old.json", doc(old, st))
    write("new.json", doc(new, st, pid=4343))
    same = dict(old)
    same["train_mem_cpu_alloc_delta"] = 104 * M   # +4%: under 5%, over 3MB
    write("same.json", doc(same, st, pid=4444))


def small():
    write("initonly.json", doc({"init_mem_cpu_alloc_delta": M, "init_runtime": 0.1},
                               [stage("init")]))
    write("nostages.json", doc({"epoch": 2.0, "note": "x"}, []))
    write("empty-metrics.json", doc({}, []))


def bad():
    good = doc({"train_runtime": 1.0}, [stage("train")])
    write("truncated.json", None, json.dumps(good, indent=2)[:200])
    write("notjson.json", None, "memshim metrics, honest\n")
    write("empty.json", None, "")
    write("array.json", None, "[1, 2]\n")
    for name, change in (("wrong-format", {"format": "other-metrics"}),
                         ("newer-version", {"version": 2}),
                         ("zero-version", {"version": 0}),
                         ("metrics-not-object", {"metrics": [1]})):
        d = dict(good)
        d.update(change)
        write(name + ".json", d)
    for key in ("format", "version", "pid", "metrics", "stages"):
        d = dict(good)
        del d[key]
        write("no-" + key + ".json", d)
    d = dict(good)
    d["stages"] = [{"calls": 1}]
    write("stage-no-name.json", d)


def span(alloc, peaked, begin=0):
    return {"begin": begin, "end": begin + alloc, "alloc_delta": alloc, "peaked_delta": peaked,
            "peak": begin + alloc + peaked}


def died():
    """A run killed by SIGTERM inside train (no call of it finished), inside its third eval."""
    m = {"before_init_mem_cpu": 3 * M, "init_mem_cpu_alloc_delta": 40 * M,
         "init_mem_cpu_peaked_delta": 2 * M, "init_mem_gpu_alloc_delta": 0,
         "init_mem_gpu_peaked_delta": 0, "init_mem_gpu_failed_allocs": 0, "init_runtime": 1.5,
         "init_calls": 1,
         "eval_mem_cpu_alloc_delta": M, "eval_mem_cpu_peaked_delta": 6 * M,
         "eval_mem_gpu_alloc_delta": 0, "eval_mem_gpu_peaked_delta": 200 * M,
         "eval_mem_gpu_failed_allocs": 0, "eval_runtime": 0.5, "eval_calls": 2,
         "before_init_mem_gpu": 0, "process_mem_cpu_peak": 900 * M,
         "process_mem_cpu_malloc_peak": 700 * M, "process_mem_cpu_mmap_peak": 200 * M,
         "process_mem_gpu_peak": 3000 * M, "process_mem_gpu_managed_peak": 0,
         "process_mem_gpu_pinned_peak": 0}
    init = stage("init", runtime=1.5, cpu=(40 * M, 2 * M))
    init["gpu"] = dict(span(0, 0), failed_allocs=0)
    train = stage("train", calls=0, start=1.5, runtime=95.25, cpu=(820 * M, 37 * M), hist=[],
                  open_=True, needed={"cpu": 0, "cpu_call": 0, "gpu": 0, "gpu_call": 0})
    train["gpu"] = dict(span(2500 * M, 500 * M), failed_allocs=1)
    hist = [{"call": i, "start": 10.0 * i, "runtime": 0.5, "cpu_alloc_delta": M,
             "cpu_peaked_delta": 6 * M, "gpu_alloc_delta": 0, "gpu_peaked_delta": 200 * M}
            for i in (1, 2)]
    ev = stage("eval", calls=2, start=30.0, runtime=0.25, cpu=(3 * M, 0), hist=hist, open_=True,
               needed={"cpu": 7 * M, "cpu_call": 1, "gpu": 200 * M, "gpu_call": 1})
    ev["gpu"] = dict(span(64 * M, 100 * M), failed_allocs=0)
    write("died.json", doc(m, [init, train, ev], gpu_used=True, complete=False, reason="signal",
                           signal=15))

    # Rank 1 of the ranks() run, killed inside train before its first call finished.
    m = {"init_mem_cpu_alloc_delta": 2 * M, "process_mem_cpu_peak": 180 * M}
    tr = stage("train", calls=0, start=1.0, runtime=1.25, cpu=(75 * M, 4 * M), hist=[],
               open_=True)
    write("rank1-open.json", doc(m, [stage("init"), tr], pid=5002, complete=False,
                                 reason="signal", signal=9,
                                 rank={"rank": 1, "local_rank": 1, "world_size": 3,
                                       "source": "torchrun"}))


def launchers():
    """What a pyenv shim or a launcher leaves beside the real program: processes that opened no
    stage of their own (only the implicit init) and stayed small, and a torchrun agent."""
    def small(name, pid, ppid, argv, peak, child=True, root=5000):
        m = {"init_mem_cpu_alloc_delta": peak // 2, "init_mem_cpu_peaked_delta": 4096,
             "init_runtime": 0.002, "init_calls": 1, "before_init_mem_cpu": 70000,
             "process_mem_cpu_peak": peak, "process_mem_cpu_malloc_peak": peak,
             "process_mem_cpu_mmap_peak": 0}
        write(name, doc(m, [stage("init", cpu=(peak // 2, 4096))], pid=pid, ppid=ppid,
                        root_pid=root, is_child=child, forked=False, argv=argv))
    small("timeout.json", 5000, 4999, ["timeout", "600", "torchrun", "train.py"], 90000, False)
    small("shell1.json", 5010, 5000, ["/bin/bash", "/home/u/.pyenv/shims/python"], 300000)
    small("shell2.json", 5011, 5010, ["/bin/bash", "/home/u/.pyenv/libexec/pyenv"], 15 * M)
    # A small script's spawned pool worker peaked above the script: the script, the command the
    # run started, still leads.
    small("pool-main.json", 5100, 1, ["python", "pools.py"], 6 * M, False, root=5100)
    small("pool-worker.json", 5101, 5100, ["python", "-c", "from multiprocessing.spawn import spawn_main; "
          "spawn_main(tracker_fd=5, pipe_handle=7)", "--multiprocessing-fork"], 9 * M, root=5100)
    agent = {"init_mem_cpu_alloc_delta": 60 * M, "init_mem_cpu_peaked_delta": 5 * M,
             "init_runtime": 30.5, "init_calls": 1, "before_init_mem_cpu": 100000,
             "process_mem_cpu_peak": 66 * M, "process_mem_cpu_malloc_peak": 20 * M,
             "process_mem_cpu_mmap_peak": 46 * M}
    write("agent.json", doc(agent, [stage("init", runtime=30.5, cpu=(60 * M, 5 * M))], pid=4999,
                            ppid=1, root_pid=4999, argv=["python3", "-m", "torchrun", "train.py"]))
    # A DataLoader worker forked by rank 0: it inherits the rank but is not a rank of its own.
    w = {"train_mem_cpu_alloc_delta": 5 * M, "train_runtime": 2.0, "train_calls": 1,
         "process_mem_cpu_peak": 150 * M}
    write("rank0-worker.json", doc(w, [stage("train")], pid=5050, ppid=5001, root_pid=4999,
                                   is_child=True, forked=True,
                                   rank={"rank": 0, "local_rank": 0, "world_size": 3,
                                         "source": "torchrun"}))


def runs():
    """Two runs of two ranks each, with their torchrun agent, one directory per run."""
    for run, base, grow in (("run-old", 6000, 0), ("run-new", 7000, 30 * M)):
        os.makedirs(os.path.join(HERE, "in", run), exist_ok=True)
        agent = {"init_mem_cpu_alloc_delta": 60 * M, "init_runtime": 20.0, "init_calls": 1,
                 "process_mem_cpu_peak": 66 * M}
        write(run + "/memshim_%d.json" % base,
              doc(agent, [stage("init", runtime=20.0)], pid=base, ppid=1, root_pid=base))
        for r in (0, 1):
            a = (100 + 10 * r) * M + (grow if r == 1 else 0)
            m = {"init_mem_cpu_alloc_delta": 50 * M, "init_runtime": 2.0, "init_calls": 1,
                 "train_mem_cpu_alloc_delta": a, "train_mem_cpu_peaked_delta": 20 * M,
                 "train_runtime": 10.0 + r, "train_calls": 1,
                 "process_mem_cpu_peak": a + 80 * M}
            write(run + "/memshim_%d.json" % (base + 1 + r),
                  doc(m, [stage("init"), stage("train")], pid=base + 1 + r, ppid=base,
                      root_pid=base, is_child=True,
                      rank={"rank": r, "local_rank": r, "world_size": 2, "source": "torchrun"}))
    with open(os.path.join(HERE, "in", "run-old", "all_results.json"), "w") as f:
        f.write('{"train_loss": 1.5}')   # not a metrics file: a directory diff skips it


def csv_odd():
    """A stage name that needs quoting in CSV: a comma, quotes and a line break."""
    name = 'odd, "quoted"\nname'
    m = {name + "_mem_cpu_alloc_delta": M, name + "_runtime": 0.5, name + "_calls": 1}
    write("csv-odd.json", doc(m, [stage(name, cpu=(M, 0))], pid=4343))


RATE = 524288
SITES = {"rate": RATE, "samples": 1234, "gpu_allocations": 10, "stacks": 321, "stacks_dropped": 0,
         "samples_dropped": 0,
         "python_frames": True, "max_frames": 64, "lag_fraction": 0.02}


def site(mib, frames, samples=None):
    b = int(mib * M)
    return {"bytes": b, "samples": samples if samples is not None else b // RATE, "frames": frames}


def sites():
    """Call sites at the stages' peaks (issue 16): 60/30/10 MiB from three functions in train, small
    ones after them, two GPU sites; eval had nothing live; init one native site."""
    py = ["<module> (fixture.py:70)", "_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)",
          "Py_RunMain+0x9e (libpython3.11.so.1.0)", "__libc_start_call_main+0x7a (libc.so.6)"]
    train = [site(60, ["alloc_a (fixture.py:12)", "build (fixture.py:40)", "main (fixture.py:60)"] + py),
             site(30, ["alloc_b (fixture.py:18)", "build (fixture.py:41)", "main (fixture.py:60)",
                       py[0]]),
             site(10, ["_ZNSt6vectorIfSaIfEE7reserveEm+0x4c (libfoo.so)",  # shown demangled
                       "run_big+0x1a (libfoo.so)", "main (fixture.py:62)", py[0]])]
    for k, n in enumerate((3, 2, 2, 1, 1, 1, 1, 1, 1)):
        train.append(site(n / 2, ["0x7f3a12c0%02x (libtorch_cpu.so)" % k,
                                  "helper_%d (util.py:%d)" % (k, 10 + k), "main (fixture.py:63)"]))
    gpu = [site(1536, ["cuMemAlloc_v2 (libcuda.so.1)",
                       "c10::cuda::CUDACachingAllocator::malloc+0x1b2 (libc10_cuda.so)",
                       "forward (model.py:88)", "train_step (train.py:40)"], 3),
           site(512, ["cuMemAlloc_v2 (libcuda.so.1)", "load_weights (model.py:20)"], 1)]
    m = {"init_mem_cpu_alloc_delta": 40 * M, "init_mem_cpu_peaked_delta": 2 * M, "init_runtime": 0.5,
         "init_calls": 1, "train_mem_cpu_alloc_delta": 100 * M, "train_mem_cpu_peaked_delta": 50 * M,
         "train_mem_gpu_alloc_delta": 2048 * M, "train_mem_gpu_peaked_delta": 0, "train_runtime": 4.5,
         "train_calls": 1, "eval_mem_cpu_alloc_delta": 0, "eval_mem_cpu_peaked_delta": 0,
         "eval_mem_gpu_alloc_delta": 0, "eval_mem_gpu_peaked_delta": 0, "eval_runtime": 0.25,
         "eval_calls": 1, "process_mem_cpu_peak": 192 * M, "process_mem_gpu_peak": 2048 * M}
    init = stage("init", runtime=0.5, cpu=(40 * M, 2 * M))
    init.update(peak_sites=[site(2, ["_dl_map_object+0x2f1 (ld-linux-x86-64.so.2)",
                                     "dlopen+0x48 (libc.so.6)"])],
                peak_sites_lag=0, peak_sites_gpu=[], peak_sites_gpu_lag=0)
    tr = stage("train", start=0.5, runtime=4.5, cpu=(100 * M, 50 * M))
    tr["cpu"]["begin"] = 42 * M
    tr["cpu"]["peak"] = 192 * M
    tr["gpu"] = dict(span(2048 * M, 0), failed_allocs=0)
    tr.update(peak_sites=train, peak_sites_lag=1500000, peak_sites_gpu=gpu, peak_sites_gpu_lag=0)
    ev = stage("eval", start=5.0, runtime=0.25)
    ev["gpu"] = dict(span(0, 0, 2048 * M), failed_allocs=0)
    ev.update(peak_sites=[], peak_sites_lag=0, peak_sites_gpu=[], peak_sites_gpu_lag=0)
    write("sites.json", doc(m, [init, tr, ev], gpu_used=True, sites=SITES))

    # Two ranks: rank 1 peaked higher and its stack table overflowed; rank 0 was killed in train.
    for r, pid, peak in ((0, 8001, 120 * M), (1, 8002, 180 * M)):
        rank = {"rank": r, "local_rank": r, "world_size": 2, "source": "torchrun"}
        sites_r = dict(SITES, stacks_dropped=2 + r, samples_dropped=5 * r)
        tr = stage("train", calls=r, start=1.0, runtime=3.0, cpu=(peak - 20 * M, 0),
                   open_=r == 0)
        tr["peak_sites"] = [site(peak / M - 30, ["make_batch (data.py:%d)" % (30 + r),
                                                 "train (train.py:12)"]),
                            site(10, ["embed (model.py:7)", "train (train.py:14)"])]
        tr["peak_sites_lag"] = 2 * M * r
        m = {"init_mem_cpu_alloc_delta": 20 * M, "init_runtime": 1.0, "init_calls": 1,
             "process_mem_cpu_peak": peak}
        if r == 1:
            m.update(train_mem_cpu_alloc_delta=peak - 20 * M, train_runtime=3.0, train_calls=1)
        extra = {"complete": False, "reason": "signal", "signal": 15} if r == 0 else {}
        write("sites-rank%d.json" % r, doc(m, [stage("init"), tr], pid=pid, ppid=8000, root_pid=8000,
                                           is_child=True, rank=rank, sites=sites_r, **extra))


def xsite(mib, frames, exact_mib=0, others=None, samples=None):
    """An entry as the shim writes it since issue 24: exact_bytes, locations (not read here)."""
    e = site(mib, frames, samples)
    e["exact_bytes"] = int(exact_mib * M)
    e["locations"] = [None if "(/" in f or f.startswith("(") else [0, 4096 + k]
                      for k, f in enumerate(frames)]
    if others is not None:
        e["other_stacks"] = others
    return e


def sites_added():
    """Issue 24's lists: what each stage added (peak_sites) apart from what it inherited
    (peak_sites_before), a closing entry for the stacks not kept, exact_bytes; a PyTorch-like stack
    whose user line sits under native frames. train needed 42 MiB (40 + 2) while 64 MiB from
    before stayed live; eval added nothing."""
    interp = ["_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)",
              "_PyFunction_Vectorcall+0x6c (libpython3.11.so.1.0)"]
    outer = ["main (/home/u/train.py:60)"] + interp[:1] + [
        "<module> (/home/u/train.py:70)", "Py_RunMain+0x9e (libpython3.11.so.1.0)",
        "__libc_start_call_main+0x7a (libc.so.6)"]
    step40 = ["train_step (/home/u/train.py:40)"] + interp
    torch = ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "_ZN2at6detail9empty_cpuEv+0x2a (libtorch_cpu.so)",
             "_ZN2at6native5zerosEv+0x51 (libtorch_cpu.so)", "_ZN2at4_ops5zeros4callEv+0x33 (libtorch_cpu.so)",
             "0x7f3a12c0f0 (libtorch_cpu.so)"]
    train = [xsite(2, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "forward (/home/u/model.py:14)"] +
                   step40 + outer, 0),
             xsite(30, torch + ["forward (/home/u/model.py:12)"] + interp + step40 + outer, 30),
             xsite(10, ["PyDataMem_UserNEW+0x5a (_multiarray_umath.cpython-311-x86_64-linux-gnu.so)",
                        "alloc_b (/home/u/data.py:25)", "build (/home/u/data.py:41)",
                        "train_step (/home/u/train.py:41)"] + outer, 10),
             xsite(3, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "forward (/home/u/model.py:12)"] +
                   step40 + outer, 0),
             xsite(1, ["0x7f3a12c0aa (libfoo.so)", "run_big+0x1a (libfoo.so)"], 0),
             xsite(1.5, ["(7 other stacks)"], 0, others=7)]
    blas = xsite(64, ["blas_thread_init+0x6e (libopenblas.so.0)", "gotoblas_init+0x3c (libopenblas.so.0)",
                      "_dl_init+0x82 (ld-linux-x86-64.so.2)"], 64)
    gpu = [xsite(512, ["cuMemAlloc_v2 (libcuda.so.1)", "forward (/home/u/model.py:12)"] + step40, 512,
                 samples=4)]
    m = {"train_mem_cpu_alloc_delta": 40 * M, "train_mem_cpu_peaked_delta": 2 * M,
         "train_mem_gpu_alloc_delta": 512 * M, "train_mem_gpu_peaked_delta": 256 * M,
         "train_runtime": 4.5, "train_calls": 1, "eval_mem_cpu_alloc_delta": 0,
         "eval_mem_cpu_peaked_delta": 0, "eval_runtime": 0.25, "eval_calls": 1,
         "process_mem_cpu_peak": 136 * M, "process_mem_gpu_peak": 768 * M}
    tr = stage("train", start=0.5, runtime=4.5, cpu=(40 * M, 2 * M))
    tr["cpu"].update(begin=94 * M, end=134 * M, peak=136 * M)
    tr["gpu"] = dict(span(512 * M, 256 * M), failed_allocs=0)
    tr.update(peak_sites=train, peak_sites_before=[blas], peak_sites_lag=0, peak_sites_gpu=gpu,
              peak_sites_gpu_before=[], peak_sites_gpu_lag=0)
    ev = stage("eval", start=5.0, runtime=0.25)
    ev["cpu"].update(begin=134 * M, end=134 * M, peak=134 * M)
    ev.update(peak_sites=[], peak_sites_before=[blas], peak_sites_lag=0)
    objects = [{"path": "/usr/lib/libc10.so", "build_id": "4f2a"}, {"path": "/usr/lib/libfoo.so",
                                                                       "build_id": None}]
    write("sites-added.json", doc(m, [tr, ev], gpu_used=True,
                                  sites=dict(SITES, mode="sampled", objects=objects)))
    ex = stage("exact", runtime=1.0, cpu=(10 * M, 0))
    ex.update(peak_sites=[xsite(6, ["alloc_c (/home/u/c.py:3)"], 6),
                          xsite(4, ["alloc_d (/home/u/c.py:9)"], 4)], peak_sites_before=[],
              peak_sites_lag=0)
    write("sites-exact.json", doc({"exact_runtime": 1.0, "exact_calls": 1,
                                   "exact_mem_cpu_alloc_delta": 10 * M,
                                   "exact_mem_cpu_peaked_delta": 0}, [ex],
                                  sites=dict(SITES, mode="exact", objects=[])))
    write("sites-exact-dropped.json", doc({"exact_runtime": 1.0, "exact_calls": 1,
                                           "exact_mem_cpu_alloc_delta": 10 * M,
                                           "exact_mem_cpu_peaked_delta": 0}, [ex],
                                          sites=dict(SITES, mode="exact", objects=[], samples_dropped=1560697,
                                                     stacks_dropped=1560697)))


def sites_lines():
    """Locations the formatter cannot read lines for: an object whose build-id no longer matches
    (the C library, with its line table where its debug file is installed), one that moved, an
    object index past the list and offset 0; every frame as written."""
    train = [xsite(6, ["sh_alloc+0x10 (sh)", "sh_main+0x2a (sh)", "main (/home/u/run.py:3)"], 6),
             xsite(3, ["0x401000 (gone)", "gone_main+0x11 (gone)"], 0),
             xsite(1, ["odd_a+0x1 (sh)", "odd_b+0x2 (sh)", "odd_c+0x3 (sh)"], 0)]
    train[0]["locations"] = [[0, 160330], [0, 160517], None]  # inside __libc_start_main here
    train[1]["locations"] = [[1, 4096], [1, 4200]]
    train[2]["locations"] = [[7, 4096], [1, 0], None]
    m = {"train_mem_cpu_alloc_delta": 10 * M, "train_mem_cpu_peaked_delta": 0, "train_runtime": 1.0,
         "train_calls": 1}
    tr = stage("train", runtime=1.0, cpu=(10 * M, 0))
    tr.update(peak_sites=train, peak_sites_before=[], peak_sites_lag=0)
    objects = [{"path": "/lib/x86_64-linux-gnu/libc.so.6", "build_id": "00ff"}, {"path": "/nonexistent/memshim/gone",
                                                         "build_id": None}]
    write("sites-lines.json", doc(m, [tr], sites=dict(SITES, mode="sampled", objects=objects)))

def sites_exact_stage():
    """MEMSHIM_SITES=exact:train: what train added was recorded allocation by allocation (its
    entries all exact, a row counts allocations), what it found live was sampled; eval stayed
    sampled; some blocks were not recorded (no bound: inside train they may be of any size)."""
    tr = stage("train", runtime=1.0, cpu=(10 * M, 0))
    tr["cpu"].update(begin=20 * M, end=30 * M, peak=30 * M)
    tr.update(peak_sites=[xsite(6, ["alloc_c (/home/u/c.py:3)"], 6, samples=96),
                          xsite(3, ["alloc_d (/home/u/c.py:9)"], 3, samples=48),
                          xsite(1, ["alloc_e (/home/u/c.py:12)"], 1, samples=1)],
              peak_sites_before=[xsite(20, ["load (/home/u/c.py:20)"], 0, samples=40)], peak_sites_lag=0)
    ev = stage("eval", start=1.5, runtime=0.5, cpu=(4 * M, 0))
    ev["cpu"].update(begin=30 * M, end=34 * M, peak=34 * M)
    ev.update(peak_sites=[xsite(4, ["alloc_f (/home/u/c.py:30)"], 0, samples=8)],
              peak_sites_before=[xsite(30, ["load (/home/u/c.py:20)"], 0, samples=60)], peak_sites_lag=0)
    m = {"train_runtime": 1.0, "train_calls": 1, "train_mem_cpu_alloc_delta": 10 * M,
         "train_mem_cpu_peaked_delta": 0, "eval_runtime": 0.5, "eval_calls": 1,
         "eval_mem_cpu_alloc_delta": 4 * M, "eval_mem_cpu_peaked_delta": 0}
    write("sites-exact-stage.json", doc(m, [tr, ev], sites=dict(SITES, mode="sampled", exact_stages=["train"],
                                                                 objects=[], samples_dropped=12)))


def sites_fold():
    """The native fold of --sites: between the library's Python frames the interpreter's own
    frames (libpython, or a python linked statically) are counted, not named."""
    lib = "/v/lib/python3.11/site-packages/torch/"
    pyeval, static = ("_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)",
                      "_PyEval_EvalFrameDefault+0x1d2 (python3.11)")
    train = [xsite(20, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
                        "forward (%snn/modules/linear.py:116)" % lib, pyeval,
                        "PyObject_Call+0x6c (libpython3.11.so.1.0)",
                        "_call_impl (%snn/modules/module.py:1527)" % lib, pyeval,
                        "_PyFunction_Vectorcall+0x6c (libpython3.11.so.1.0)",
                        "forward (/home/u/model.py:12)", pyeval, "train_step (/home/u/train.py:40)",
                        "Py_RunMain+0x9e (libpython3.11.so.1.0)"], 16),
             xsite(8, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "_ZN2at10empty_likeEv+0x2a (libtorch_cpu.so)",
                       "_engine_run_backward (%sautograd/graph.py:768)" % lib, static,
                       "PyObject_Call+0x6c (python3.11)",
                       "_ZN5torch8autograd6python12PythonEngine7executeEv+0x4d (libtorch_python.so)",
                       "backward (%s_tensor.py:521)" % lib, static, "step (/home/u/train.py:44)",
                       static, "main (/home/u/train.py:60)"], 8),
             xsite(2, ["<listcomp> (/usr/lib/python3.11/json/decoder.py:353)", pyeval,
                       "_PyFunction_Vectorcall+0x6c (libpython3.11.so.1.0)",
                       "decode (/usr/lib/python3.11/json/decoder.py:337)", "load (/home/u/cfg.py:9)"], 0)]
    m = {"train_mem_cpu_alloc_delta": 30 * M, "train_mem_cpu_peaked_delta": 0, "train_runtime": 2.0,
         "train_calls": 1, "process_mem_cpu_peak": 40 * M}
    tr = stage("train", runtime=2.0, cpu=(30 * M, 0))
    tr["cpu"].update(begin=10 * M, end=40 * M, peak=40 * M)
    tr.update(peak_sites=train, peak_sites_before=[], peak_sites_lag=0)
    objects = [{"path": "/usr/lib/libc10.so", "build_id": None}]
    write("sites-fold.json", doc(m, [tr], sites=dict(SITES, mode="sampled", objects=objects)))


def sites_odd():
    """Site lists a reader must survive (not schema-valid, so kept out of in/): entries that are
    not sites, out of order, odd frames, odd lags, no peaks."""
    os.makedirs(os.path.join(HERE, "in", "odd"), exist_ok=True)
    st = stage("odd\tstage")
    del st["cpu"]
    st["peak_sites"] = [{"bytes": "many", "frames": ["x"]}, {"bytes": -5, "frames": ["neg"]}, 7,
                        {"bytes": 3 * M, "frames": ["small (a.py:1)"]},
                        {"bytes": 9 * M, "samples": 18, "frames": [1, "", None, "ctl\u0001char"]},
                        {"bytes": 5 * M, "samples": -2},
                        {"bytes": 5 * M, "samples": 10, "frames": ["long_" + "x" * 200 + " (b.py:2)"]},
                        {"bytes": 0.5 * M, "samples": 1, "frames": "not a list"}]
    st["peak_sites_lag"] = -3
    st["peak_sites_gpu"] = {"not": "a list"}
    st2 = stage("empty")
    st2["peak_sites_lag"] = 0
    d = doc({"odd\tstage_runtime": 1.0, "empty_runtime": 1.0}, [st, st2],
            sites={"rate": "fast", "stacks_dropped": 1, "samples_dropped": 1})
    with open(os.path.join(HERE, "in", "odd", "sites-odd.json"), "w") as f:
        f.write(json.dumps(d, indent=2))


def calls_close():
    """Calls that differ: by less than max(1 MiB, 5%) (train: no line), and clearly on the GPU (eval)."""
    m = {"train_mem_cpu_alloc_delta": 2 * M, "train_mem_cpu_peaked_delta": 2 * M,
         "train_runtime": 0.5, "train_calls": 5,
         "eval_mem_cpu_alloc_delta": 0, "eval_mem_cpu_peaked_delta": M,
         "eval_mem_gpu_alloc_delta": 0, "eval_mem_gpu_peaked_delta": 100 * M,
         "eval_mem_gpu_failed_allocs": 0, "eval_runtime": 0.25, "eval_calls": 4}
    st = [stage("train", calls=5, cpu=(2 * M, 2 * M),
                needed={"cpu": 4 * M + 900 * 1024, "cpu_call": 2, "gpu": 0, "gpu_call": 0}),
          stage("eval", calls=4, cpu=(0, M),
                needed={"cpu": M + 100, "cpu_call": 1, "gpu": 612 * M, "gpu_call": 3})]
    write("calls-close.json", doc(m, st, gpu_used=True))


def ended():
    """Issue 39: calls an exception ended.  epoch: 5 calls, Ctrl-C in call 3 and a ValueError in the
    last (its numbers are the flat keys); train: one call, unwound by a C++ exception; step: jumped
    over by a longjmp twice, its last call returned; eval: every call returned."""
    def calls_ended(returned=0, raised=0, unwound=0, jumped=0):
        return {"returned": returned, "raised": raised, "unwound": unwound, "jumped": jumped, "open_at_exit": 0}
    hist = [{"call": i, "start": i * 1.0, "runtime": 0.5, "cpu_alloc_delta": (9 if i in (3, 5) else 1) * M,
             "cpu_peaked_delta": 8 * M, "ended": "raised" if i in (3, 5) else "returned"} for i in range(1, 6)]
    hist[2]["exception"] = "KeyboardInterrupt"
    hist[4]["exception"] = "ValueError"
    m = {"epoch_mem_cpu_alloc_delta": 9 * M, "epoch_mem_cpu_peaked_delta": 8 * M, "epoch_runtime": 0.5,
         "epoch_calls": 5, "train_mem_cpu_alloc_delta": 3 * M, "train_mem_cpu_peaked_delta": 0,
         "train_runtime": 2.0, "train_calls": 1, "step_mem_cpu_alloc_delta": 0,
         "step_mem_cpu_peaked_delta": M, "step_runtime": 0.1, "step_calls": 3,
         "eval_mem_cpu_alloc_delta": 0, "eval_mem_cpu_peaked_delta": 0, "eval_runtime": 0.1, "eval_calls": 2}
    ep = stage("epoch", calls=5, cpu=(9 * M, 8 * M), hist=hist,
               needed={"cpu": 17 * M, "cpu_call": 3, "gpu": 0, "gpu_call": 0})
    ep.update(ended="raised", exception="ValueError", calls_ended=calls_ended(returned=3, raised=2),
              exceptions=["KeyboardInterrupt", "ValueError"])
    tr = stage("train", cpu=(3 * M, 0))
    tr["history"][0]["ended"] = "unwound"
    tr.update(ended="unwound", calls_ended=calls_ended(unwound=1))
    sh = [{"call": i, "start": i * 1.0, "runtime": 0.1, "cpu_alloc_delta": 0, "cpu_peaked_delta": M,
           "ended": "jumped" if i < 3 else "returned"} for i in (1, 2, 3)]
    sp = stage("step", calls=3, cpu=(0, M), hist=sh)
    sp.update(ended="returned", calls_ended=calls_ended(returned=1, jumped=2))
    ev = stage("eval", calls=2)
    ev.update(ended="returned", calls_ended=calls_ended(returned=2))
    write("ended.json", doc(m, [ep, tr, sp, ev]))


def needed():
    """Issue 39: the dump says what each stage needed (alloc + peaked) and how much of the process
    peak was live when init ended; small values read in KB.  needed-init-peak: init itself peaked
    highest (the weights loaded twice over).  train's parts cut to whole MB do not add up (33 + 79
    for 113.4), so its line is in tenths, the larger remainder rounded up: 33.6 + 79.8."""
    TRAIN_KEPT, TRAIN_WENT = int(33.65 * M), int(79.75 * M) + 1000
    m = {"before_init_mem_cpu": 90 * M, "init_mem_cpu_alloc_delta": 6 * M, "init_mem_cpu_peaked_delta": 300 * 1024,
         "init_runtime": 0.13, "init_calls": 1,
         "train_mem_cpu_alloc_delta": TRAIN_KEPT, "train_mem_cpu_peaked_delta": TRAIN_WENT, "train_runtime": 15.9,
         "train_calls": 1, "eval_mem_cpu_alloc_delta": -(2 * M), "eval_mem_cpu_peaked_delta": 10 * M,
         "eval_runtime": 1.0, "eval_calls": 1,
         "process_mem_cpu_peak": 210 * M, "process_mem_cpu_malloc_peak": 150 * M, "process_mem_cpu_mmap_peak": 60 * M,
         "process_mem_cpu_reservations_peak": 0, "process_mem_rss_peak": 250 * M}
    init = stage("init", runtime=0.13, cpu=(6 * M, 300 * 1024))
    init["implicit"] = False
    init["cpu"].update(begin=90 * M, end=96 * M, peak=96 * M + 300 * 1024)
    st = [init, stage("train", start=0.2, runtime=15.9, cpu=(TRAIN_KEPT, TRAIN_WENT)),
          stage("eval", start=16.0, cpu=(-(2 * M), 10 * M))]
    write("needed.json", doc(m, st))
    init["cpu"].update(peak=260 * M)
    m2 = dict(m, process_mem_cpu_peak=260 * M, init_mem_cpu_peaked_delta=164 * M)
    write("needed-init-peak.json", doc(m2, st))


def sites_trainer():
    """Issue 39: a Trainer run's sites all sit inside main's trainer.train(), one call into the
    framework: they lead with the framework's own line that allocated, main's line under it."""
    tf, tc = "/v/lib/python3.11/site-packages/transformers/", "/v/lib/python3.11/site-packages/torch/"
    pyeval = "_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)"
    main = ["main (/home/u/hf_trainer.py:77)", pyeval, "<module> (/home/u/hf_trainer.py:93)"]
    fwd = ["forward (%sactivations.py:62)" % tf, pyeval, "_call_impl (%snn/modules/module.py:1773)" % tc,
           pyeval, "training_step (%strainer.py:3790)" % tf, pyeval, "train (%strainer.py:2325)" % tf, pyeval]
    adam = ["_init_group (%soptim/adam.py:178)" % tc, pyeval, "step (%soptim/adam.py:230)" % tc, pyeval,
            "train (%strainer.py:2325)" % tf, pyeval]
    train = [xsite(32, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)"] + fwd + main, 0),
             xsite(13, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)"] + adam + main, 0),
             xsite(2, ["_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "_ZN2at10empty_likeEv+0x2a (libtorch_cpu.so)"], 0)]
    m = {"train_mem_cpu_alloc_delta": 33 * M, "train_mem_cpu_peaked_delta": 14 * M, "train_runtime": 2.0,
         "train_calls": 1, "process_mem_cpu_peak": 340 * M}
    tr = stage("train", runtime=2.0, cpu=(33 * M, 14 * M))
    tr["cpu"].update(begin=293 * M, end=326 * M, peak=340 * M)
    tr.update(peak_sites=train, peak_sites_before=[], peak_sites_lag=0)
    objects = [{"path": "/usr/lib/libc10.so", "build_id": None}]
    write("sites-trainer.json", doc(m, [tr], sites=dict(SITES, mode="sampled", objects=objects)))


def shared_ranks():
    """Two ranks naming one shared memory segment alike (the same dev and ino), each with the pages
    it touched, and one segment of its own each: --merge says the sums count the shared one twice."""
    for r, pid, touched in ((0, 6001, 24 * M), (1, 6002, 10 * M)):
        m = {"train_mem_cpu_alloc_delta": touched, "train_mem_cpu_peaked_delta": 0, "train_runtime": 1.0,
             "train_calls": 1, "process_mem_cpu_peak": touched + 2 * M,
             "process_mem_cpu_shared_peak": touched + M}
        d = doc(m, [stage("train", cpu=(touched, 0))], pid=pid,
                rank={"rank": r, "local_rank": r, "world_size": 2, "source": "torchrun"})
        d["process"]["shared"] = {
            "peak": touched + M, "live": 0, "read": "resident pages of shared memory mappings in this process (pagemap)",
            "segments": [
                {"kind": "anonymous", "dev": "00:01", "ino": 30, "name": None, "mapped": 0,
                 "mapped_peak": 148 * M, "resident": 0, "peak": touched},
                {"kind": "shm", "dev": "00:1b", "ino": 3600 + r, "name": "/dev/shm/torch_%d_0" % pid,
                 "mapped": 0, "mapped_peak": M, "resident": 0, "peak": M}],
            "segments_dropped": 0}
        write("shared-rank%d.json" % r, d)


def cgroup():
    """The job's memory cgroup: how close it came to its limit (and a group without one). Its
    high-water is above what the process read (the group's, from before it), but in cgroup-own.json,
    where the process read the group's peak itself."""
    G = 1024 * M
    for name, limit, read in (("cgroup.json", 24 * G, 21 * G), ("cgroup-nolimit.json", None, 21 * G),
                              ("cgroup-own.json", 24 * G, int(22.1 * G))):
        peak = int(22.1 * G)
        m = {"train_mem_cpu_alloc_delta": 3 * G, "train_mem_cpu_peaked_delta": 0, "train_runtime": 60.0,
             "train_calls": 1, "process_mem_cpu_peak": 4 * G, "process_mem_rss_peak": 5 * G,
             "process_mem_cgroup_peak": peak}
        tr = stage("train", cpu=(3 * G, 0))
        tr["cgroup"] = {"begin": 2 * G, "end": 20 * G, "peak": 21 * G, "peak_kind": "reads"}
        d = doc(m, [tr])
        d["process"]["cgroup"] = {"version": 2, "path": "/sys/fs/cgroup/job.slice", "usage": 20 * G,
                                  "peak": peak, "peak_read": read, "oom_kills": 0, "oom_kills_at_start": 0,
                                  "peak_kind": "reads", "read": "cgroup v2: memory.current, memory.peak, "
                                  "memory.max, memory.events at boundaries, timeline points and exit"}
        if limit:
            m["process_mem_cgroup_limit"] = limit
            d["process"]["cgroup"]["limit"] = limit
        write(name, d)


def wholejob():
    """One run's processes over time (issue 42): a parent, a child it forked holding 40 MiB it
    inherited, and a spawned worker starting 1 s later; each peaks alone lower than the three
    together at t = 2 s on the common clock, and the own peaks add up to more. The child and the worker used GPU 0."""
    t0 = 1764675000.0

    def proc(name, pid, start, end, cpu, gpu=None, inherited=None, argv=("python3", "job.py")):
        peak = max(v for _, v in cpu)
        m = {"work_mem_cpu_alloc_delta": cpu[-1][1], "work_runtime": end - start, "work_calls": 1,
             "process_mem_cpu_peak": peak - (inherited or 0)}
        series = [{"component": "cpu", "points": [[round(t - start, 6), v] for t, v in cpu]}]
        if gpu:
            series.append({"component": "gpu", "device": 0,
                           "points": [[round(t - start, 6), v] for t, v in gpu]})
        d = doc(m, [stage("work", start=0.0, runtime=end - start)], pid=pid, ppid=6000 if pid != 6000 else 1,
                root_pid=6000, is_child=pid != 6000, forked=inherited is not None, argv=list(argv),
                start_time=t0 + start, end_time=t0 + end, elapsed=end - start, gpu_used=bool(gpu))
        d["timeline"] = {"merges": 0, "points_dropped": 0, "series": series, "events": [],
                         "events_dropped": 0}
        if pid == 6000:  # the limits a plot draws across the stacks
            d["process"]["cgroup"] = {"version": 2, "path": "/sys/fs/cgroup/job.slice", "usage": 150 * M,
                                      "peak": 230 * M, "oom_kills": 0, "oom_kills_at_start": 0,
                                      "peak_kind": "reads", "read": "cgroup v2", "limit": 400 * M}
        if gpu:
            d["process"]["gpu_footprint"] = {"nvml": "absent", "devices": [{"device": 0, "total": 8000 * M}]}
        if inherited is not None:
            m["inherited_mem_cpu"] = inherited
            d["process"]["inherited"] = {"cpu": inherited}
        write(name, d)
    proc("job-parent.json", 6000, 0.0, 4.0, [(0.0, 1 * M), (0.5, 40 * M), (1.5, 100 * M), (1.9, 60 * M),
                                               (3.5, 40 * M)])
    proc("job-forked.json", 6001, 1.0, 3.0, [(1.0, 40 * M), (1.8, 110 * M), (2.6, 45 * M)],
         gpu=[(1.2, 0), (1.9, 3000 * M)], inherited=40 * M)
    proc("job-spawned.json", 6002, 1.0, 3.2, [(1.0, 2 * M), (2.0, 90 * M), (3.0, 10 * M)],
         gpu=[(1.5, 2000 * M), (2.8, 500 * M)],
         argv=("python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"))


def interpreter_launcher():
    """accelerate's one-process launcher: a Python program that runs the interpreter on its last
    arguments (`python accelerate launch --cpu train.py --lr 1` ran `python train.py --lr 1`), and
    held 230 MiB itself; its child's file beside its own."""
    m = {"init_mem_cpu_alloc_delta": 148 * M, "init_mem_cpu_peaked_delta": 82 * M, "init_runtime": 13.0,
         "init_calls": 1, "before_init_mem_cpu": 0, "process_mem_cpu_peak": 230 * M}
    init = stage("init", runtime=13.0, cpu=(148 * M, 82 * M))
    init["closed_at_exit"] = True  # as the shim writes it: open until the exit
    write("accel.json", doc(m, [init], pid=5300, ppid=5290,
                            root_pid=5300, argv=["/venv/bin/python", "/venv/bin/accelerate", "launch",
                                                 "--cpu", "train.py", "--lr", "1"]))
    c = {"init_mem_cpu_alloc_delta": 300 * M, "init_runtime": 10.0, "init_calls": 1,
         "train_mem_cpu_alloc_delta": 2 * M, "train_mem_cpu_peaked_delta": 6 * M, "train_runtime": 0.5,
         "train_calls": 1, "process_mem_cpu_peak": 310 * M}
    write("accel.json.5301", doc(c, [stage("init", runtime=10.0), stage("train", start=10.0, runtime=0.5,
                                                                         cpu=(2 * M, 6 * M))],
                                 pid=5301, ppid=5300, root_pid=5300, is_child=True,
                                 argv=["/venv/bin/python", "train.py", "--lr", "1"],
                                 start_time=1764675001.0))


def sites_reserved():
    """pyarrow's bundled mimalloc (its default pool): a read stage whose need is mostly its
    reservations' touched pages, which have no call sites; 1 MiB of it sampled."""
    rd = stage("read", cpu=(185 * M, 0))
    rd["cpu"]["reservations"] = {"begin": 0, "end": 180 * M, "alloc_delta": 180 * M, "peaked_delta": 0,
                                 "peak": 180 * M, "read": "resident pages (pagemap scan or mincore)"}
    rd.update(peak_sites=[xsite(1, ["arrow::PoolBuffer::Reserve+0x5a (libarrow.so)", "read (pq.py:20)"])],
              peak_sites_before=[], peak_sites_lag=0, peak_sites_gpu=[], peak_sites_gpu_before=[],
              peak_sites_gpu_lag=0)
    m = {"read_mem_cpu_alloc_delta": 185 * M, "read_mem_cpu_peaked_delta": 0, "read_runtime": 1.0,
         "read_calls": 1, "process_mem_cpu_peak": 190 * M}
    write("sites-reserved.json", doc(m, [stage("init"), rd], sites=dict(SITES, mode="sampled")))


if __name__ == "__main__":
    os.makedirs(os.path.join(HERE, "in"), exist_ok=True)
    for f in (seed, widths, snapshot, calls, ranks, diffs, small, bad, died, launchers, runs,
              csv_odd, sites, sites_added, sites_lines, sites_exact_stage, sites_fold, sites_odd, calls_close,
              ended, needed, sites_trainer, shared_ranks, cgroup, wholejob, interpreter_launcher, sites_reserved):
        f()

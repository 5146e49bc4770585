"""check_footprint.py MODE METRICS.json TORCH.json [DUMP.txt]: the footprint memshim read against
nvidia-smi (the same NVML number, so equal within MEMSHIM_GPU_FOOTPRINT_TOLERANCE bytes, 8 MiB: the
MiB it rounds to), and the out-of-memory report of footprint_oom.py's stage "train": recorded, asking
at least what the workload asked, the program gone on, and (with the dump) printed first.
Exit status 1 on any failure."""
import json
import os
import sys

MiB = 1 << 20


def device0(entry):
    for d in (entry or {}).get("devices", []):
        if d.get("device") == 0:
            return d
    return {}


def main():
    mode, metrics_path, torch_path = sys.argv[1:4]
    dump = open(sys.argv[4]).read() if len(sys.argv) > 4 else None
    m, t = json.load(open(metrics_path)), json.load(open(torch_path))
    tol = int(os.environ.get("MEMSHIM_GPU_FOOTPRINT_TOLERANCE", 8 * MiB))
    stages = {s["name"]: s for s in m.get("stages", [])}
    bad = []
    proc = m.get("process", {}).get("gpu_footprint", {})
    if proc.get("nvml") != "ok":
        bad.append(f"NVML: {proc.get('nvml')}")
    fp = device0(stages.get("hold", {}).get("gpu_footprint")).get("footprint")
    smi = t.get("smi_used_mib")
    if fp is None or smi is None:
        bad.append(f"footprint {fp}, nvidia-smi {smi} MiB: one is missing")
    elif abs(fp - smi * MiB) > tol:
        bad.append(f"footprint {fp / MiB:.1f} MiB, nvidia-smi {smi} MiB")
    fp_text = f"{fp / MiB:.1f}" if fp is not None else "none"
    print(f"== {mode}: footprint in 'hold' {fp_text} MiB, nvidia-smi {smi} MiB; "
          f"a boundary {t['cold_ns'] / 1000:.1f} us before CUDA, {t['hot_ns'] / 1000:.1f} us with the reading")
    ooms = [o for o in m.get("gpu_oom", []) if o.get("stage") == "train"]
    if not t.get("caught"):
        bad.append("the workload's allocation did not fail")
    elif not ooms:
        bad.append("no gpu_oom record in stage train")
    else:
        o = ooms[0]
        print(f"== {mode}: out of memory: asked {o['asked'] / MiB:.0f} MiB, free {o.get('free', -1) / MiB:.0f} MiB, "
              f"{o['failures']} failure(s), went on: {o['went_on']}")
        if o["asked"] < t["asked"] or not o["went_on"] or o["failures"] < 1:
            bad.append(f"gpu_oom record: {o}")
    if dump is not None and not dump.startswith("GPU 0 out of memory in train: asked "):
        bad.append("the dump does not begin with the out-of-memory line: " + dump.splitlines()[0])
    for b in bad:
        print(f"== {mode}: FAIL {b}")
    return 1 if bad else 0


sys.exit(main())

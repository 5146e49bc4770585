"""bench/sites/bound.py LIB FIXTURE [RUNS [VAR=VALUE...]]: the sampled mode's error on small blocks,
measured against its bound.  Runs `FIXTURE shares` (tests/sites: 60/30/10 MiB live at the peak of
stage "work" from three functions, blocks of 64 KiB - 1 MiB) RUNS times under LIB and prints, per
site, the mean and standard deviation of its bytes and of its share, the worst and typical (root
mean square) deviation of the share in points, and two predictions of that standard deviation:
  sqrt(B R)      the small-block bound (a block of s << R stands for R bytes per sample point);
  per block      sum of s^2 (1-p)/p over the site's blocks, p = 1-exp(-s/R): the variance of the
                 estimator s/p for blocks of this fixture's sizes (replayed from its random stream).
Shares are propagated from the bytes to first order (the three sites sampled independently)."""
import json
import math
import os
import subprocess
import sys
import tempfile

KiB, MiB = 1024, 1024 * 1024
SITES = (("alloc_sixty+", 60), ("alloc_thirty+", 30), ("alloc_ten+", 10))


def fixture_blocks():
    """The block sizes each site allocates in stage "work" (sites_fixture.c's next_size)."""
    seed, out = 12345, []
    for _, mib in SITES:
        total, sizes = mib * MiB, []
        while total > 0:
            seed = (seed * 1103515245 + 12345) & 0xFFFFFFFF
            n = min(64 * KiB + (seed >> 8) % (960 * KiB), total)
            sizes.append(n)
            total -= n
        out.append(sizes)
    return out


def one_run(lib, fixture, env):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.json")
        e = dict(os.environ, LD_PRELOAD=lib, MEMSHIM_OUTPUT=path, MEMSHIM_LIVE="0")
        e.update(env)
        subprocess.run([fixture, "shares"], env=e, check=True, stdout=subprocess.DEVNULL)
        doc = json.load(open(path))
    work = next(s for s in doc["stages"] if s["name"] == "work")
    got = [0.0, 0.0, 0.0]
    for entry in work.get("peak_sites", []):
        for k, (prefix, _) in enumerate(SITES):
            if entry["frames"] and entry["frames"][0].startswith(prefix):
                got[k] += entry["bytes"]
    return got, doc["sites"]["rate"], doc["sites"].get("mode", "sampled")


def share_sd(truth, var):
    """First-order standard deviation of each share B_k / sum(B) for independent B_k."""
    t = sum(truth)
    return [
        math.sqrt(((t - b) ** 2 * var[k] + b * b * (sum(var) - var[k])) / t**4)
        for k, b in enumerate(truth)
    ]


def main():
    lib, fixture = sys.argv[1:3]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    env = dict(a.split("=", 1) for a in sys.argv[4:])
    results = [one_run(lib, fixture, env) for _ in range(runs)]
    rate, mode = results[0][1], results[0][2]
    blocks = fixture_blocks()
    truth = [float(sum(b)) for b in blocks]
    p = lambda s: -math.expm1(-s / rate)
    var_small = [b * rate for b in truth]
    var_block = [sum(s * s * (1 - p(s)) / p(s) for s in b) for b in blocks]
    sd_small, sd_block = share_sd(truth, var_small), share_sd(truth, var_block)
    shares = [[g[k] / sum(g) for k in range(3)] for g, _, _ in results]
    true_share = [b / sum(truth) for b in truth]
    print("%s mode, rate %d, %d runs of `sites_fixture shares`" % (mode, rate, runs))
    print("site           truth MiB  mean MiB  sd MiB | sd pred: sqrt(BR) per-block | share: truth  mean   "
          "sd pts  rms dev  worst dev | pred sd pts: sqrt(BR) per-block")
    for k, (prefix, _) in enumerate(SITES):
        got = [g[k] for g, _, _ in results]
        mean = sum(got) / runs
        sd = math.sqrt(sum((x - mean) ** 2 for x in got) / max(runs - 1, 1))
        sh = [s[k] for s in shares]
        smean = sum(sh) / runs
        ssd = math.sqrt(sum((x - smean) ** 2 for x in sh) / max(runs - 1, 1))
        dev = [abs(x - true_share[k]) for x in sh]
        rms = math.sqrt(sum(d * d for d in dev) / runs)
        print("%-13s %9.1f %9.1f %7.2f | %13.2f %9.2f | %11.1f %6.1f %7.2f %8.2f %9.2f | %13.2f %9.2f" % (
            prefix[:-1], truth[k] / MiB, mean / MiB, sd / MiB, math.sqrt(var_small[k]) / MiB,
            math.sqrt(var_block[k]) / MiB, 100 * true_share[k], 100 * smean, 100 * ssd, 100 * rms,
            100 * max(dev), 100 * sd_small[k], 100 * sd_block[k]))


if __name__ == "__main__":
    main()

"""bench/peers_shares.py TOOL FILE: the bytes a tool's report gives each of the three known call
sites (alloc_sixty, alloc_thirty, alloc_ten, or the C fixture's alloc_one_*) at the peak, printed
as "sixty thirty ten".  TOOL: memshim (metrics file, stage "work"), heaptrack (heaptrack_print
--print-peaks output), memray (capture file), fil (peak-memory.prof)."""
import json
import re
import sys

SITE = re.compile(r"\balloc_(?:one_)?(sixty|thirty|ten)\b")
ORDER = ("sixty", "thirty", "ten")
UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}  # heaptrack_print's sizes are SI


def site_of(frames):
    for f in frames:
        m = SITE.search(f)
        if m:
            return m.group(1)
    return None


def memshim(path):
    for stage in json.load(open(path))["stages"]:
        if stage["name"] == "work":
            for e in stage.get("peak_sites", []):
                yield e["frames"], e["bytes"]


def heaptrack(path):
    text = open(path).read()
    for m in re.finditer(r"^([0-9.]+)([KMG]?) peak memory consumed over \d+ calls from\n(\S+)", text, re.M):
        yield [m.group(3)], float(m.group(1)) * UNIT[m.group(2)]


def memray(path):
    import memray as mr

    for rec in mr.FileReader(path).get_high_watermark_allocation_records(merge_threads=True):
        yield [f[0] for f in rec.stack_trace()], rec.size


def fil(path):
    for line in open(path):
        stack, _, size = line.rstrip("\n").rpartition(" ")
        yield stack.split(";"), int(size)


def main():
    tool, path = sys.argv[1:3]
    got = dict.fromkeys(ORDER, 0.0)
    for frames, size in globals()[tool](path):
        site = site_of(frames)
        if site:
            got[site] += size
    print(" ".join("%d" % got[k] for k in ORDER))


if __name__ == "__main__":
    main()

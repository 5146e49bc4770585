"""Known call-site shares for the peer table (bench/peers.sh): 60, 30 and 10 MiB from three
functions, live together at the peak of `work`.  `single`: one block each; `shares`: blocks of
64 KiB - 1 MiB (the sampled case)."""
import sys

KEEP = []
MiB = 1024 * 1024


def blocks(total, mul, single):
    if single:
        return [total]
    out = []
    while total > 0:
        n = min(total, 64 * 1024 + (total * mul) % (960 * 1024))
        out.append(n)
        total -= n
    return out


def alloc_sixty(single):
    for n in blocks(60 * MiB, 7919, single):
        KEEP.append(bytearray(n))


def alloc_thirty(single):
    for n in blocks(30 * MiB, 104729, single):
        KEEP.append(bytearray(n))


def alloc_ten(single):
    for n in blocks(10 * MiB, 1299709, single):
        KEEP.append(bytearray(n))


def work(single):
    alloc_sixty(single)
    alloc_thirty(single)
    alloc_ten(single)


if __name__ == "__main__":
    work(len(sys.argv) > 1 and sys.argv[1] == "single")
    KEEP.clear()

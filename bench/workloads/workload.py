"""Python workloads for bench/run.sh: python workload.py NAME [rss].

Each runs its measured part inside `run_stage` (the stage function named in MEMSHIM_STAGES for the
"with stages" runs).  With "rss", the seed's sampled-RSS tracker wraps the stage and prints its
metrics as JSON on stdout.
"""
import json
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work_fib():
    fib(31)


def work_alloc():
    keep = []
    for r in range(3):
        rows = [{"id": i, "name": str(i), "vals": [i, i + 1, i + 2]} for i in range(100000)]
        keep.append(rows)
        if len(keep) > 2:
            keep.pop(0)


def work_bytes():
    blobs = [bytes(10000) for _ in range(5000)]  # 50 MB of bytes objects
    return len(blobs)


def work_torch():
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))

    def train():
        for _ in range(20):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

    def evaluate():
        with torch.no_grad():
            for _ in range(20):
                model(x).sum()
    train()
    evaluate()


WORK = {"fib": work_fib, "alloc": work_alloc, "bytes": work_bytes, "torch": work_torch}


def run_stage(fn):
    fn()


def main():
    fn = WORK[sys.argv[1]]
    if len(sys.argv) > 2 and sys.argv[2] == "rss":
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from rss_tracker import MemoryTracker
        tracker = MemoryTracker()
        tracker.start("work")
        run_stage(fn)
        tracker.stop()
        print(json.dumps(tracker.metrics))
    else:
        run_stage(fn)


if __name__ == "__main__":
    main()

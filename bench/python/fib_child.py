# Child of bench_python.py and bench_ir.py: recursive fib inside the function named by the stage
# (MEMSHIM_STAGES=bench=work), after a call of warm (a stage of its own when named, closed while work
# runs); prints the CPU seconds fib took (CPU time: the machine may be shared).  BENCH_NOOP_EVALHOOK:
# a library whose do-nothing frame evaluation hook goes in first (bench/python/noop_evalhook.c).
import os
import sys
import time

if os.environ.get("BENCH_NOOP_EVALHOOK"):
    import ctypes

    if ctypes.PyDLL(os.environ["BENCH_NOOP_EVALHOOK"]).noop_evalhook_install() != 0:
        sys.exit("no frame evaluation hook API in this Python")


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def warm():
    return fib(2)


def work(n):
    t = time.process_time()
    fib(n)
    return time.process_time() - t


warm()
print(work(int(sys.argv[1]) if len(sys.argv) > 1 else 25))

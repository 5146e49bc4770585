# Child of bench_python.py: recursive fib inside the function named by the stage (MEMSHIM_STAGES=
# bench=work); prints the CPU seconds fib took (CPU time: the machine may be shared).
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work(n):
    t = time.process_time()
    fib(n)
    return time.process_time() - t


print(work(int(sys.argv[1]) if len(sys.argv) > 1 else 25))

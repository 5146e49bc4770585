# Cost of Python stage detection: recursive fib in a matched stage on every installed Python, and
# a PyTorch CPU training loop (Debian's python3), each against the same run without the library.
.PHONY: bench-python
bench-python: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 9 --fib 27
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 7 --torch

# Instructions (callgrind, deterministic) the detection adds to fib when no target can match: the
# Trainer names in a program without transformers (target <= 1.03x on every Python).
.PHONY: bench-python-ir
bench-python-ir: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_ir.py $(BUILD)/libmemshim.so --fib 22

BENCH_TARGETS += bench-python bench-python-ir

# Instructions (callgrind) memshim adds to `import pandas`: no stages, one and three plain targets
# (each also a native target bound through the GOT of every object loaded), three `__main__:` ones.
.PHONY: bench-import
bench-import: $(BUILD)/libmemshim.so $(VENV_ML)/.requirements
	$(PYTHON) bench/python/bench_import.py $(BUILD)/libmemshim.so --python $(VENV_ML)/bin/python

BENCH_TARGETS += bench-import

# What a child process costs: fork + _exit, fork Pools and Processes, spawn, forkserver, against bare.
.PHONY: bench-fork
bench-fork: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_fork.py $(BUILD)/libmemshim.so --rounds 5

BENCH_TARGETS += bench-fork

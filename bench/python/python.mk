# Cost of Python stage detection: recursive fib in a matched stage on every installed Python, a
# PyTorch CPU training loop in one stage and a Trainer-shaped PyTorch script with three stages
# (Debian's python3), each against the same run without the library.
.PHONY: bench-python
bench-python: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 9 --fib 32
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 9 --fib 32 --stages bench=work,warm=warm
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 7 --torch
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 7 --torch-stages

# Instructions (callgrind, deterministic) the detection adds to fib when no target can match: the
# Trainer names in a program without transformers (target <= 1.03x on every Python).
.PHONY: bench-python-ir
bench-python-ir: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_ir.py $(BUILD)/libmemshim.so --fib 22

# The same inside a matched stage (target <= 1.05x on every Python): the stage alone, with another
# stage closed meanwhile (3.11's frame hook stays in then), and a frame hook that does nothing.
.PHONY: bench-python-stage-ir
bench-python-stage-ir: $(BUILD)/libmemshim.so $(BUILD)/bench/noop_evalhook.so
	$(PYTHON) bench/python/bench_ir.py $(BUILD)/libmemshim.so --fib 25 --stages bench=work \
		--stages bench=work,warm=warm --noop-hook $(BUILD)/bench/noop_evalhook.so

$(BUILD)/bench/noop_evalhook.so: bench/python/noop_evalhook.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -shared -fPIC -o $@ $< -ldl

BENCH_TARGETS += bench-python bench-python-ir bench-python-stage-ir

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

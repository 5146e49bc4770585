# Cost of Python stage detection: recursive fib in a matched stage on every installed Python, and
# a PyTorch CPU training loop (Debian's python3), each against the same run without the library.
.PHONY: bench-python
bench-python: $(BUILD)/libmemshim.so
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 9 --fib 27
	$(PYTHON) bench/python/bench_python.py $(BUILD)/libmemshim.so --rounds 7 --torch

BENCH_TARGETS += bench-python

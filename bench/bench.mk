# Benchmarks: each workload bare and under the shim (and peers), alternating, median ratio.
BENCH_PAIRS ?= 7

$(BUILD)/bench/churn: bench/churn.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $< -lpthread

.PHONY: bench-churn bench-run
bench-churn: $(BUILD)/libmemshim.so $(BUILD)/bench/churn
	@echo "== churn, 1 thread (target <= 1.10x)"
	@MEMSHIM_LIB=$(abspath $(BUILD)/libmemshim.so) TOOLS="$(BENCH_TOOLS)" bench/ratio.sh $(BENCH_PAIRS) -- $(BUILD)/bench/churn 1 2000000
	@echo "== churn, 2 threads (target <= 1.35x)"
	@MEMSHIM_LIB=$(abspath $(BUILD)/libmemshim.so) TOOLS="$(BENCH_TOOLS)" bench/ratio.sh $(BENCH_PAIRS) -- $(BUILD)/bench/churn 2 2000000

BENCH_TARGETS += bench-churn
bench-run: $(BENCH_TARGETS)

bench: deps
	@$(MAKE) --no-print-directory bench-run

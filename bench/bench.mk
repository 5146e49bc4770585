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

$(BUILD)/bench/selfmem: bench/selfmem.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $<

# The shim's own resident memory: the same program bare and preloaded (target: under 2 MiB).
.PHONY: bench-selfmem
bench-selfmem: $(BUILD)/libmemshim.so $(BUILD)/bench/selfmem
	@bare=$$($(BUILD)/bench/selfmem | tr -dc 0-9); \
	 shim=$$(LD_PRELOAD=$(abspath $(BUILD)/libmemshim.so) MEMSHIM_OUTPUT=/dev/null $(BUILD)/bench/selfmem | tr -dc 0-9); \
	 echo "== shim's own memory: bare $${bare} kB, preloaded $${shim} kB, difference $$((shim - bare)) kB (target < 2048 kB)"

$(BUILD)/bench/start: bench/start.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $<

# The fixed cost per process (no configuration): instructions and paired wall times over bare.
.PHONY: bench-start
bench-start: $(BUILD)/libmemshim.so $(BUILD)/bench/start
	@bench/start.sh $(BUILD) $(PYTHON)

$(BUILD)/bench/larson: bench/workloads/larson.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $< -lpthread

# The full table against the peers: bench/results.md.
.PHONY: bench-table
bench-table: $(BUILD)/libmemshim.so $(BUILD)/bench/churn $(BUILD)/bench/larson
	@BUILD=$(abspath $(BUILD)) bench/run.sh

# Call sites against memray, Fil and heaptrack on known 60/30/10 MiB shares (also in bench-table).
.PHONY: bench-peers
bench-peers: $(BUILD)/libmemshim.so $(BUILD)/sites/sites_fixture
	@BUILD=$(abspath $(BUILD)) bench/peers.sh

BENCH_TARGETS += bench-table bench-selfmem bench-start bench-peers
# `make bench`: the peer table and the shim's own memory (under 10 minutes on 2 cores);
# `make bench-all` adds each subsystem's own benchmarks (Python versions, native stages, CUDA pairs).
.PHONY: bench-all
bench-run: bench-table bench-selfmem
bench-all: $(BENCH_TARGETS)

bench: deps
	@$(MAKE) --no-print-directory bench-run

# The hot path against the floor a counting wrapper cannot beat: instructions (callgrind) and wall.
$(BUILD)/bench/ir/floor.so: bench/ir/floor.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -fno-plt -shared -fvisibility=hidden -o $@ $<

$(BUILD)/bench/ir/mix: bench/ir/mix.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $< -lpthread

.PHONY: bench-ir
bench-ir: $(BUILD)/libmemshim.so $(BUILD)/bench/ir/floor.so $(BUILD)/bench/ir/mix
	@BUILD=$(abspath $(BUILD)) bench/ir/run.sh
BENCH_TARGETS += bench-ir

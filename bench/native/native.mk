# Native stages: the churn benchmark with a native stage configured, bare vs under the shim.
$(BUILD)/bench/native/nchurn: bench/native/nchurn.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -g -o $@ $< -lpthread

NATIVE_RATIO = MEMSHIM_LIB=$(abspath $(BUILD)/libmemshim.so) bench/ratio.sh $(BENCH_PAIRS) -- $(BUILD)/bench/native/nchurn

.PHONY: bench-native
bench-native: $(BUILD)/libmemshim.so $(BUILD)/bench/native/nchurn
	@echo "== native: churn inside a stage (train=churn_epoch), 1 thread (target <= 1.3x)"
	@MEMSHIM_STAGES=train=churn_epoch $(NATIVE_RATIO) 1 2000000
	@echo "== native: churn outside any stage (train=never_called), 1 thread (target <= 2x)"
	@MEMSHIM_STAGES=train=never_called $(NATIVE_RATIO) 1 2000000
	@echo "== native: churn inside a stage, 2 threads"
	@MEMSHIM_STAGES=train=churn_epoch $(NATIVE_RATIO) 2 2000000
	@echo "== native: allocating through a helper (a new frame each time), inside a stage"
	@MEMSHIM_STAGES=train=churn_epoch $(NATIVE_RATIO) 1 2000000 helper
	@echo "== native: allocating through a helper, outside any stage"
	@MEMSHIM_STAGES=train=never_called $(NATIVE_RATIO) 1 2000000 helper
	@echo "== native: every allocation is its own stage call (train=one_op, 2M stage calls)"
	@MEMSHIM_STAGES=train=one_op $(NATIVE_RATIO) 1 2000000 calls

# The same in instructions (callgrind, deterministic): a native stage on the churn loop vs no stages.
.PHONY: bench-native-ir
bench-native-ir: $(BUILD)/libmemshim.so $(BUILD)/bench/churn $(BUILD)/bench/native/nchurn
	@bench/native/ir.sh $(BUILD) 200000

# A stack-detected stage on a real program: the sqlite3 shell building a table (issue 26).
.PHONY: bench-native-sqlite
bench-native-sqlite: $(BUILD)/libmemshim.so
	@bench/native/sqlite.sh $(BUILD) $(or $(SQLITE_ROWS),10000)

BENCH_TARGETS += bench-native bench-native-ir bench-native-sqlite

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

# Issue 26's library fixture: step_work (128 malloc/free pairs) called through the PLT.
$(BUILD)/bench/native/libstepwork.so: bench/native/libstepwork.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -g -shared -fPIC -o $@ $<
$(BUILD)/bench/native/stepcall: bench/native/stepcall.c $(BUILD)/bench/native/libstepwork.so
	$(CC) $(BASEFLAGS) -O2 -g -o $@ $< -L$(@D) -lstepwork -Wl,-rpath,'$$ORIGIN'
# A library function of ordinary code doing ~80 allocations and frees a call (strndup, realloc).
$(BUILD)/bench/native/libtokens.so: bench/native/libtokens.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -g -shared -fPIC -o $@ $<
$(BUILD)/bench/native/tokcall: bench/native/tokcall.c $(BUILD)/bench/native/libtokens.so
	$(CC) $(BASEFLAGS) -O2 -g -o $@ $< -L$(@D) -ltokens -Wl,-rpath,'$$ORIGIN'

# The same in instructions (callgrind, deterministic): a native stage on the churn loop vs no stages,
# the library fixture and sqlite3 (when installed) with their targets bound through the GOT.
.PHONY: bench-native-ir
bench-native-ir: $(BUILD)/libmemshim.so $(BUILD)/bench/churn $(BUILD)/bench/native/nchurn $(BUILD)/bench/native/stepcall \
		 $(BUILD)/bench/native/tokcall
	@bench/native/ir.sh $(BUILD) 200000

# A stack-detected stage on a real program: the sqlite3 shell building a table (issue 26).
.PHONY: bench-native-sqlite
bench-native-sqlite: $(BUILD)/libmemshim.so
	@bench/native/sqlite.sh $(BUILD) $(or $(SQLITE_ROWS),10000)

BENCH_TARGETS += bench-native bench-native-ir bench-native-sqlite

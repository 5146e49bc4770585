# libFuzzer targets (clang + compiler-rt): `make fuzz FUZZ_SECONDS=N` runs each for N seconds on its
# corpus in tests/fuzz/corpus/<target>; new inputs that widen coverage are kept there.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS := stages settings reader names
FUZZ_SHIM := $(SHIM_CORE_SRCS)

$(BUILD)/fuzz/fuzz_stages $(BUILD)/fuzz/fuzz_settings: $(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_SHIM)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -std=gnu11 -D_GNU_SOURCE -Ishim -o $@ $^ -lm

$(BUILD)/fuzz/fuzz_names: tests/fuzz/fuzz_names.c shim/native/names.c $(FUZZ_SHIM)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -std=gnu11 -D_GNU_SOURCE -Ishim -o $@ $^ -lm

$(BUILD)/fuzz/fuzz_reader: tests/fuzz/fuzz_reader.c $(FMT_LIB_SRCS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -std=gnu11 -D_GNU_SOURCE $(JANSSON_CFLAGS) $(CAIRO_CFLAGS) -Iformatter \
		-o $@ $^ $(JANSSON_LIBS) $(CAIRO_LIBS) $(DW_LIBS) -lm

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(BUILD)/fuzz/new-$$t; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
		if $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/new-$$t \
			tests/fuzz/corpus/$$t > $(BUILD)/fuzz/$$t.log 2>&1; then \
			grep -E "^stat::(number_of_executed_units|peak_rss_mb)" $(BUILD)/fuzz/$$t.log; \
		else \
			grep -E "ERROR|SUMMARY|crash-|leak-|timeout-|deadly" $(BUILD)/fuzz/$$t.log; exit 1; \
		fi; \
	done

# Call sites (issue 16): the churn loop's instructions with sampling off and on (callgrind).
$(BUILD)/bench/sites/written: bench/sites/written.c bench/churn_mix.h
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $< -lpthread

.PHONY: bench-sites
bench-sites: $(BUILD)/libmemshim.so $(BUILD)/bench/churn $(BUILD)/bench/ir/mix $(BUILD)/bench/sites/written
	@bench/sites/sites.sh $(abspath $(BUILD)/libmemshim.so) $(BUILD)/bench/churn 200000 $(BUILD)/bench/ir/mix \
		$(BUILD)/bench/sites/written

BENCH_TARGETS += bench-sites

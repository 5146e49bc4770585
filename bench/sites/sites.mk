# Call sites (issue 16): the churn loop's instructions with sampling off and on (callgrind).
.PHONY: bench-sites
bench-sites: $(BUILD)/libmemshim.so $(BUILD)/bench/churn $(BUILD)/bench/ir/mix
	@bench/sites/sites.sh $(abspath $(BUILD)/libmemshim.so) $(BUILD)/bench/churn 200000 $(BUILD)/bench/ir/mix

BENCH_TARGETS += bench-sites

# Unit suites: the pure core (shim/core/) linked as a static library, no preload; the pure parts of
# other layers (the metrics document) linked from their sources beside it.
UNIT_SUITES := test_counters test_stages test_config test_json test_ranges test_timeline test_settings_table \
	test_rank test_document test_settings_text test_expmath test_elfnote test_lineage \
	test_cgroup test_text test_sys
UNIT_BINS := $(UNIT_SUITES:%=$(BUILD)/unit/%)

$(BUILD)/unit/test_document: shim/output/document.c shim/output/doc_cgroup.c shim/output/footprint.c $(wildcard shim/output/document.h)

$(BUILD)/unit/%: tests/unit/%.c $(SHIM_CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -Ishim $(TEST_COMMON_INC) -o $@ $(filter %.c %.o %.a,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS) -lpthread -lm

.PHONY: check-unit
check-unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do $$t || exit 1; done

CHECK_TARGETS += check-unit

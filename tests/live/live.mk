# The live record (shim/output/live.c), memshim-format --recover and memshim top: `make check-live`.
LIVE_FIXTURES := $(BUILD)/live/live_fixture
LIVE_SUITES := $(BUILD)/live/test_live

$(BUILD)/live/%: tests/live/fixtures/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $<

$(BUILD)/live/test_%: tests/live/test_%.c $(COMMON_CHILD)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS)

.PHONY: check-live
check-live: $(BUILD)/libmemshim.so $(FMT_BIN) $(TOP_BIN) $(LIVE_FIXTURES) $(LIVE_SUITES)
	@for t in $(LIVE_SUITES); do BUILD=$(BUILD) LIVE_ROOT=$(CURDIR) $$t || exit 1; done

CHECK_TARGETS += check-live

# Check suites of memshim-format and scripts/memshim (issue 3): `make check-formatter`.
FMT_TEST_DIR = $(BUILD)/tests/formatter/$(FMT_VARIANT)
FMT_TEST_SRCS := $(wildcard tests/formatter/test_*.c) tests/formatter/util.c
FMT_TEST_OBJS = $(FMT_TEST_SRCS:tests/formatter/%.c=$(FMT_TEST_DIR)/%.o)
FMT_TEST_BIN = $(FMT_TEST_DIR)/formatter-tests
# The stand-in libraries are preloaded into /bin/sh and friends, so they are never sanitized.
FMT_FAKE_SHIM := $(BUILD)/tests/formatter/fake/libmemshim.so
FMT_FAKE_OTHER := $(BUILD)/tests/formatter/fake/libother.so

CHECK_TARGETS += check-formatter
.PHONY: check-formatter

$(FMT_TEST_DIR)/%.o: tests/formatter/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -c $< -o $@

$(FMT_TEST_BIN): $(FMT_TEST_OBJS) $(FMT_LIB_OBJS)
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $^ $(LDFLAGS) $(CHECK_LIBS) $(FMT_LIBS)

$(BUILD)/tests/formatter/fake/lib%.so: tests/formatter/fake_%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

$(FMT_FAKE_SHIM): tests/formatter/fake_shim.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

check-formatter: $(FMT_TEST_BIN) $(FMT_BIN) $(FMT_FAKE_SHIM) $(FMT_FAKE_OTHER)
	MF_GOLDEN=tests/formatter/golden MF_SCRIPT=scripts/memshim MF_FORMAT_BIN=$(abspath $(FMT_BIN)) \
	MF_FAKE_SHIM=$(abspath $(FMT_FAKE_SHIM)) MF_FAKE_OTHER=$(abspath $(FMT_FAKE_OTHER)) \
		$(FMT_TEST_BIN)

# Check suites of memshim-format and scripts/memshim: `make check-formatter`.
FMT_TEST_DIR = $(BUILD)/tests/formatter/$(FMT_VARIANT)
FMT_TEST_SRCS := $(wildcard tests/formatter/test_*.c) tests/formatter/util.c tests/formatter/svg.c
FMT_TEST_OBJS = $(FMT_TEST_SRCS:tests/formatter/%.c=$(FMT_TEST_DIR)/%.o)
FMT_TEST_BIN = $(FMT_TEST_DIR)/formatter-tests
# The --plot tests read the SVG back with expat (libexpat1-dev).
EXPAT_CFLAGS := $(shell $(PKG_CONFIG) --cflags expat 2>/dev/null)
EXPAT_LIBS := $(shell $(PKG_CONFIG) --libs expat 2>/dev/null || echo -lexpat)
# The stand-in libraries are preloaded into /bin/sh and friends, so they are never sanitized.
FMT_FAKE_SHIM := $(BUILD)/tests/formatter/fake/libmemshim.so
FMT_FAKE_OTHER := $(BUILD)/tests/formatter/fake/libother.so

CHECK_TARGETS += check-formatter
.PHONY: check-formatter

$(FMT_TEST_DIR)/%.o: tests/formatter/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -Iformatter $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(CAIRO_CFLAGS) \
		$(EXPAT_CFLAGS) -c $< -o $@

$(FMT_TEST_BIN): $(FMT_TEST_OBJS) $(FMT_LIB_OBJS)
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $^ $(LDFLAGS) $(CHECK_LIBS) $(FMT_LIBS) $(EXPAT_LIBS)

$(BUILD)/tests/formatter/fake/lib%.so: tests/formatter/fake_%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

$(FMT_FAKE_SHIM): tests/formatter/fake_shim.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

check-formatter: $(FMT_TEST_BIN) $(FMT_BIN) $(FMT_FAKE_SHIM) $(FMT_FAKE_OTHER)
	MF_GOLDEN=tests/formatter/golden MF_PLOT_IN=tests/formatter/plot MF_SCRIPT=scripts/memshim MF_FORMAT_BIN=$(abspath $(FMT_BIN)) \
	MF_FAKE_SHIM=$(abspath $(FMT_FAKE_SHIM)) MF_FAKE_OTHER=$(abspath $(FMT_FAKE_OTHER)) \
		$(FMT_TEST_BIN)

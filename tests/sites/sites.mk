# Peak call sites: C, Python and stand-in GPU fixtures under LD_PRELOAD (Check + jansson).
SITES_SUITES := $(BUILD)/sites/test_sites

$(BUILD)/sites/sites_fixture: tests/sites/fixtures/sites_fixture.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $< -lpthread

# The same program without debug info: its frames keep symbol+offset, the formatter shows no line.
$(BUILD)/sites/sites_fixture_nodebug: tests/sites/fixtures/sites_fixture.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -o $@ $< -lpthread

$(BUILD)/sites/libsites_bump.so: tests/sites/fixtures/sites_bump.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -shared -fPIC -o $@ $<

$(BUILD)/sites/sites_signal: tests/sites/fixtures/sites_signal.c $(BUILD)/sites/libsites_bump.so
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $< -L$(BUILD)/sites -lsites_bump -Wl,-rpath,'$$ORIGIN' -lpthread

$(BUILD)/sites/test_sites: tests/sites/test_sites.c $(HARNESS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o %.a,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS) -lm

.PHONY: check-sites
check-sites: $(BUILD)/libmemshim.so $(FMT_BIN) $(BUILD)/sites/sites_fixture $(BUILD)/sites/sites_fixture_nodebug \
		$(BUILD)/sites/sites_signal $(SITES_SUITES) $(BUILD)/gpu/fx_linked
	@for t in $(SITES_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-sites

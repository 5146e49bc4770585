# Integration suites: fixture programs run under LD_PRELOAD, metrics files parsed with jansson.
PRELOAD_FIXTURES := $(BUILD)/preload/alloc_fixture $(BUILD)/preload/output_fixture
PRELOAD_SUITES := $(BUILD)/preload/test_preload $(BUILD)/preload/test_output

$(BUILD)/preload/%: tests/preload/fixtures/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $< -ldl -lpthread

$(BUILD)/preload/early_lib.so: tests/preload/fixtures/early_lib.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -shared -fPIC -o $@ $<

$(BUILD)/preload/harness.o: tests/preload/harness.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -c $< -o $@

$(BUILD)/preload/test_%: tests/preload/test_%.c $(BUILD)/preload/harness.o
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -Itests/preload -o $@ $^ \
		$(CHECK_LIBS) $(JANSSON_LIBS)

.PHONY: check-preload
check-preload: $(BUILD)/libmemshim.so $(PRELOAD_FIXTURES) $(PRELOAD_SUITES) $(BUILD)/preload/early_lib.so
	@for t in $(PRELOAD_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-preload

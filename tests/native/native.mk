# Native stage suites: fixture programs built plain (gcc -g), with -rdynamic, at -O2 and stripped,
# a C++ fixture, a library linked at start and one loaded with dlopen, all run under the shim.
NATIVE_DIR := $(BUILD)/native
NATIVE_FIXTURES := $(NATIVE_DIR)/nstages $(NATIVE_DIR)/nstages-rdynamic $(NATIVE_DIR)/nstages-O2 \
	$(NATIVE_DIR)/nstages-stripped $(NATIVE_DIR)/nstages-rdynamic-stripped $(NATIVE_DIR)/ncxx \
	$(NATIVE_DIR)/libnstage.so $(NATIVE_DIR)/libnplugin.so $(NATIVE_DIR)/nstress \
	$(NATIVE_DIR)/libnorigin.so $(NATIVE_DIR)/nsub/libnsibling.so $(NATIVE_DIR)/libnctor.so
NATIVE_SUITES := $(NATIVE_DIR)/test_names $(NATIVE_DIR)/test_native
NATIVE_FIXTURE_LINK := -L$(NATIVE_DIR) -lnstage -Wl,-rpath,'$$ORIGIN' -ldl -lpthread

$(NATIVE_DIR)/lib%.so: tests/native/fixtures/lib%.c
	@mkdir -p $(@D)
	$(CC) -g -shared -fPIC -o $@ $<

# Finds its sibling through its own RUNPATH only (dlopen's caller decides the search path).
$(NATIVE_DIR)/libnorigin.so: tests/native/fixtures/libnorigin.c
	@mkdir -p $(@D)
	$(CC) -g -shared -fPIC -o $@ $< -ldl -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/nsub'

$(NATIVE_DIR)/nsub/libnsibling.so: tests/native/fixtures/libnsibling.c
	@mkdir -p $(@D)
	$(CC) -g -shared -fPIC -o $@ $<

$(NATIVE_DIR)/nstages: tests/native/fixtures/nstages.c $(NATIVE_DIR)/libnstage.so
	$(CC) -g -o $@ $< $(NATIVE_FIXTURE_LINK)

$(NATIVE_DIR)/nstages-rdynamic: tests/native/fixtures/nstages.c $(NATIVE_DIR)/libnstage.so
	$(CC) -g -rdynamic -o $@ $< $(NATIVE_FIXTURE_LINK)

$(NATIVE_DIR)/nstages-O2: tests/native/fixtures/nstages.c $(NATIVE_DIR)/libnstage.so
	$(CC) -g -O2 -o $@ $< $(NATIVE_FIXTURE_LINK)

$(NATIVE_DIR)/%-stripped: $(NATIVE_DIR)/%
	strip -o $@ $<

$(NATIVE_DIR)/nstress: tests/native/fixtures/nstress.c
	@mkdir -p $(@D)
	$(CC) -g -O1 -o $@ $< -lpthread

$(NATIVE_DIR)/ncxx: tests/native/fixtures/ncxx.cc
	@mkdir -p $(@D)
	$(CXX) -g -o $@ $<

$(NATIVE_DIR)/test_names: tests/native/test_names.c shim/native/names.c $(SHIM_CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) -Ishim $(TEST_COMMON_INC) -o $@ \
		$(filter %.c %.o %.a,$^) $(CHECK_LIBS)

$(NATIVE_DIR)/test_native: tests/native/test_native.c $(HARNESS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS)

.PHONY: check-native
check-native: $(BUILD)/libmemshim.so $(NATIVE_FIXTURES) $(NATIVE_SUITES)
	@for t in $(NATIVE_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-native

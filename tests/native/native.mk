# Native stage suites: fixture programs built plain (gcc -g), with -rdynamic, at -O2 and stripped,
# a C++ fixture, a library linked at start and one loaded with dlopen, all run under the shim.
NATIVE_DIR := $(BUILD)/native
NATIVE_FIXTURES := $(NATIVE_DIR)/nstages $(NATIVE_DIR)/nstages-rdynamic $(NATIVE_DIR)/nstages-O2 \
	$(NATIVE_DIR)/nstages-stripped $(NATIVE_DIR)/nstages-rdynamic-stripped $(NATIVE_DIR)/ncxx \
	$(NATIVE_DIR)/libnstage.so $(NATIVE_DIR)/libnplugin.so $(NATIVE_DIR)/nstress \
	$(NATIVE_DIR)/libnorigin.so $(NATIVE_DIR)/nsub/libnsibling.so $(NATIVE_DIR)/libnctor.so \
	$(NATIVE_DIR)/nstatement
NATIVE_SUITES := $(NATIVE_DIR)/test_names $(NATIVE_DIR)/test_cfi $(NATIVE_DIR)/test_native \
	$(NATIVE_DIR)/test_jump $(NATIVE_DIR)/test_native_cost $(NATIVE_DIR)/test_private
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

$(NATIVE_DIR)/ntail: tests/native/fixtures/ntail.c
	@mkdir -p $(@D)
	$(CC) -g -O2 -o $@ $<
NATIVE_FIXTURES += $(NATIVE_DIR)/ntail

$(NATIVE_DIR)/nstatement: tests/native/fixtures/nstatement.c
	@mkdir -p $(@D)
	$(CC) -g -O1 -o $@ $<

# Loaded as interpreters load extensions (tests/native/test_private.c): the C++ library brings its
# libstdc++ and libgcc_s, the driver is C and links neither.
$(NATIVE_DIR)/libprivxx.so: tests/native/fixtures/libprivxx.cc
	@mkdir -p $(@D)
	$(CXX) -g -O2 -shared -fPIC -o $@ $< -ldl

$(NATIVE_DIR)/nprivate: tests/native/fixtures/nprivate.c
	@mkdir -p $(@D)
	$(CC) -g -o $@ $< -ldl
NATIVE_FIXTURES += $(NATIVE_DIR)/libprivxx.so $(NATIVE_DIR)/nprivate

$(NATIVE_DIR)/ncxx: tests/native/fixtures/ncxx.cc
	@mkdir -p $(@D)
	$(CXX) -g -o $@ $<

$(NATIVE_DIR)/test_names: tests/native/test_names.c shim/native/names.c $(SHIM_CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) -Ishim $(TEST_COMMON_INC) -o $@ \
		$(filter %.c %.o %.a,$^) $(CHECK_LIBS)

# The quick unwinder and the cursor without a preload: the trampolines linked in, libunwind as the
# reference; frame pointers so a test can find its own return-address slot.
NATIVE_UNWIND_SRCS := shim/native/cfi.c shim/native/unwinder.c shim/native/tramp.c shim/native/pool.c shim/intercept/got.c \
	shim/intercept/fds.c
$(NATIVE_DIR)/test_cfi: tests/native/test_cfi.c $(NATIVE_UNWIND_SRCS) $(SHIM_CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-omit-frame-pointer $(CHECK_CFLAGS) -Ishim $(TEST_COMMON_INC) -o $@ \
		$(filter %.c %.o %.a,$^) $(CHECK_LIBS) -lunwind -ldl

$(NATIVE_DIR)/test_native $(NATIVE_DIR)/test_jump $(NATIVE_DIR)/test_native_cost $(NATIVE_DIR)/test_private: \
		$(NATIVE_DIR)/%: tests/native/%.c $(HARNESS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS)

# Rust's legacy and v0 manglings, where rustc is installed (the suite says it skipped otherwise).
RUSTC ?= rustc
$(NATIVE_DIR)/nrust $(NATIVE_DIR)/nrust-v0: $(NATIVE_DIR)/nrust%: tests/native/fixtures/nrust.rs
	@mkdir -p $(@D)
	@if command -v $(RUSTC) >/dev/null; then MAKEFLAGS= $(RUSTC) -O -g --crate-name nrust \
		$(if $(filter -v0,$*),-C symbol-mangling-version=v0) -o $@ $<; \
	else echo "rustc not found: the Rust name tests skip"; fi
NATIVE_FIXTURES += $(NATIVE_DIR)/nrust $(NATIVE_DIR)/nrust-v0

# A Rust library panicking inside, caught at its own boundary (tests/native/test_private.c).
$(NATIVE_DIR)/libprivrs.so: tests/native/fixtures/libprivrs.rs
	@mkdir -p $(@D)
	@if command -v $(RUSTC) >/dev/null; then MAKEFLAGS= $(RUSTC) -O -g --crate-type cdylib --crate-name privrs \
		-o $@ $<; else echo "rustc not found: the private Rust library tests skip"; fi
NATIVE_FIXTURES += $(NATIVE_DIR)/libprivrs.so

.PHONY: check-native
check-native: $(BUILD)/libmemshim.so $(NATIVE_FIXTURES) $(NATIVE_SUITES)
	@for t in $(NATIVE_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-native

# The GOT rewriter (intercept/got.c) on one library built lazily bound, with -z now and with -fno-plt.
GOT_LIBS := $(NATIVE_DIR)/libngotcall-lazy.so $(NATIVE_DIR)/libngotcall-now.so $(NATIVE_DIR)/libngotcall-noplt.so
$(NATIVE_DIR)/libngotcall-lazy.so: tests/native/fixtures/libngotcall.c $(NATIVE_DIR)/libngotdef.so
	$(CC) -g -shared -fPIC -o $@ $< -L$(NATIVE_DIR) -lngotdef -Wl,-z,lazy,-z,relro,-rpath,'$$ORIGIN'
$(NATIVE_DIR)/libngotcall-now.so: tests/native/fixtures/libngotcall.c $(NATIVE_DIR)/libngotdef.so
	$(CC) -g -shared -fPIC -o $@ $< -L$(NATIVE_DIR) -lngotdef -Wl,-z,now,-z,relro,-rpath,'$$ORIGIN'
$(NATIVE_DIR)/libngotcall-noplt.so: tests/native/fixtures/libngotcall.c $(NATIVE_DIR)/libngotdef.so
	$(CC) -g -shared -fPIC -fno-plt -o $@ $< -L$(NATIVE_DIR) -lngotdef -Wl,-z,now,-z,relro,-rpath,'$$ORIGIN'

$(NATIVE_DIR)/test_got: tests/native/test_got.c shim/intercept/got.c shim/core/sandbox.c $(GOT_LIBS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) -Ishim -o $@ $(filter %.c,$^) $(CHECK_LIBS) -ldl
NATIVE_SUITES += $(NATIVE_DIR)/test_got

# Targets bound through the GOT: a library called through the PLT by a program built
# lazily bound and with -z now, a library loaded later that calls it, a C++ library that throws, and
# a C++ library whose methods are named demangled.
PLT_FIXTURES := $(NATIVE_DIR)/nplt $(NATIVE_DIR)/nplt-now $(NATIVE_DIR)/npltxx $(NATIVE_DIR)/libnpltdl.so \
	$(NATIVE_DIR)/libnpltlate.so $(NATIVE_DIR)/libnpltlatedef.so \
	$(NATIVE_DIR)/nengine
$(NATIVE_DIR)/libnpltlate.so: tests/native/fixtures/libnpltlate.c
	@mkdir -p $(@D)
	$(CC) -g -shared -fPIC -o $@ $< -Wl,-z,lazy
$(NATIVE_DIR)/nplt: tests/native/fixtures/nplt.c $(NATIVE_DIR)/libnplt.so
	$(CC) -g -o $@ $< -L$(NATIVE_DIR) -lnplt -Wl,-z,lazy,-rpath,'$$ORIGIN' -ldl -lpthread
$(NATIVE_DIR)/nplt-now: tests/native/fixtures/nplt.c $(NATIVE_DIR)/libnplt.so
	$(CC) -g -o $@ $< -L$(NATIVE_DIR) -lnplt -Wl,-z,now,-z,relro,-rpath,'$$ORIGIN' -ldl -lpthread
$(NATIVE_DIR)/libnpltxx.so: tests/native/fixtures/libnpltxx.cc
	@mkdir -p $(@D)
	$(CXX) -g -shared -fPIC -o $@ $<
$(NATIVE_DIR)/npltxx: tests/native/fixtures/npltxx.cc $(NATIVE_DIR)/libnpltxx.so
	$(CXX) -g -o $@ $< -L$(NATIVE_DIR) -lnpltxx -Wl,-rpath,'$$ORIGIN'
$(NATIVE_DIR)/libnengine.so: tests/native/fixtures/libnengine.cc
	@mkdir -p $(@D)
	$(CXX) -g -O2 -shared -fPIC -o $@ $<
$(NATIVE_DIR)/nengine: tests/native/fixtures/nengine.cc $(NATIVE_DIR)/libnengine.so
	$(CXX) -g -O2 -o $@ $< -L$(NATIVE_DIR) -lnengine -Wl,-rpath,'$$ORIGIN'
$(NATIVE_DIR)/test_plt: tests/native/test_plt.c $(HARNESS) $(PLT_FIXTURES)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -Itests/preload $(TEST_COMMON_INC) -o $@ \
		$(filter %.c %.o,$^) $(CHECK_LIBS) $(JANSSON_LIBS)
NATIVE_SUITES += $(NATIVE_DIR)/test_plt

# Real programs (sqlite3, xz) with a second preloaded library counting the same calls.
$(NATIVE_DIR)/libcountcalls.so: tests/native/fixtures/libcountcalls.c
	@mkdir -p $(@D)
	$(CC) -O2 -shared -fPIC -o $@ $< -ldl
$(NATIVE_DIR)/test_real: tests/native/test_real.c $(HARNESS) $(NATIVE_DIR)/libcountcalls.so
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -Itests/preload $(TEST_COMMON_INC) -o $@ \
		$(filter %.c %.o,$^) $(CHECK_LIBS) $(JANSSON_LIBS)
NATIVE_SUITES += $(NATIVE_DIR)/test_real

# The suites added above are prerequisites too (a rule takes its prerequisites as they are then).
check-native: $(NATIVE_SUITES) $(PLT_FIXTURES)

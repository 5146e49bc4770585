# Check suites of memshim-format and scripts/memshim: `make check-formatter`.
FMT_TEST_DIR = $(BUILD)/tests/formatter/$(FMT_VARIANT)
FMT_TEST_SRCS := $(wildcard tests/formatter/test_*.c) tests/formatter/util.c tests/formatter/svg.c \
	tests/formatter/schema.c
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

# The --pprof test parses the file with Google's protobuf runtime, in a venv of its own (made, or
# remade when its requirements change, by the suite).
PROTO_VENV ?= .venv-proto
$(PROTO_VENV)/.requirements: tests/formatter/requirements-proto.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(PROTO_VENV) tests/formatter/requirements-proto.txt

$(FMT_TEST_DIR)/%.o: tests/formatter/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -Iformatter $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(CAIRO_CFLAGS) \
		$(EXPAT_CFLAGS) -c $< -o $@

$(FMT_TEST_BIN): $(FMT_TEST_OBJS) $(FMT_LIB_OBJS)
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $(filter %.c %.o %.a,$^) $(LDFLAGS) $(CHECK_LIBS) $(FMT_LIBS) $(EXPAT_LIBS)

$(BUILD)/tests/formatter/fake/lib%.so: tests/formatter/fake_%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

# A statically linked program: memshim run says LD_PRELOAD cannot apply to it.
FMT_STATIC_PROG := $(BUILD)/tests/formatter/fake/static_prog
$(FMT_STATIC_PROG): tests/formatter/fixtures/static_prog.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -static -o $@ $<

# A job of overlapping processes, run under the real library by memshim run (test_job.c).
FMT_JOB_PROG := $(BUILD)/tests/formatter/job_overlap
$(FMT_JOB_PROG): tests/formatter/fixtures/job_overlap.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -o $@ $<

$(FMT_FAKE_SHIM): tests/formatter/fake_shim.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -fPIC -shared -o $@ $<

# The schema test also validates GPU files from the stand-in driver where it can be built
# (CUDA's headers, as check-gpu).
FMT_GPU_FX := $(if $(wildcard $(or $(CUDA_INCLUDE),/usr/local/cuda/include)/cuda.h),\
	$(BUILD)/gpu/fx_linked $(BUILD)/gpu/libcuda.so.1)

# The install test runs make install/uninstall into a temporary DESTDIR with this BUILD; the
# schema test runs the real library on small programs.
check-formatter: $(FMT_TEST_BIN) $(FMT_BIN) $(FMT_FAKE_SHIM) $(FMT_FAKE_OTHER) $(FMT_STATIC_PROG) $(FMT_JOB_PROG) \
		$(BUILD)/libmemshim.so \
		$(FMT_GPU_FX) $(PROTO_VENV)/.requirements
	MF_PROTO_PY=$(abspath $(PROTO_VENV))/bin/python \
	MF_GOLDEN=tests/formatter/golden MF_PLOT_IN=tests/formatter/plot MF_SCRIPT=scripts/memshim MF_FORMAT_BIN=$(abspath $(FMT_BIN)) \
	MF_FAKE_SHIM=$(abspath $(FMT_FAKE_SHIM)) MF_FAKE_OTHER=$(abspath $(FMT_FAKE_OTHER)) \
	MF_STATIC_PROG=$(abspath $(FMT_STATIC_PROG)) MF_JOB_PROG=$(abspath $(FMT_JOB_PROG)) \
	MF_MAKE_ROOT=$(CURDIR) MF_BUILD=$(BUILD) MF_SHIM_LIB=$(abspath $(BUILD)/libmemshim.so) \
	MF_GPU_DIR=$(if $(FMT_GPU_FX),$(abspath $(BUILD)/gpu)) \
		$(FMT_TEST_BIN)

# The live record (shim/output/live.c), memshim-format --recover and memshim top: `make check-live`.
LIVE_FIXTURES := $(BUILD)/live/live_fixture $(BUILD)/live/oom_climb
LIVE_SUITES := $(BUILD)/live/test_live $(BUILD)/live/test_cgroup

# With device memory: linked against the stand-in driver (tests/gpu/gpu.mk), where CUDA's headers are.
LIVE_CUDA_INCLUDE := $(or $(CUDA_INCLUDE),/usr/local/cuda/include)
ifneq ($(wildcard $(LIVE_CUDA_INCLUDE)/cuda.h),)
LIVE_FIXTURES += $(BUILD)/live/live_gpu
endif

$(BUILD)/live/live_gpu: tests/live/fixtures/live_gpu.c $(BUILD)/gpu/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -I$(LIVE_CUDA_INCLUDE) -o $@ $< -L$(BUILD)/gpu -lcuda -Wl,-rpath,$(abspath $(BUILD)/gpu)

# A Go program with cgo (it leaves by its own exit_group), built where go is installed.
$(BUILD)/live/gocgo: tests/live/fixtures/gocgo/main.go tests/live/fixtures/gocgo/go.mod
	@mkdir -p $(@D)
	@if command -v go >/dev/null; then cd tests/live/fixtures/gocgo && GOCACHE=$(abspath $(BUILD))/gocache \
		GOFLAGS=-mod=mod GOTOOLCHAIN=local go build -o $(abspath $@) .; else echo "go not found: the Go tests skip"; fi
LIVE_FIXTURES += $(BUILD)/live/gocgo

$(BUILD)/live/%: tests/live/fixtures/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $<

$(BUILD)/live/test_%: tests/live/test_%.c $(HARNESS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS)

.PHONY: check-live
check-live: $(BUILD)/libmemshim.so $(FMT_BIN) $(TOP_BIN) $(LIVE_FIXTURES) $(LIVE_SUITES)
	@for t in $(LIVE_SUITES); do BUILD=$(BUILD) LIVE_ROOT=$(CURDIR) $$t || exit 1; done

CHECK_TARGETS += check-live

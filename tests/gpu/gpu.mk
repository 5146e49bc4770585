# GPU suites without a GPU: a stand-in libcuda.so.1, fixtures linked against it or dlopening it,
# and Check suites that run them under the preloaded shim (`make check-gpu`).
GPU_DIR := $(BUILD)/gpu
CUDA_INCLUDE ?= /usr/local/cuda/include
GPU_CUDA_INC := -I$(CUDA_INCLUDE)
GPU_FIXTURES := $(GPU_DIR)/fx_linked $(GPU_DIR)/fx_dl $(GPU_DIR)/fx_nocuda $(GPU_DIR)/libfx_next.so
GPU_SUITES := $(GPU_DIR)/test_table $(GPU_DIR)/test_gpu $(GPU_DIR)/test_boundary_order

# -Bsymbolic: the pointers the stand-in hands out are its own functions, as the real driver's are.
$(GPU_DIR)/libcuda.so.1: tests/gpu/standin/libcuda.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(GPU_CUDA_INC) -fPIC -fvisibility=hidden -shared \
		-Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -o $@ $< -ldl -lpthread

# A stand-in NVML in a folder of its own: a test puts it on LD_LIBRARY_PATH, or leaves it out.
$(GPU_DIR)/nvml/libnvidia-ml.so.1: tests/gpu/standin/libnvml.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $< -ldl

$(GPU_DIR)/libcuda.so: $(GPU_DIR)/libcuda.so.1
	ln -sf libcuda.so.1 $@

$(GPU_DIR)/fx_linked: tests/gpu/fixtures/fx_linked.c $(GPU_DIR)/libcuda.so
	$(CC) $(BASEFLAGS) -O1 -g $(GPU_CUDA_INC) -o $@ $< -L$(GPU_DIR) -lcuda -ldl -lpthread

$(GPU_DIR)/fx_dl $(GPU_DIR)/fx_nocuda: $(GPU_DIR)/%: tests/gpu/fixtures/%.c tests/gpu/fixtures/fx_common.h
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g $(GPU_CUDA_INC) -o $@ $< -ldl

$(GPU_DIR)/libfx_next.so: tests/gpu/fixtures/fx_next.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -fPIC -shared -o $@ $< -ldl

$(GPU_DIR)/test_table: tests/gpu/test_table.c shim/cuda/table.c shim/cuda/table.h
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) $(CHECK_CFLAGS) -Ishim -o $@ tests/gpu/test_table.c \
		shim/cuda/table.c $(CHECK_LIBS) -lpthread

$(GPU_DIR)/test_gpu $(GPU_DIR)/test_boundary_order: $(GPU_DIR)/%: tests/gpu/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $< $(CHECK_LIBS) $(JANSSON_LIBS)

# The shim builds without a CUDA toolkit (shim/cuda/min.h); where cuda.h exists, the wrappers'
# prototypes and every constant and offset the shim uses are checked against it.
GPU_SYNTAX := $(filter-out -MMD -MP,$(BASEFLAGS)) -Ishim -fsyntax-only
GPU_ABI_SRCS := shim/cuda/lookup.c shim/cuda/wrappers.c shim/cuda/pools.c shim/cuda/footprint.c shim/cuda/nvml.c
$(GPU_DIR)/abi.ok: tests/gpu/abi_check.c shim/cuda/min.h shim/cuda/driver.h $(GPU_ABI_SRCS)
	@mkdir -p $(@D)
	$(CC) $(GPU_SYNTAX) tests/gpu/abi_check.c
	$(CC) $(GPU_SYNTAX) -DMS_CUDA_H_CHECK $(GPU_CUDA_INC) tests/gpu/abi_check.c
	$(CC) $(GPU_SYNTAX) -DMS_CUDA_H_CHECK $(GPU_CUDA_INC) $(GPU_ABI_SRCS)
	@touch $@

# The stand-in and fixtures need CUDA's headers (not its libraries): without them the suite says so.
.PHONY: check-gpu
ifneq ($(wildcard $(CUDA_INCLUDE)/cuda.h),)
check-gpu: $(BUILD)/libmemshim.so $(BUILD)/memshim-format $(GPU_DIR)/abi.ok $(GPU_DIR)/libcuda.so.1 \
	$(GPU_DIR)/nvml/libnvidia-ml.so.1 $(GPU_FIXTURES) $(GPU_SUITES)
	@for t in $(GPU_SUITES); do BUILD=$(BUILD) $$t || exit 1; done
else
check-gpu: $(BUILD)/libmemshim.so
	@echo "check-gpu: skipped, no $(CUDA_INCLUDE)/cuda.h (set CUDA_INCLUDE)"
endif

CHECK_TARGETS += check-gpu

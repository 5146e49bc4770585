# The cost a wrapped cuMemAlloc_v2/cuMemFree_v2 pair adds over the stand-in driver (target: at most
# 200 ns per pair), 1 and 4 threads, bare and preloaded alternating in one run.
CUDA_BENCH_RUNS ?= 7
CUDA_BENCH_PAIRS ?= 1000000

$(BUILD)/bench/cuda_pair: bench/cuda/pair.c $(BUILD)/gpu/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O2 -I/usr/local/cuda/include -o $@ $< -L$(BUILD)/gpu -lcuda -lpthread

.PHONY: bench-cuda
bench-cuda: $(BUILD)/libmemshim.so $(BUILD)/bench/cuda_pair
	@echo "== cuMemAlloc_v2 + cuMemFree_v2 pair over the stand-in driver"
	@BUILD=$(BUILD) bench/cuda/pair.sh $(CUDA_BENCH_RUNS) 1 $(CUDA_BENCH_PAIRS)
	@BUILD=$(BUILD) bench/cuda/pair.sh $(CUDA_BENCH_RUNS) 4 $(CUDA_BENCH_PAIRS)

BENCH_TARGETS += bench-cuda

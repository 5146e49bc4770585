# The preloaded library: every .c under shim/, one folder per layer.  shim/core/ is pure logic:
# it is also built on its own into a static library that unit tests, fuzzers and sanitizer builds
# link without a preload (no dlsym, CUDA or libunwind in it).
# Link order is code layout: what every process runs (start, the allocator wrappers, the exit
# report) first and together, so a short process faults in few 64 KiB stretches of code (each a
# page fault that maps 16 pages, some 4 us here); CUDA, native stages, the frame hook after.
SHIM_EVERY_PROCESS := $(wildcard shim/*.c shim/core/*.c shim/intercept/*.c shim/output/*.c) \
	shim/python/detect.c shim/python/targets.c shim/native/detect.c shim/sites/sample.c
SHIM_SRCS := $(SHIM_EVERY_PROCESS) $(filter-out $(SHIM_EVERY_PROCESS),$(wildcard shim/*/*.c))
SHIM_OBJS := $(SHIM_SRCS:shim/%.c=$(BUILD)/shim/%.o)
SHIM_CORE_SRCS := $(wildcard shim/core/*.c)
SHIM_CFLAGS := $(BASEFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fno-strict-aliasing -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
	-fno-builtin-realloc -Ishim -I/usr/local/cuda/include

ALL_TARGETS += $(BUILD)/libmemshim.so

$(BUILD)/shim/%.o: shim/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(SHIM_CFLAGS) -c $< -o $@

$(BUILD)/shim/memshim.map: shim/memshim.map.in $(wildcard shim/*/*.def)
	@mkdir -p $(@D)
	$(CC) -E -P -x c -Ishim $< -o $@

# Bound lazily, as the C library's own callers are: with -z now every process paid a symbol lookup
# (~700 instructions) for each of the 48 functions the library calls through its PLT, most of
# which a short process never calls (/bin/true: 297.9K -> 278.7K instructions).
# A soname of its own: without one valgrind takes the library for the program (soname "NONE") and
# redirects its malloc to valgrind's, so memshim counted nothing under valgrind.
$(BUILD)/libmemshim.so: $(SHIM_OBJS) $(BUILD)/shim/memshim.map
	$(CC) -shared -o $@ $(SHIM_OBJS) -Wl,--version-script=$(BUILD)/shim/memshim.map -Wl,-soname,libmemshim.so \
		-Wl,-z,defs -Wl,-z,nodelete -Wl,-z,lazy $(LDFLAGS) -ldl -lpthread

# The core for tests, optionally with sanitizers (separate directory so flags never mix).
$(BUILD)/pure/%.o: shim/core/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (pure$(if $(SANITIZE), $(SANITIZE)))"
	@$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -fPIC -Ishim -c $< -o $@
SHIM_CORE_LIB := $(BUILD)/pure/libmemshim-core.a

$(SHIM_CORE_LIB): $(SHIM_CORE_SRCS:shim/core/%.c=$(BUILD)/pure/%.o)
	@rm -f $@
	$(AR) rcs $@ $^

.PHONY: install-shim
install-shim: $(BUILD)/libmemshim.so
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(BUILD)/libmemshim.so $(DESTDIR)$(PREFIX)/lib/libmemshim.so
	install -m 0644 shim/memshim.h $(DESTDIR)$(PREFIX)/include/memshim.h
INSTALL_TARGETS += install-shim

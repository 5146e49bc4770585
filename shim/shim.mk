# The preloaded library.  Every shim/*.c is part of it; pure-logic files are also linked by tests.
SHIM_SRCS := $(wildcard shim/*.c)
SHIM_OBJS := $(SHIM_SRCS:shim/%.c=$(BUILD)/shim/%.o)
SHIM_CFLAGS := $(BASEFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fno-strict-aliasing -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
	-fno-builtin-realloc -I/usr/local/cuda/include
# Pure logic that unit tests link without a preload (no dlsym, CUDA or libunwind in them).
SHIM_PURE := counters stages config json log ranges timeline

ALL_TARGETS += $(BUILD)/libmemshim.so

$(BUILD)/shim/%.o: shim/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(SHIM_CFLAGS) -c $< -o $@

$(BUILD)/shim/memshim.map: shim/memshim.map.in $(wildcard shim/*.def)
	@mkdir -p $(@D)
	$(CC) -E -P -x c -Ishim $< -o $@

$(BUILD)/libmemshim.so: $(SHIM_OBJS) $(BUILD)/shim/memshim.map
	$(CC) -shared -o $@ $(SHIM_OBJS) -Wl,--version-script=$(BUILD)/shim/memshim.map \
		-Wl,-z,defs -Wl,-z,nodelete -Wl,-z,now $(LDFLAGS) -ldl -lpthread $(UNWIND_LIBS)

# Pure objects for tests, optionally with sanitizers (separate directory so flags never mix).
$(BUILD)/pure/%.o: shim/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (pure$(if $(SANITIZE), $(SANITIZE)))"
	@$(CC) $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -fPIC -c $< -o $@
SHIM_PURE_OBJS := $(SHIM_PURE:%=$(BUILD)/pure/%.o)

.PHONY: install-shim
install-shim: $(BUILD)/libmemshim.so
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(BUILD)/libmemshim.so $(DESTDIR)$(PREFIX)/lib/libmemshim.so
	install -m 0644 shim/memshim.h $(DESTDIR)$(PREFIX)/include/memshim.h
INSTALL_TARGETS += install-shim

# Integration suites: fixture programs run under LD_PRELOAD, metrics files parsed with jansson.
PRELOAD_FIXTURES := $(BUILD)/preload/alloc_fixture $(BUILD)/preload/output_fixture \
	$(BUILD)/preload/reliab_fixture $(BUILD)/preload/own_malloc $(BUILD)/preload/reserve_fixture \
	$(BUILD)/preload/fork_fixture $(BUILD)/preload/labels_fixture $(BUILD)/preload/shared_fixture \
	$(BUILD)/preload/names_fixture $(BUILD)/preload/cgroup_fixture $(BUILD)/preload/sigmap_fixture \
	$(BUILD)/preload/sanitized_tsan $(BUILD)/preload/sanitized_asan \
	$(BUILD)/preload/seccomp_fixture
# One suite per feature: the malloc family, anonymous mappings and reservations, shared memory, fork and exec,
# signals and snapshots, start to exit, the metrics file and where it goes, real programs, C++ beside
# every allocator, the program's environment.
PRELOAD_SUITES := $(addprefix $(BUILD)/preload/test_,malloc mmap shared fork_exec signals lifecycle output_files \
	output_paths reliability labels allocators environment runs cgroup)

$(BUILD)/preload/%: tests/preload/fixtures/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $< -ldl -lpthread

# A program with its own malloc family, and the library whose constructor allocates before ours.
$(BUILD)/preload/libown_early.so: tests/preload/fixtures/own_malloc_early.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -shared -fPIC -o $@ $<

$(BUILD)/preload/own_malloc: tests/preload/fixtures/own_malloc.c $(BUILD)/preload/libown_early.so
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -o $@ $< -L$(BUILD)/preload -lown_early -Wl,-rpath,'$$ORIGIN' -lpthread

# C++ beside glibc, and linked with jemalloc and tcmalloc (tools/install-deps.sh installs both).
$(BUILD)/preload/cxx_alloc: tests/preload/fixtures/cxx_alloc.cc
	@mkdir -p $(@D)
	$(CXX) -O1 -g -o $@ $< -ldl
$(BUILD)/preload/cxx_alloc_je: tests/preload/fixtures/cxx_alloc.cc
	$(CXX) -O1 -g -o $@ $< -ldl -l:libjemalloc.so.2
$(BUILD)/preload/cxx_alloc_tc: tests/preload/fixtures/cxx_alloc.cc
	$(CXX) -O1 -g -o $@ $< -ldl -l:libtcmalloc.so.4
PRELOAD_FIXTURES += $(BUILD)/preload/cxx_alloc $(BUILD)/preload/cxx_alloc_je $(BUILD)/preload/cxx_alloc_tc

# Built with the sanitizers' shared runtimes, as gcc does by default.
$(BUILD)/preload/sanitized_%: tests/preload/fixtures/sanitized.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -fsanitize=$(if $(filter tsan,$*),thread,address) -o $@ $< -lpthread

$(BUILD)/preload/early_lib.so: tests/preload/fixtures/early_lib.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -shared -fPIC -o $@ $<

$(BUILD)/preload/test_%: tests/preload/test_%.c $(HARNESS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) $(PRELOAD_TEST_INC) -o $@ \
		$(filter %.c %.o %.a,$^) $(CHECK_LIBS) $(JANSSON_LIBS)

# alloc_fixture's modes, as the suites that drive it call them.
$(BUILD)/preload/alloc_modes.o: tests/preload/alloc_modes.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -c $< -o $@
$(addprefix $(BUILD)/preload/test_,malloc mmap fork_exec signals lifecycle output_files output_paths): \
	$(BUILD)/preload/alloc_modes.o

# It writes lineage records as the library does (core/lineage.h), to plant a stale one.
$(BUILD)/preload/test_environment: $(SHIM_CORE_LIB)
$(BUILD)/preload/test_environment: PRELOAD_TEST_INC := -Ishim

.PHONY: check-preload
check-preload: $(BUILD)/libmemshim.so $(PRELOAD_FIXTURES) $(PRELOAD_SUITES) $(BUILD)/preload/early_lib.so $(FMT_BIN)
	@for t in $(PRELOAD_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-preload

# Python stages: fixture scripts under LD_PRELOAD on every installed interpreter (Check + jansson),
# one suite per topic (tests/python/test_<topic>.c) on the harness of tests/python/pyrun.c.
# TEST_PYTHON=3.12 runs one interpreter, CK_RUN_CASE=<case> one test case.
PYTHON_TOPICS := calls targets install frame_hook monitoring processes torch
PYTHON_SUITES := $(PYTHON_TOPICS:%=$(BUILD)/python/test_%)
# An embedded interpreter (tests the start without cpython.run_* events), when a pyenv 3.12/3.13
# with python3-config is present; the suite skips that test otherwise.
PY_EMBED_CONFIG := $(firstword $(wildcard /root/.pyenv/versions/3.1[23].*/bin/python3-config))
PYTHON_EXTRA := $(BUILD)/python/libotherhook.so
ifneq ($(PY_EMBED_CONFIG),)
PYTHON_EXTRA += $(BUILD)/python/embed
endif

$(BUILD)/python/pyrun.o: tests/python/pyrun.c tests/python/pyrun.h
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -c $< -o $@

$(PYTHON_SUITES): $(BUILD)/python/test_%: tests/python/test_%.c tests/python/pyrun.h $(BUILD)/python/pyrun.o $(COMMON_CHILD)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o %.a,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS) -lm

# Another tool's frame evaluation hook (python/fixtures/replaced_hook.py loads it).
$(BUILD)/python/libotherhook.so: tests/python/fixtures/otherhook.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -g -shared -fPIC -o $@ $< -ldl

$(BUILD)/python/embed: tests/python/fixtures/embed.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $$($(PY_EMBED_CONFIG) --includes) \
		-DEMBED_HOME='"'$$($(PY_EMBED_CONFIG) --prefix)'"' -o $@ $< \
		$$($(PY_EMBED_CONFIG) --ldflags --embed)

.PHONY: check-python
check-python: $(BUILD)/libmemshim.so $(PYTHON_SUITES) $(PYTHON_EXTRA) $(VENV)/.requirements
	@for t in $(PYTHON_SUITES); do BUILD=$(BUILD) VENV=$(abspath $(VENV)) $$t || exit 1; done

CHECK_TARGETS += check-python

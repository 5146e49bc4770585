# CPython's own regression tests, bare and under the shim, per-test outcomes compared
# (tests/cpython/cpython.py; modules in tests/cpython/selection.txt). `check-cpython` runs the fast
# set on every installed interpreter that ships its test package, bare, with the default settings
# (what every program under the library sees) and with a configured stage matching every test
# (MEMSHIM_STAGES=s=TestCase.run); `check-cpython-stage` is the same run (kept as a name);
# `check-cpython-full` the whole selection on 3.11, 3.12 and 3.13, one regrtest run per module,
# with wall times against bare.
CPYTHON_RUN := $(PYTHON) tests/cpython/cpython.py --lib $(BUILD)/libmemshim.so
CPYTHON_FULL_PYTHONS ?= $(wildcard /root/.pyenv/versions/3.11.*/bin/python \
	/root/.pyenv/versions/3.12.*/bin/python /root/.pyenv/versions/3.13.*/bin/python)
CPYTHON_ARGS ?=

.PHONY: check-cpython check-cpython-full
check-cpython: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set fast --jobs 6 --modes bare,shim,stage $(CPYTHON_ARGS)

.PHONY: check-cpython-stage
check-cpython-stage: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set fast --jobs 6 $(CPYTHON_ARGS)

check-cpython-full: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set full --per-module --jobs 3 --use network,subprocess \
		$(addprefix --python ,$(CPYTHON_FULL_PYTHONS)) $(CPYTHON_ARGS)

CHECK_TARGETS += check-cpython

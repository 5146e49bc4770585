# CPython's own regression tests, bare and under the shim, per-test outcomes compared
# (tests/cpython/cpython.py; modules in tests/cpython/selection.txt). `check-cpython` runs the fast
# set bare, with the default settings (what every program under the library sees) and with a
# configured stage matching every test (MEMSHIM_STAGES=s=TestCase.run), on the interpreters at the
# ends of each Python stage route: the frame hook's 3.8 and 3.11 (pyenv's, and Debian's with its
# shared libpython), sys.monitoring's 3.13; and 3.12 bare and with the default settings.
# `check-cpython-every` runs the fast set on every installed interpreter in all three modes;
# `check-cpython-full` the whole selection on 3.11, 3.12 and 3.13, one regrtest run per module,
# with wall times against bare.
CPYTHON_RUN := $(PYTHON) tests/cpython/cpython.py --lib $(BUILD)/libmemshim.so
CPYTHON_FULL_PYTHONS ?= $(wildcard /root/.pyenv/versions/3.11.*/bin/python \
	/root/.pyenv/versions/3.12.*/bin/python /root/.pyenv/versions/3.13.*/bin/python)
CPYTHON_ARGS ?=
CPYTHON_FAST_STAGE_PYTHONS ?= $(wildcard /root/.pyenv/versions/3.8.*/bin/python \
	/root/.pyenv/versions/3.11.*/bin/python /root/.pyenv/versions/3.13.*/bin/python) /usr/bin/python3
CPYTHON_FAST_PYTHONS ?= $(CPYTHON_FAST_STAGE_PYTHONS) $(wildcard /root/.pyenv/versions/3.12.*/bin/python)

.PHONY: check-cpython check-cpython-full
check-cpython: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set fast --jobs 6 --modes bare,shim,stage $(addprefix --python ,$(CPYTHON_FAST_PYTHONS)) \
		$(addprefix --stage-python ,$(CPYTHON_FAST_STAGE_PYTHONS)) $(CPYTHON_ARGS)

.PHONY: check-cpython-every check-cpython-stage
check-cpython-every check-cpython-stage: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set fast --jobs 6 --modes bare,shim,stage $(CPYTHON_ARGS)

check-cpython-full: $(BUILD)/libmemshim.so
	@$(CPYTHON_RUN) --set full --per-module --jobs 3 --use network,subprocess \
		$(addprefix --python ,$(CPYTHON_FULL_PYTHONS)) $(CPYTHON_ARGS)

CHECK_TARGETS += check-cpython

# memshim: `make` builds the library and the formatter, `make check` runs every test,
# `make demo` runs the PyTorch demo, `make bench` the benchmarks.
CC ?= cc
PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
PKG_CONFIG ?= pkg-config
SANITIZE ?=
PYTHON ?= /usr/bin/python3
# The project's Python environment (requirements.txt: the real Hugging Face stack on CPython 3.11).
VENV ?= .venv
VENV_PY := $(abspath $(VENV))/bin/python
VENV_OLD_TF ?= .venv-transformers-4.46
# The demo's own environment (requirements-demo.txt: torch, transformers, accelerate), apart from the
# suites' extras.
VENV_DEMO ?= .venv-demo
VENV_DEMO_PY := $(abspath $(VENV_DEMO))/bin/python

CFLAGS ?= -O2 -g
WARNFLAGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASEFLAGS := -std=gnu11 -D_GNU_SOURCE -MMD -MP $(WARNFLAGS)
ifneq ($(SANITIZE),)
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer \
	$(if $(findstring undefined,$(SANITIZE)),-fno-sanitize-recover=undefined)
endif

CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)
JANSSON_CFLAGS := $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
CAIRO_CFLAGS := $(shell $(PKG_CONFIG) --cflags cairo 2>/dev/null)
CAIRO_LIBS := $(shell $(PKG_CONFIG) --libs cairo 2>/dev/null || echo -lcairo)
UNWIND_CFLAGS := $(shell $(PKG_CONFIG) --cflags libunwind 2>/dev/null)

# Each fragment appends its test runners to CHECK_TARGETS and its programs to ALL_TARGETS.
CHECK_TARGETS :=
ALL_TARGETS :=
INSTALL_TARGETS :=

.PHONY: all build-all check check-run deps demo demo-run bench install clean check-sanitize check-fuzz lint venv
all: build-all

# Made (or remade when its requirements change) by the suites and the demo that need it.
venv: $(VENV)/.requirements
$(VENV)/.requirements: requirements.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(VENV) requirements.txt
$(VENV_OLD_TF)/.requirements: requirements-transformers-4.46.txt $(VENV)/.requirements
	@tools/setup-venv.sh $(VENV_OLD_TF) requirements-transformers-4.46.txt $(VENV)
$(VENV_DEMO)/.requirements: requirements-demo.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(VENV_DEMO) requirements-demo.txt

include shim/shim.mk
include formatter/formatter.mk
include top/top.mk
include tests/common/common.mk
include tests/unit/unit.mk
include tests/preload/preload.mk
include tests/live/live.mk
include tests/sites/sites.mk
include tests/formatter/formatter-tests.mk
include tests/gpu/gpu.mk
include tests/python/python.mk
include tests/hf/hf.mk
include tests/cpython/cpython.mk
include tests/ml/ml.mk
-include tests/native/native.mk
include tests/fuzz/fuzz.mk
include tests/lint/lint.mk
-include bench/native/native.mk
-include bench/python/python.mk
-include bench/cuda/cuda.mk
-include bench/sites/sites.mk
include bench/bench.mk
include packaging/packaging.mk
include tests/packaging/packaging-tests.mk

build-all: $(ALL_TARGETS)

# The suites' live records go to a directory of the build: a fixture killed on purpose leaves its
# record until it is read, and in the user's own directory `memshim top` would list it as a killed
# process of theirs (issue 39).  Suites that build their programs' environment set their own.
CHECK_RECORDS := $(abspath $(BUILD))/check-records
check: export MEMSHIM_LIVE_DIR := $(CHECK_RECORDS)
check-%: export MEMSHIM_LIVE_DIR := $(CHECK_RECORDS)
# OpenMP's threads (torch's) sleep when they wait instead of spinning: with the suites side by side
# on 2 cores a spinning team burns the CPU another suite needs (the Trainer script: 53 CPU s
# spinning, 19 sleeping, the same steps); bare and shim runs see the same setting.
OMP_WAIT_POLICY ?= PASSIVE
check: export OMP_WAIT_POLICY := $(OMP_WAIT_POLICY)
check-%: export OMP_WAIT_POLICY := $(OMP_WAIT_POLICY)

# Installs missing Debian packages first, then builds and runs every suite in a fresh make (so
# pkg-config sees what was just installed).  The suites run CHECK_JOBS at a time: most of their
# time goes to waiting on the programs they run, and each one's output is printed whole when it
# ends (--output-sync).  CHECK_JOBS=1 runs them one after another.
CHECK_JOBS ?= 2
CHECK_PARALLEL = --no-print-directory -j$(CHECK_JOBS) $(if $(filter-out 1,$(CHECK_JOBS)),--output-sync=target)
check: deps
	@$(MAKE) $(CHECK_PARALLEL) build-all timed-check-venvs
	@$(MAKE) $(CHECK_PARALLEL) LINT_ANALYZE=shim check-run

# The suites' venvs (pinned wheels), installed while the build compiles and before the suites start:
# an install is not a suite's time, and the first CI run of a clone spends minutes in pip.
CHECK_VENVS = $(VENV)/.requirements $(VENV_OLD_TF)/.requirements $(VENV_ML)/.requirements \
	$(PROTO_VENV)/.requirements $(TOOLS_VENV)/.requirements
.PHONY: check-venvs
check-venvs: $(CHECK_VENVS)

# The longest first (as measured on 2 cores), so that the short ones fill the time beside them.
CHECK_SLOWEST := check-cpython check-ml check-hf lint check-valgrind check-asan check-fuzz check-wheel check-python \
	check-tsan
# Each suite in a make of its own, timed: the closing lines say where the suite's minutes go.
CHECK_RUN := $(CHECK_SLOWEST) $(filter-out $(CHECK_SLOWEST),$(CHECK_TARGETS))
check-run: $(addprefix timed-,$(CHECK_RUN))
	@echo "memshim: all test suites passed"
timed-%:
	@start=$$(date +%s); rc=0; $(MAKE) --no-print-directory $* || rc=$$?; \
	echo "memshim: make $* took $$(($$(date +%s) - start)) s$$([ $$rc -eq 0 ] || echo ', and failed')"; exit $$rc

# The pure suites and the formatter again under AddressSanitizer+UBSan and ThreadSanitizer, and the
# formatter under valgrind memcheck, each in its own build directory (three targets: under
# `make check` they run side by side).
.PHONY: check-sanitize check-asan check-tsan check-valgrind lint
check-sanitize: check-asan check-tsan check-valgrind
check-asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SANITIZE=address,undefined check-unit check-formatter
check-tsan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan SANITIZE=thread check-unit
check-valgrind: $(BUILD)/memshim-format
	@tools/valgrind-formatter.sh $(BUILD)/memshim-format

LINT_ANALYZE ?= shim formatter
lint: $(BUILD)/libmemshim.so $(FMT_BIN)
	@BUILD=$(BUILD) LINT_ANALYZE='$(LINT_ANALYZE)' tools/lint.sh

# Each fuzz target briefly (CI); `make fuzz FUZZ_SECONDS=600` for a real run.
check-fuzz:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
CHECK_FUZZ_SECONDS ?= 10

deps:
	@tools/install-deps.sh

# The demo installs and builds only what it uses (the library, the formatter, .venv-demo), quietly,
# before its own output.
DEMO_DEBS := build-essential pkg-config libunwind-dev libjansson-dev libcairo2-dev libdw-dev fonts-dejavu-core
demo:
	@tools/install-deps.sh $(DEMO_DEBS)
	@$(MAKE) -s --no-print-directory $(BUILD)/libmemshim.so $(BUILD)/memshim-format >/dev/null
	@$(MAKE) -s --no-print-directory $(VENV_DEMO)/.requirements
	@$(MAKE) --no-print-directory demo-run

install: $(INSTALL_TARGETS)

clean:
	rm -rf $(BUILD)

# Objects made by pattern rules stay: sanitizer and plain builds are reused, not rebuilt.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The rest of `make install` (the Python package, a pkg-config file for memshim.h) and
# `make uninstall`.  The library, header, formatter and wrapper are installed by their fragments.
MEMSHIM_VERSION := $(shell awk '/^\#define MEMSHIM_VERSION_MAJOR/ { a = $$3 } \
	/^\#define MEMSHIM_VERSION_MINOR/ { b = $$3 } END { print a "." b }' shim/memshim.h)
# import memshim with PYTHONPATH=$(PREFIX)/lib/memshim/python
PY_INSTALL_DIR = $(PREFIX)/lib/memshim/python
PC_INSTALL_DIR = $(PREFIX)/lib/pkgconfig

INSTALL_TARGETS += install-python install-pkgconfig
.PHONY: install-python install-pkgconfig uninstall

install-python:
	install -d $(DESTDIR)$(PY_INSTALL_DIR)/memshim
	install -m 0644 python/memshim/*.py $(DESTDIR)$(PY_INSTALL_DIR)/memshim/
	printf '"""The version, from shim/memshim.h when installed."""\n__version__ = "%s"\n' \
		'$(MEMSHIM_VERSION)' > $(DESTDIR)$(PY_INSTALL_DIR)/memshim/_version.py

# Written at install time, so the prefix is the one installed to.
install-pkgconfig: packaging/memshim.pc.in shim/memshim.h
	install -d $(DESTDIR)$(PC_INSTALL_DIR)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(MEMSHIM_VERSION)|g' $< \
		> $(DESTDIR)$(PC_INSTALL_DIR)/memshim.pc
	chmod 0644 $(DESTDIR)$(PC_INSTALL_DIR)/memshim.pc

# Every file `make install` wrote (same PREFIX and DESTDIR), and memshim's own directories.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/memshim $(DESTDIR)$(PREFIX)/bin/memshim-format \
		$(DESTDIR)$(PREFIX)/lib/libmemshim.so $(DESTDIR)$(PREFIX)/include/memshim.h \
		$(DESTDIR)$(PC_INSTALL_DIR)/memshim.pc
	rm -rf $(DESTDIR)$(PY_INSTALL_DIR)/memshim
	rmdir $(DESTDIR)$(PY_INSTALL_DIR) $(DESTDIR)$(PREFIX)/lib/memshim 2>/dev/null || true

# The portable wheel: dist/memshim-VERSION-py3-none-manylinux_2_N_x86_64.whl.  `python -m build`
# makes the linux_x86_64 wheel (setup.py: the library and formatter built by make), then auditwheel
# grafts the formatter's libraries into memshim.libs/ (found through RPATH) and names the glibc the
# wheel needs (packaging/repair-wheel.py).  The tools come from PyPI into a venv of their own.
TOOLS_VENV ?= .venv-tools
TOOLS_PY := $(abspath $(TOOLS_VENV))/bin/python
WHEEL_BUILD = $(BUILD)/wheel
WHEEL_DIR ?= dist

.PHONY: wheel tools-venv
tools-venv: $(TOOLS_VENV)/.requirements
$(TOOLS_VENV)/.requirements: packaging/requirements-tools.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(TOOLS_VENV) packaging/requirements-tools.txt

wheel: $(TOOLS_VENV)/.requirements
	@rm -rf $(WHEEL_BUILD)/raw && mkdir -p $(WHEEL_BUILD)/raw $(WHEEL_DIR)
	MEMSHIM_PIP_BUILD=$(abspath $(WHEEL_BUILD))/native $(TOOLS_PY) -m build --wheel --no-isolation \
		--outdir $(WHEEL_BUILD)/raw .
	@rm -f $(WHEEL_DIR)/memshim-$(MEMSHIM_VERSION)-*.whl
	PATH=$(dir $(TOOLS_PY)):$$PATH $(TOOLS_PY) packaging/repair-wheel.py repair -w $(WHEEL_DIR) $(WHEEL_BUILD)/raw/memshim-*.whl
	$(TOOLS_PY) -m auditwheel show $(WHEEL_DIR)/memshim-$(MEMSHIM_VERSION)-*.whl

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

# The wheel (make wheel) in a clean venv and in a root with glibc alone; driven by pytest from the
# tools venv (packaging/requirements-tools.txt), like the pytest-plugin and Lightning suites.
PACKAGING_PYTEST = $(TOOLS_PY) -m pytest -q -p no:cacheprovider

.PHONY: check-wheel
check-wheel: wheel $(FMT_BIN)
	@MEMSHIM_WHEEL=$$(ls $(WHEEL_DIR)/memshim-$(MEMSHIM_VERSION)-py3-none-manylinux_*.whl) \
		MEMSHIM_RAW_WHEEL=$$(ls $(WHEEL_BUILD)/raw/memshim-$(MEMSHIM_VERSION)-*.whl) \
		MEMSHIM_SYSTEM_FORMAT=$(abspath $(FMT_BIN)) $(PACKAGING_PYTEST) tests/packaging/test_wheel.py

CHECK_TARGETS += check-wheel

# The wheel (make wheel) in a clean venv and in a root with glibc alone, the pytest plugin, the
# Lightning callback and the gather across ranks, the explicit API; driven by pytest from the tools
# venv (packaging/requirements-tools.txt), the Lightning runs in the project venv.
PACKAGING_PYTEST = $(TOOLS_PY) -m pytest -q -p no:cacheprovider

.PHONY: check-wheel
check-wheel: wheel $(FMT_BIN)
	@MEMSHIM_WHEEL=$$(ls $(WHEEL_DIR)/memshim-$(MEMSHIM_VERSION)-py3-none-manylinux_*.whl) \
		MEMSHIM_RAW_WHEEL=$$(ls $(WHEEL_BUILD)/raw/memshim-$(MEMSHIM_VERSION)-*.whl) \
		MEMSHIM_SYSTEM_FORMAT=$(abspath $(FMT_BIN)) $(PACKAGING_PYTEST) tests/packaging/test_wheel.py

# pytest --memshim: budgets, the re-run under the library, xdist, GPU budgets on the stand-in driver,
# each test by node id in the metrics file (labelled calls).
.PHONY: check-pytest-plugin
check-pytest-plugin: $(BUILD)/libmemshim.so $(GPU_DIR)/libcuda.so.1 $(TOOLS_VENV)/.requirements $(FMT_BIN)
	@MEMSHIM_STANDIN_CUDA=$(abspath $(GPU_DIR)/libcuda.so.1) MEMSHIM_FORMAT=$(abspath $(FMT_BIN)) \
		$(PACKAGING_PYTEST) tests/packaging/test_pytest_plugin.py tests/packaging/test_pytest_labels.py

CHECK_TARGETS += check-wheel check-pytest-plugin

# memshim.lightning's callback on a real LightningModule (1 process, ddp on 2 ranks), the Lightning
# stages pinned by MEMSHIM_STAGES, memshim.ranks.gather under torchrun: the project venv's Lightning.
.PHONY: check-lightning
check-lightning: $(BUILD)/libmemshim.so $(TOOLS_VENV)/.requirements $(VENV)/.requirements
	@MEMSHIM_LIB=$(abspath $(BUILD)/libmemshim.so) MEMSHIM_VENV_PY=$(VENV_PY) \
		$(PACKAGING_PYTEST) tests/packaging/test_lightning.py

CHECK_TARGETS += check-lightning

# The package's explicit API from the checkout: memshim.stage on plain, async def, generator and
# async generator functions on every installed Python, preloaded and not; `memshim --help`'s
# default stages against shim/core/config.c.
.PHONY: check-python-api
check-python-api: $(BUILD)/libmemshim.so $(TOOLS_VENV)/.requirements $(VENV)/.requirements
	@MEMSHIM_LIB=$(abspath $(BUILD)/libmemshim.so) MEMSHIM_VENV_PY=$(VENV_PY) \
		$(PACKAGING_PYTEST) tests/packaging/test_api.py

CHECK_TARGETS += check-python-api

# The ML stack's own test suites (scipy, pyarrow, pandas, scikit-learn, numpy) and batteries of our
# own (torch, jax, triton), bare and under the shim with default settings, with a stage on a
# function the tests call and with MEMSHIM_SITES=exact:STAGE, every test's outcome compared
# (tests/ml/ml.py, suites in tests/ml/suites.py). `check-ml`: the fast set, part of make check,
# bare, default settings and exact (the stage mode's settings and every allocation in the stage a
# site: the stage mode alone adds a quarter of the time and nothing exact does not run);
# `check-ml-fast-every`: the fast set in all four modes; `check-ml-full`: every suite whole in all
# four, with the jax battery and, in .venv-ml-cuda (torch's CUDA build, 5.5 GB), the triton battery.
VENV_ML ?= .venv-ml
VENV_ML_CUDA ?= .venv-ml-cuda
ML_RUN = $(PYTHON) tests/ml/ml.py --lib $(BUILD)/libmemshim.so --venv $(VENV_ML) --venv-cuda $(VENV_ML_CUDA)
ML_ARGS ?=

$(VENV_ML)/.requirements: requirements-ml.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(VENV_ML) requirements-ml.txt
$(VENV_ML_CUDA)/.requirements: requirements-ml-cuda.txt tools/setup-venv.sh
	@tools/setup-venv.sh $(VENV_ML_CUDA) requirements-ml-cuda.txt

.PHONY: check-ml check-ml-fast-every check-ml-full venv-ml
venv-ml: $(VENV_ML)/.requirements
check-ml: $(BUILD)/libmemshim.so $(VENV_ML)/.requirements
	@$(ML_RUN) --set fast --modes bare,shim,exact $(ML_ARGS)

check-ml-fast-every: $(BUILD)/libmemshim.so $(VENV_ML)/.requirements
	@$(ML_RUN) --set fast $(ML_ARGS)

check-ml-full: $(BUILD)/libmemshim.so $(VENV_ML)/.requirements $(VENV_ML_CUDA)/.requirements
	@$(ML_RUN) --set full $(ML_ARGS)

CHECK_TARGETS += check-ml

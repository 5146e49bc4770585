# The real Hugging Face Trainer under the shim, in the project's Python environment (.venv), and the
# stage binding once more on an older transformers line.
HF_SUITES := $(BUILD)/hf/test_hf

$(BUILD)/hf/test_hf: tests/hf/test_hf.c $(COMMON_CHILD)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -o $@ $(filter %.c %.o %.a,$^) \
		$(CHECK_LIBS) $(JANSSON_LIBS)

.PHONY: check-hf
check-hf: $(BUILD)/libmemshim.so $(FMT_BIN) $(HF_SUITES) $(VENV)/.requirements $(VENV_OLD_TF)/.requirements
	@for t in $(HF_SUITES); do BUILD=$(BUILD) VENV=$(VENV) VENV_OLD_TF=$(VENV_OLD_TF) $$t || exit 1; done

CHECK_TARGETS += check-hf

# Python stages: fixture scripts under LD_PRELOAD on every installed interpreter (Check + jansson).
PYTHON_SUITES := $(BUILD)/python/check_python

$(BUILD)/python/check_python: tests/python/check_python.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -o $@ $< \
		$(CHECK_LIBS) $(JANSSON_LIBS) -lm

.PHONY: check-python
check-python: $(BUILD)/libmemshim.so $(PYTHON_SUITES)
	@for t in $(PYTHON_SUITES); do BUILD=$(BUILD) $$t || exit 1; done

CHECK_TARGETS += check-python

# Helpers the integration suites share: children with redirected output (child.c), fixtures run
# under the shim with their metrics files read back (harness.c), Check's runner (suite.h, header
# only).
COMMON_CHILD := $(BUILD)/common/child.o
TEST_COMMON_INC := -Itests/common
# Suites that link harness.o link the child helpers with it.
HARNESS := $(BUILD)/common/harness.o $(COMMON_CHILD)

$(BUILD)/common/%.o: tests/common/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) $(TEST_COMMON_INC) -c $< -o $@

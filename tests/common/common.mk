# Helpers the integration suites share: children with redirected output (child.c), Check's runner
# (suite.h, header only).
COMMON_CHILD := $(BUILD)/common/child.o
TEST_COMMON_INC := -Itests/common

$(BUILD)/common/%.o: tests/common/%.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) -c $< -o $@

# The layer check itself: seeded violations in a throwaway tree of objects must fail it.
.PHONY: check-layers
check-layers:
	@tests/lint/test_layers.sh

CHECK_TARGETS += check-layers

# The one settings table: a read of the environment outside shim/core/config.c must fail the lint.
.PHONY: check-settings-lint
check-settings-lint:
	@tests/lint/test_settings_lint.sh

CHECK_TARGETS += check-settings-lint

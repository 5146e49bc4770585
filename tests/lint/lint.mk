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

# The hooks list: a second setter of an upward hook, or a hook set from above without a row in
# shim/hooks.def, must fail the lint.
.PHONY: check-hooks-lint
check-hooks-lint:
	@tests/lint/test_hooks_lint.sh

CHECK_TARGETS += check-hooks-lint

# The layer check itself: seeded violations in a throwaway tree of objects must fail it.
.PHONY: check-layers
check-layers:
	@tests/lint/test_layers.sh

CHECK_TARGETS += check-layers

# memshim-format: the Trainer-style dump, results files, --merge, --diff, --plot (formatter/plot/).
# Objects go to a directory per SANITIZE value so sanitized and plain builds never mix.
comma := ,
FMT_VARIANT := $(if $(SANITIZE),san-$(subst $(comma),-,$(SANITIZE)),plain)
FMT_OBJDIR = $(BUILD)/formatter/$(FMT_VARIANT)
FMT_SRCS := $(wildcard formatter/*.c formatter/plot/*.c)
FMT_LIB_SRCS := $(filter-out formatter/main.c,$(FMT_SRCS))
FMT_LIB_OBJS = $(FMT_LIB_SRCS:formatter/%.c=$(FMT_OBJDIR)/%.o)
CAIRO_CFLAGS := $(shell $(PKG_CONFIG) --cflags cairo 2>/dev/null)
CAIRO_LIBS := $(shell $(PKG_CONFIG) --libs cairo 2>/dev/null || echo -lcairo)
FMT_CFLAGS = $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -Iformatter $(JANSSON_CFLAGS) $(CAIRO_CFLAGS)
FMT_LIBS = $(JANSSON_LIBS) $(CAIRO_LIBS) -lm
FMT_BIN := $(BUILD)/memshim-format

ALL_TARGETS += $(FMT_BIN)
INSTALL_TARGETS += install-formatter

$(FMT_OBJDIR)/%.o: formatter/%.c
	@mkdir -p $(@D)
	$(CC) $(FMT_CFLAGS) -c $< -o $@

# Relinks when the variant changes although every object of that variant is older than the binary.
$(BUILD)/formatter/variant: formatter-force
	@mkdir -p $(@D)
	@echo '$(FMT_VARIANT)' | cmp -s - $@ || echo '$(FMT_VARIANT)' > $@

$(FMT_BIN): $(FMT_OBJDIR)/main.o $(FMT_LIB_OBJS) $(BUILD)/formatter/variant
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $(FMT_OBJDIR)/main.o $(FMT_LIB_OBJS) $(LDFLAGS) $(FMT_LIBS)

.PHONY: install-formatter formatter-force demo-run
formatter-force:

install-formatter: $(FMT_BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(FMT_BIN) $(DESTDIR)$(PREFIX)/bin/memshim-format
	install -m 0755 scripts/memshim $(DESTDIR)$(PREFIX)/bin/memshim

# The demo: the real Hugging Face Trainer (train with evaluations, evaluate, predict) in the project's
# venv under the wrapper with the default stage names; HF's own tracker runs too, then both side by side.
demo-run: $(BUILD)/libmemshim.so $(FMT_BIN) $(VENV)/.requirements
	@rm -rf $(BUILD)/demo && mkdir -p $(BUILD)/demo
	HF_HUB_OFFLINE=1 scripts/memshim run --output $(BUILD)/demo/memshim_metrics.json -- \
		$(VENV_PY) examples/hf_trainer.py --output-dir $(BUILD)/demo/hf
	@echo
	@$(FMT_BIN) --compare $(BUILD)/demo/hf/all_results.json $(BUILD)/demo/memshim_metrics.json
	@$(FMT_BIN) --json-dir $(BUILD)/demo/results $(BUILD)/demo/memshim_metrics.json >/dev/null
	@echo "memshim: metrics in $(BUILD)/demo/memshim_metrics.json, Trainer-style results in $(BUILD)/demo/results/"

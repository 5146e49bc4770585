# memshim-format: the Trainer-style dump, results files, --merge, --diff, --plot (formatter/plot/).
# Sources in one folder per layer (base/ model/ input/ plot/ modes/ cli/, doc/architecture.md), main.c above.
# Objects go to a directory per SANITIZE value so sanitized and plain builds never mix.
comma := ,
FMT_VARIANT := $(if $(SANITIZE),san-$(subst $(comma),-,$(SANITIZE)),plain)
FMT_OBJDIR = $(BUILD)/formatter/$(FMT_VARIANT)
FMT_SRCS := $(wildcard formatter/*.c formatter/*/*.c)
FMT_LIB_SRCS := $(filter-out formatter/main.c,$(FMT_SRCS))
FMT_LIB_OBJS = $(FMT_LIB_SRCS:formatter/%.c=$(FMT_OBJDIR)/%.o)
CAIRO_CFLAGS := $(shell $(PKG_CONFIG) --cflags cairo 2>/dev/null)
CAIRO_LIBS := $(shell $(PKG_CONFIG) --libs cairo 2>/dev/null || echo -lcairo)
DW_CFLAGS := $(shell $(PKG_CONFIG) --cflags libdw 2>/dev/null)
DW_LIBS := $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null || echo -ldw -lelf)
FMT_CFLAGS = $(BASEFLAGS) $(CFLAGS) $(SANFLAGS) -Iformatter $(JANSSON_CFLAGS) $(CAIRO_CFLAGS) $(DW_CFLAGS)
FMT_LIBS = $(JANSSON_LIBS) $(CAIRO_LIBS) $(DW_LIBS) -lm
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

# The demo: the real Hugging Face Trainer (train with evaluations, evaluate, predict) in the demo's
# venv (.venv-demo) under the wrapper with the default stage names, HF's own tracker on too. Each part under a
# title saying whose it is and which command prints it: HF's dump, memshim's dump, where each
# stage's peak came from (--sites), both side by side (--compare), memory over time (--plot).
DEMO := $(BUILD)/demo
demo-run: $(BUILD)/libmemshim.so $(FMT_BIN) $(VENV_DEMO)/.requirements
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@echo "=== 1. Hugging Face's own dump: trainer.log_metrics() in examples/hf_trainer.py (its tracker"
	@echo "===    polls the process's RSS), run as: memshim run --plot ... -- python examples/hf_trainer.py"
	@HF_HUB_OFFLINE=1 scripts/memshim run --no-dump --plot $(DEMO)/memory.png \
		--output $(DEMO)/memshim_metrics.json -- $(VENV_DEMO_PY) examples/hf_trainer.py --output-dir $(DEMO)/hf
	@echo
	@echo "=== 2. memshim's dump of the same run (exact live bytes): what memshim run prints at the end,"
	@echo "===    or memshim-format $(DEMO)/memshim_metrics.json"
	@$(FMT_BIN) $(DEMO)/memshim_metrics.json
	@echo
	@echo "=== 3. Where train's peak came from: memshim-format --sites --stage train --top 3 (memshim run"
	@echo "===    --sites prints every stage's)"
	@$(FMT_BIN) --sites --stage train --top 3 $(DEMO)/memshim_metrics.json
	@echo
	@echo "=== 4. Side by side: memshim-format --compare $(DEMO)/hf/all_results.json $(DEMO)/memshim_metrics.json"
	@$(FMT_BIN) --compare $(DEMO)/hf/all_results.json $(DEMO)/memshim_metrics.json
	@$(FMT_BIN) --json-dir $(DEMO)/results $(DEMO)/memshim_metrics.json >/dev/null
	@echo
	@echo "=== 5. Memory over time with the stages: $(DEMO)/memory.png (memshim run --plot)"
	@echo "memshim: metrics in $(DEMO)/memshim_metrics.json, Trainer-style results in $(DEMO)/results/"

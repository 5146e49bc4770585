# memshim-top (`memshim top`): the live view of running memshim processes, from their live
# records; it reads them with the formatter's code (formatter/input/live.c) and draws with ncurses.
NCURSES_CFLAGS := $(shell $(PKG_CONFIG) --cflags ncurses 2>/dev/null)
NCURSES_LIBS := $(shell $(PKG_CONFIG) --libs ncurses 2>/dev/null || echo -lncurses)
TOP_BIN := $(BUILD)/memshim-top

ALL_TARGETS += $(TOP_BIN)
INSTALL_TARGETS += install-top

$(FMT_OBJDIR)/top/top.o: top/top.c
	@mkdir -p $(@D)
	$(CC) $(FMT_CFLAGS) $(NCURSES_CFLAGS) -c $< -o $@

$(TOP_BIN): $(FMT_OBJDIR)/top/top.o $(FMT_LIB_OBJS) $(BUILD)/formatter/variant
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $(FMT_OBJDIR)/top/top.o $(FMT_LIB_OBJS) $(LDFLAGS) $(FMT_LIBS) $(NCURSES_LIBS)

.PHONY: install-top
install-top: $(TOP_BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(TOP_BIN) $(DESTDIR)$(PREFIX)/bin/memshim-top

.PHONY: uninstall-top
uninstall: uninstall-top
uninstall-top:
	rm -f $(DESTDIR)$(PREFIX)/bin/memshim-top

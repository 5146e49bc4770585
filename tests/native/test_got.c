/* Unit test of intercept/got.c on real objects built three ways: calls to got_callee from
 * libngotcall*.so are found by name and rewritten, RELRO pages too, and nothing else is touched. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include "intercept/got.h"

static int replacement(int x)
{
	return x + 100;
}

struct find {
	const char *suffix;
	struct ms_got_object o;
	int found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find *f = arg;
	size_t n = strlen(info->dlpi_name), m = strlen(f->suffix);
	if (n < m || strcmp(info->dlpi_name + n - m, f->suffix))
		return 0;
	const Elf64_Dyn *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	f->found = ms_got_object_at(info->dlpi_addr, dyn, info->dlpi_phdr, info->dlpi_phnum, &f->o) == 0;
	return 1;
}

static void rewrite(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg)
{
	ck_assert_str_eq(sym, "got_callee");
	if (arg)
		*(int *)arg = (uintptr_t)slot >= o->relro_lo && (uintptr_t)slot < o->relro_hi;
	ck_assert_int_eq(ms_got_write(o, slot, (uintptr_t)replacement), 0);
}

static void count_only(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg)
{
	(void)o, (void)slot, (void)sym;
	++*(int *)arg;
}

/* Opens LIB, checks one call, rewrites the calls to got_callee and checks the call again. */
static void rewrites(const char *lib, int expect_relro)
{
	char path[512];
	snprintf(path, sizeof path, "%s/native/%s", getenv("BUILD") ? getenv("BUILD") : "build", lib);
	void *h = dlopen(path, RTLD_NOW);
	ck_assert_msg(h != NULL, "%s", dlerror());
	int (*call)(int) = (int (*)(int))dlsym(h, "got_call");
	ck_assert_int_eq(call(1), 4);
	struct find f = { .suffix = lib };
	dl_iterate_phdr(find_object, &f);
	ck_assert(f.found);
	int other = 0, in_relro = -1;
	ck_assert_int_eq(ms_got_slots(&f.o, "got_calle", count_only, &other), 0);
	ck_assert_int_eq(other, 0);
	ck_assert_int_eq(ms_got_slots(&f.o, "got_callee", rewrite, &in_relro), 1);
	ck_assert_int_eq(in_relro, expect_relro);
	ck_assert_int_eq(call(1), 202);
	dlclose(h);
}

START_TEST(lazy_jump_slot) { rewrites("libngotcall-lazy.so", 0); }
END_TEST

START_TEST(relro_slot_made_writable_and_read_only_again) { rewrites("libngotcall-now.so", 1); }
END_TEST

START_TEST(no_plt_glob_dat) { rewrites("libngotcall-noplt.so", 1); }
END_TEST

/* After the store the slot's RELRO page is read-only again (read from /proc/self/maps). */
START_TEST(relro_restored)
{
	char path[512];
	snprintf(path, sizeof path, "%s/native/libngotcall-now.so", getenv("BUILD") ? getenv("BUILD") : "build");
	void *h = dlopen(path, RTLD_NOW);
	ck_assert(h != NULL);
	struct find f = { .suffix = "libngotcall-now.so" };
	dl_iterate_phdr(find_object, &f);
	ck_assert(f.found);
	ck_assert_int_eq(ms_got_slots(&f.o, "got_callee", rewrite, NULL), 1);
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int checked = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && f.o.relro_lo >= lo && f.o.relro_lo < hi) {
			ck_assert_msg(perms[1] == '-', "RELRO page left writable: %s", line);
			checked = 1;
		}
	}
	fclose(maps);
	ck_assert(checked);
	dlclose(h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("got");
	TCase *tc = tcase_create("got");
	tcase_add_test(tc, lazy_jump_slot);
	tcase_add_test(tc, relro_slot_made_writable_and_read_only_again);
	tcase_add_test(tc, no_plt_glob_dat);
	tcase_add_test(tc, relro_restored);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}

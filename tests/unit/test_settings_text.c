/* The settings table's text rows (core/config.c): every variable the shim reads besides its own
 * settings is kept as it was at start, each in its own slot, and read back by name. */
#include <check.h>
#include <string.h>
#include "suite.h"
#include "core/config.h"
#include "core/ms.h"
#include "capture.h"

static const char *const names[] = {
	"MEMSHIM_OUTPUT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE",
	"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK",
	"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_PROCID", "SLURM_LOCALID",
	"SLURM_NTASKS", "SLURM_NODEID", "TORCHELASTIC_RESTART_COUNT", "TMPDIR", "XDG_RUNTIME_DIR", "LD_PRELOAD",
};
#define NNAMES (sizeof names / sizeof *names)

static struct ms_config cfg;
static const char *only_name;
static char only_value[MS_TEXT_POOL * 2];

static const char *one_var(const char *name)
{
	return strcmp(name, only_name) ? NULL : only_value;
}

static int load_one(const char *name, const char *value)
{
	char err[1024];
	only_name = name;
	ms_strlcpy(only_value, value, sizeof only_value);
	return load_capturing_into(&cfg, one_var, err, sizeof err);
}

/* Each row alone: kept as given, in its own slot (no other row sees it), with no warning. */
START_TEST(each_row_in_its_own_slot)
{
	const char *name = names[_i];
	ck_assert_int_eq(load_one(name, "x\x01 value of a row"), 0);
	for (size_t j = 0; j < NNAMES; j++)
		if ((size_t)_i == j)
			ck_assert_str_eq(ms_config_text(&cfg, names[j]), "x\x01 value of a row");
		else
			ck_assert_msg(ms_config_text(&cfg, names[j]) == NULL, "%s set, %s not NULL", name, names[j]);
	ck_assert_int_eq(load_one(name, ""), 0); /* set but empty stays "", not unset */
	ck_assert_ptr_nonnull(ms_config_text(&cfg, name));
	ck_assert_str_eq(ms_config_text(&cfg, name), "");
}
END_TEST

/* The value is a copy: the environment changing afterwards changes nothing read from the table. */
START_TEST(read_only_after_start)
{
	load_one("TMPDIR", "/scratch");
	strcpy(only_value, "/elsewhere");
	ck_assert_str_eq(ms_config_text(&cfg, "TMPDIR"), "/scratch");
	ck_assert_ptr_null(ms_config_text(&cfg, "NOT_A_ROW"));
	ck_assert_ptr_null(ms_config_text(&cfg, "MEMSHIM_LOG")); /* a parsed setting: read from ms_cfg */
}
END_TEST

/* Larger than the pool: the environment's own string, whole. */
START_TEST(a_huge_value_is_whole)
{
	memset(only_value, 'p', sizeof only_value - 1);
	only_value[sizeof only_value - 1] = '\0';
	only_name = "LD_PRELOAD";
	char err[256];
	ck_assert_int_eq(load_capturing_into(&cfg, one_var, err, sizeof err), 0);
	ck_assert_uint_eq(strlen(ms_config_text(&cfg, "LD_PRELOAD")), sizeof only_value - 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("settings-text");
	TCase *tc = tcase_create("rows");
	tcase_add_loop_test(tc, each_row_in_its_own_slot, 0, (int)NNAMES);
	tcase_add_test(tc, read_only_after_start);
	tcase_add_test(tc, a_huge_value_is_whole);
	suite_add_tcase(s, tc);
	return run_suite(s);
}

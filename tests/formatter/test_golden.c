/* Golden cases from golden/cases.txt: exit status, stdout and stderr byte for byte. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CASES 256
#define MAX_ARGS 32

static char *cases[MAX_CASES];
static int ncases;

/* Lines of cases.txt that are not comments or blank. */
static void load_cases(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/cases.txt", t_golden());
	char *text = t_read(path, NULL), *save = NULL;
	if (!text) {
		fprintf(stderr, "formatter-tests: no %s\n", path);
		exit(1);
	}
	for (char *line = strtok_r(text, "\n", &save); line && ncases < MAX_CASES;
	     line = strtok_r(NULL, "\n", &save))
		if (line[0] && line[0] != '#')
			cases[ncases++] = strdup(line);
	free(text);
}

static char *expected(const char *name, const char *ext)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/expect/%s.%s", t_golden(), name, ext);
	char *s = t_read(path, NULL);
	return s ? s : strdup("");
}

/* MF_REGEN=1 rewrites the expected files from the actual output (then review them with git diff). */
static void regen(const char *name, const char *out, const char *err)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/expect/%s.out", t_golden(), name);
	if (*out)
		t_write(path, out, strlen(out));
	else
		unlink(path);
	snprintf(path, sizeof path, "%s/expect/%s.err", t_golden(), name);
	if (*err)
		t_write(path, err, strlen(err));
	else
		unlink(path);
}

START_TEST(test_case)
{
	char *line = strdup(cases[_i]), *save = NULL, *argv[MAX_ARGS + 2], *out, *err;
	char *name = strtok_r(line, " ", &save);
	int want = atoi(strtok_r(NULL, " ", &save)), argc = 1;
	argv[0] = "memshim-format";
	for (char *a; argc <= MAX_ARGS && (a = strtok_r(NULL, " ", &save));)
		argv[argc++] = a;
	argv[argc] = NULL;
	setenv("TZ", "UTC", 1);
	tzset();
	ck_assert_int_eq(chdir(t_golden()), 0);
	int rc = t_run(argv, &out, &err);
	if (getenv("MF_REGEN"))
		regen(name, out, err);
	char *eo = expected(name, "out"), *ee = expected(name, "err");
	char what[300];
	snprintf(what, sizeof what, "case %s: stdout", name);
	t_same(what, eo, out);
	snprintf(what, sizeof what, "case %s: stderr", name);
	t_same(what, ee, err);
	ck_assert_msg(rc == want, "case %s: exit status %d, expected %d", name, rc, want);
	free(eo), free(ee), free(out), free(err), free(line);
}
END_TEST

Suite *golden_suite(void)
{
	Suite *s = suite_create("golden");
	TCase *tc = tcase_create("cases");
	load_cases();
	tcase_add_loop_test(tc, test_case, 0, ncases);
	suite_add_tcase(s, tc);
	return s;
}

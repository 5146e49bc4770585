/* Helpers shared by the formatter's Check suites. */
#ifndef MF_TEST_UTIL_H
#define MF_TEST_UTIL_H

#include <check.h>
#include <stddef.h>

/* The golden directory (MF_GOLDEN, default tests/formatter/golden), absolute. */
const char *t_golden(void);
/* Whole file as a NUL-terminated string, or NULL when it does not exist. */
char *t_read(const char *path, size_t *len);
void t_write(const char *path, const char *data, size_t len);
/* Fails the test with the first differing line when ACTUAL is not EXPECTED. */
void t_same(const char *what, const char *expected, const char *actual);
/* A fresh empty directory under /tmp; removed by t_rmtree. */
char *t_tmpdir(void);
void t_rmtree(const char *dir);
/* Runs mf_main on ARGV (NULL-terminated) capturing stdout and stderr; returns its exit status. */
int t_run(char **argv, char **out, char **err);
/* memshim-format OPTION DIR/NAME ARGS... (NULL-terminated) must exit 0 printing nothing; returns
 * DIR/NAME (free it). */
char *t_draw(const char *option, const char *dir, const char *name, char **args);
/* memshim-format OPTION DIR/NAME INPUT with DIR/NAME a link to /dev/full (a disk that fills midway)
 * must exit 2 with one message, the write's; returns DIR/NAME (free it), or NULL (nothing run) where
 * /dev/full cannot be written. */
char *t_draw_to_full_disk(const char *option, const char *dir, const char *name, const char *input);

Suite *golden_suite(void);
Suite *pyfloat_suite(void);
Suite *results_suite(void);
Suite *wrapper_suite(void);
Suite *plot_suite(void);
Suite *plotfile_suite(void);
Suite *plotodd_suite(void);
Suite *cli_suite(void);
Suite *schema_suite(void);
Suite *flame_suite(void);
Suite *options_suite(void);
Suite *export_suite(void);
Suite *flame_html_suite(void);
Suite *frames_suite(void);
Suite *runs_suite(void);
Suite *meminfo_suite(void);
Suite *job_suite(void);

#endif

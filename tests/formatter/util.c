/* Shared helpers: files, temporary directories and running memshim-format in-process. */
#include "util.h"
#include "cli/cli.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *t_golden(void)
{
	static char path[4096];
	if (!path[0]) {
		const char *g = getenv("MF_GOLDEN");
		/* Also called while building the suites, where ck_assert may not be used. */
		if (!realpath(g ? g : "tests/formatter/golden", path)) {
			fputs("formatter-tests: golden directory not found (set MF_GOLDEN)\n", stderr);
			exit(1);
		}
	}
	return path;
}

char *t_read(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while ((n += fread(buf + n, 1, cap - n - 1, fp)) == cap - 1)
		buf = realloc(buf, cap *= 2);
	fclose(fp);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

void t_write(const char *path, const char *data, size_t len)
{
	FILE *fp = fopen(path, "wb");
	ck_assert_msg(fp != NULL, "cannot write %s", path);
	fwrite(data, 1, len, fp);
	fclose(fp);
}

void t_same(const char *what, const char *expected, const char *actual)
{
	if (!strcmp(expected, actual))
		return;
	size_t line = 1, i = 0;
	for (; expected[i] && expected[i] == actual[i]; i++)
		line += expected[i] == '\n';
	size_t start = i;
	while (start > 0 && expected[start - 1] != '\n')
		start--;
	ck_abort_msg("%s differs at line %zu:\n  expected: %.*s\n  actual:   %.*s", what, line,
		     (int)strcspn(expected + start, "\n"), expected + start,
		     (int)strcspn(actual + start, "\n"), actual + start);
}

char *t_tmpdir(void)
{
	char *dir = strdup("/tmp/memshim-fmt-test.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

static int t_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

void t_rmtree(const char *dir)
{
	nftw(dir, t_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int t_run(char **argv, char **out, char **err)
{
	size_t on, en;
	FILE *o = open_memstream(out, &on), *e = open_memstream(err, &en);
	int argc = 0;
	while (argv[argc])
		argc++;
	int rc = mf_main(argc, argv, o, e);
	fclose(o);
	fclose(e);
	return rc;
}

char *t_draw(const char *option, const char *dir, const char *name, char **args)
{
	char *argv[16] = { "memshim-format", (char *)option }, *out, *err, *path;
	int argc = 2;
	ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
	argv[argc++] = path;
	for (; *args; args++)
		argv[argc++] = *args;
	argv[argc] = NULL;
	int rc = t_run(argv, &out, &err);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(err, "");
	free(out), free(err);
	return path;
}

char *t_draw_to_full_disk(const char *option, const char *dir, const char *name, const char *input)
{
	char *out, *err, *link;
	if (access("/dev/full", W_OK))
		return NULL;
	ck_assert_int_ge(asprintf(&link, "%s/%s", dir, name), 0);
	ck_assert_int_eq(symlink("/dev/full", link), 0);
	char *argv[] = { "memshim-format", (char *)option, link, (char *)input, NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_msg(strstr(err, ": cannot write: No space left on device\n") && !strchr(err, '\n')[1], "stderr: %s",
		      err);
	free(out), free(err);
	return link;
}

/* memshim-format's option parsing (formatter/cli/options.c) without files: each option lands in its
 * field, the mode is the one selected, every option given to a mode that does not take it is one
 * usage error naming both, and --help lists every option and mode of the tables. */
#include "util.h"
#include "base/base.h"
#include "model/opts.h"
#include "model/select.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *words; /* the last line parsed: A's values point into it */

/* Parses and checks the space-separated LINE (after "memshim-format"); *ERR gets what it said.
 * Free with done(). */
static int parse(const char *line, struct mf_args *a, char **err)
{
	char *copy = words = strdup(line), *argv[64] = { "memshim-format" }, *save = NULL, *out;
	int argc = 1;
	for (char *w = strtok_r(copy, " ", &save); w && argc < 63; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	size_t on, en;
	FILE *o = open_memstream(&out, &on), *e = open_memstream(err, &en);
	int rc = mf_parse_args(argc, argv, a, o, e);
	if (rc == MF_OK)
		rc = mf_check_args(a, e);
	fclose(o);
	fclose(e);
	free(out);
	return rc;
}

static void done(struct mf_args *a)
{
	mf_args_free(a);
	free(words);
	words = NULL;
}

static int parse_ok(const char *line, struct mf_args *a)
{
	char *err;
	int rc = parse(line, a, &err);
	ck_assert_msg(rc == MF_OK, "%s: exit %d: %s", line, rc, err);
	free(err);
	return rc;
}

START_TEST(test_values_land)
{
	struct mf_args a;
	parse_ok("--stage=train --calls --json-dir D --all f.json", &a);
	ck_assert_int_eq(a.o.mode, MF_DUMP);
	ck_assert_str_eq(a.o.stage, "train");
	ck_assert_str_eq(a.o.json_dir, "D");
	ck_assert_int_eq(a.o.calls, 1);
	ck_assert_int_eq(a.o.all, 1);
	ck_assert_str_eq(a.o.threshold_text, "5%,1MB"); /* the default */
	done(&a);

	parse_ok("--top 3 --sites --depth=7 --auto-merge f.json g.json", &a);
	ck_assert_int_eq(a.o.mode, MF_SITES);
	ck_assert_int_eq(a.o.top, 3);
	ck_assert_int_eq(a.o.depth, 7);
	ck_assert_int_eq(a.o.auto_merge, 1);
	ck_assert_int_eq(a.nfiles, 2);
	ck_assert_int_eq(a.o.by, MF_BY_NONE);
	done(&a);

	parse_ok("--sites --by=function --native f.json", &a);
	ck_assert_int_eq(a.o.by, MF_BY_FUNCTION);
	ck_assert_int_eq(a.o.native, 1);
	done(&a);
	parse_ok("--sites --by file f.json", &a);
	ck_assert_int_eq(a.o.by, MF_BY_FILE);
	done(&a);

	parse_ok("--flame x.SVG --gpu --size 300x400 f.json", &a);
	ck_assert_int_eq(a.o.mode, MF_FLAME);
	ck_assert_str_eq(a.o.mode_arg, "x.SVG");
	ck_assert_int_eq(a.o.flame_gpu, 1);
	ck_assert_int_eq(a.o.plot_w, 300);
	ck_assert_int_eq(a.o.plot_h, 400);
	done(&a);

	parse_ok("--threshold 3%,2MB --diff --allow-missing a.json b.json -- c.json", &a);
	ck_assert_int_eq(a.o.mode, MF_DIFF);
	ck_assert(a.o.threshold.pct == 3 && a.o.threshold.bytes == 2 << 20);
	ck_assert_int_eq(a.o.allow_missing, 1);
	ck_assert_int_eq(a.sep, 2);
	ck_assert_int_eq(a.nfiles, 3);
	done(&a);

	parse_ok("--compare=hf.json f.json", &a);
	ck_assert_int_eq(a.o.mode, MF_COMPARE);
	ck_assert_str_eq(a.o.mode_arg, "hf.json");
	done(&a);

	parse_ok("--plot p.png f.json -- --merge", &a);
	ck_assert_int_eq(a.o.mode, MF_PLOT); /* after "--" everything is a file */
	ck_assert_int_eq(a.nfiles, 2);
	done(&a);
}
END_TEST

/* LINE must be a usage error whose message holds every one of WANT (NULL-terminated). */
static void refused(const char *line, const char *const *want)
{
	struct mf_args a;
	char *err;
	int rc = parse(line, &a, &err);
	ck_assert_msg(rc == MF_BAD, "%s: exit %d, expected a usage error", line, rc);
	ck_assert_msg(!strncmp(err, "memshim-format: ", 16) && strchr(err, '\n') == err + strlen(err) - 1,
		      "%s: not one line: %s", line, err);
	for (; *want; want++)
		ck_assert_msg(strstr(err, *want), "%s: the error does not name %s: %s", line, *want, err);
	free(err);
	done(&a);
}

#define REFUSED(line, ...) refused(line, (const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_conflicts_name_both)
{
	REFUSED("--merge --calls f.json", "--calls only applies to the dump, not to --merge");
	REFUSED("--diff --merge a.json b.json", "--diff does not combine with --merge");
	REFUSED("--csv --json-dir D f.json", "--json-dir", "--csv");
	REFUSED("--sites --flame x.svg f.json", "--sites does not combine with --flame");
	REFUSED("--plot x.svg --stage train f.json", "--stage", "--plot");
	REFUSED("--compare hf.json --all f.json", "--all", "--compare");
	REFUSED("--flame x.svg --top 3 f.json", "--top only applies to --sites, not to --flame");
	REFUSED("--gpu f.json", "--gpu only applies to --flame, --speedscope and --pprof");
	REFUSED("--size 300x300 f.json", "--size only applies to --plot and --flame");
	REFUSED("--all --diff a.json b.json", "--all only applies to the dump, --merge, --plot, "
		"--sites, --speedscope and --pprof, not to --diff");
	REFUSED("--auto-merge --calls f.json", "--calls does not combine with --auto-merge");
}
END_TEST

START_TEST(test_bad_forms)
{
	REFUSED("--stagex f.json", "unknown option: --stagex");
	REFUSED("--all=1 f.json", "unknown option: --all=1");
	REFUSED("--recover=r f.json", "unknown option: --recover=r");
	REFUSED("f.json --stage=", "missing value for: --stage");
	REFUSED("f.json --depth", "missing value for: --depth");
	REFUSED("--sites --depth 0 f.json", "bad --depth", ": 0");
	REFUSED("--sites --top 1001 f.json", "bad --top", ": 1001");
	REFUSED("--sites --by module f.json", "bad --by (want line, function, file or framework)", ": module");
	REFUSED("--flame x.svg --by line f.json", "--by only applies to --sites, not to --flame");
	REFUSED("--native f.json", "--native only applies to --sites");
	REFUSED("--plot x.svg --size 100x300 f.json", "bad size", ": 100x300");
	REFUSED("--diff --threshold 5% --threshold 1MB a.json b.json", "--threshold given twice");
	REFUSED("--diff --threshold 5parsecs a.json b.json", "bad threshold", ": 5parsecs");
	REFUSED("--flame x.txt f.json", "--flame wants a file name ending in .svg, .png or .html: x.txt");
	REFUSED("--plot x.html f.json", "--plot wants a file name ending in .svg or .png: x.html");
	REFUSED("--diff a.json", "--diff takes OLD NEW");
	REFUSED("--diff a.json --", "--diff: no NEW file after --");
	REFUSED("--compare hf.json a.json b.json", "--compare takes one metrics file");
	REFUSED("--stage train", "no metrics file given");
}
END_TEST

/* A value OP reads that is good. */
static const char *good_value(const struct mf_option *op)
{
	switch (op->kind) {
	case MF_PICTURE: return " p.svg";
	case MF_COUNT: return " 3";
	case MF_CHOICE: return " line";
	case MF_SIZE: return " 300x300";
	case MF_THRESHOLD: return " 5%";
	case MF_TEXT: return " v";
	default: return "";
	}
}

/* The option that selects mode M, or NULL for the dump. */
static const struct mf_option *selector(int m)
{
	for (size_t i = 0; i < mf_noptions; i++)
		if (mf_options[i].selects && mf_options[i].modes == (1u << m))
			return &mf_options[i];
	return NULL;
}

/* Every option against every mode: taken where the table says, else refused naming both. */
START_TEST(test_every_pair)
{
	size_t checked = 0, refusals = 0;
	for (int m = 0; m < MF_NMODES; m++) {
		const struct mf_option *sel = selector(m);
		if (mf_modes[m].pick == MF_PICK_OWN)
			continue;
		for (size_t i = 0; i < mf_noptions; i++) {
			const struct mf_option *op = &mf_options[i];
			if (op == sel || op->kind >= MF_OWN || (!sel && op->selects))
				continue; /* alone, a mode's own option selects it */
			char line[256];
			snprintf(line, sizeof line, "%s%s%s%s%s %s", sel ? sel->name : "",
				 sel ? good_value(sel) : "", sel ? " " : "", op->name, good_value(op),
				 m == MF_DIFF ? "a.json b.json" : "a.json");
			struct mf_args a;
			char *err;
			int rc = parse(line, &a, &err);
			checked++;
			if (op->modes & (1u << m)) {
				ck_assert_msg(rc == MF_OK, "%s: refused: %s", line, err);
			} else {
				refusals++;
				ck_assert_msg(rc == MF_BAD, "%s: taken, but %s does not take %s", line,
					      mf_modes[m].name, op->name);
				ck_assert_msg(strstr(err, op->name), "%s: %s", line, err);
				ck_assert_msg(m == MF_DUMP || strstr(err, mf_modes[m].name), "%s: %s", line, err);
			}
			free(err);
			done(&a);
		}
	}
	ck_assert_uint_ge(checked, 100);
	ck_assert_uint_ge(refusals, 100);
}
END_TEST

START_TEST(test_help_from_tables)
{
	char *out, *err, *argv[] = { "memshim-format", "--stage", "x", "-h", "--bogus", NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 0); /* help stops the parse where it stands */
	ck_assert_str_eq(err, "");
	ck_assert(!strncmp(out, "usage: memshim-format [--stage NAME]", 36));
	for (size_t i = 0; i < mf_noptions; i++) {
		char *entry = NULL;
		if (!mf_options[i].help)
			continue;
		ck_assert_int_ge(asprintf(&entry, "\n  %s%s%s ", mf_options[i].name,
					  mf_options[i].arg ? " " : "", mf_options[i].arg ? mf_options[i].arg : ""), 0);
		ck_assert_msg(strstr(out, entry), "--help lacks %s", entry);
		free(entry);
	}
	for (int m = 1; m < MF_NMODES; m++) {
		char *line = NULL;
		ck_assert_int_ge(asprintf(&line, "\n       memshim-format %s", mf_modes[m].name), 0);
		ck_assert_msg(strstr(out, line), "--help lacks the usage of %s", mf_modes[m].name);
		free(line);
	}
	free(out), free(err);
}
END_TEST

Suite *options_suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("options");
	tcase_add_test(tc, test_values_land);
	tcase_add_test(tc, test_conflicts_name_both);
	tcase_add_test(tc, test_bad_forms);
	tcase_add_test(tc, test_every_pair);
	tcase_add_test(tc, test_help_from_tables);
	suite_add_tcase(s, tc);
	return s;
}

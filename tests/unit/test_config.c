/* The settings table and the MEMSHIM_STAGES parser: good values, bad values, warnings. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "suite.h"
#include "core/config.h"
#include "core/ms.h"
#include "capture.h"

static const char *env_names[16], *env_values[16];
static int nenv;

static const char *fake_getenv(const char *name)
{
	for (int i = 0; i < nenv; i++)
		if (strcmp(env_names[i], name) == 0)
			return env_values[i];
	return NULL;
}

static void set(const char *name, const char *value)
{
	env_names[nenv] = name;
	env_values[nenv++] = value;
}

/* Runs the loader with stderr captured; returns the number of "memshim:" lines. */
static char captured[65536];
static int load_capturing(struct ms_config *cfg)
{
	return load_capturing_into(cfg, fake_getenv, captured, sizeof captured);
}

static struct ms_config cfg;

/* Loads CFG with NAME=VALUE the only setting; returns the number of "memshim:" lines. */
static int load_only(const char *name, const char *value)
{
	nenv = 0;
	set(name, value);
	return load_capturing(&cfg);
}

START_TEST(defaults_when_unset)
{
	nenv = 0;
	ck_assert_int_eq(load_capturing(&cfg), 0);
	ck_assert_int_eq(cfg.disabled, 0);
	ck_assert_int_eq(cfg.log_level, MS_LOG_WARN);
	ck_assert_int_eq(cfg.follow_children, 1);
	ck_assert(cfg.spec.is_default);
	ck_assert_int_eq(cfg.spec.nstages, 4);
	ck_assert_str_eq(cfg.spec.stage[1].name, "train");
	ck_assert_int_eq(cfg.spec.stage[1].ntargets, 2);
	ck_assert_str_eq(cfg.spec.stage[1].targets[1], "transformers.trainer:Trainer._inner_training_loop");
	ck_assert(cfg.output[0] == '/');
	ck_assert(strstr(cfg.output, "/memshim_metrics.json") != NULL);
}
END_TEST

/* The default spec is copied in from a table, not parsed: the table is what its text parses to. */
START_TEST(the_default_table_is_the_default_text)
{
	static struct ms_spec parsed;
	nenv = 0;
	ck_assert_int_eq(load_capturing(&cfg), 0);
	memset(&parsed, 0, sizeof parsed);
	ck_assert_int_eq(ms_spec_parse(&parsed, ms_default_stages), 0);
	ck_assert_int_eq(cfg.spec.nstages, parsed.nstages);
	for (int i = 0; i < parsed.nstages; i++) {
		ck_assert_str_eq(cfg.spec.stage[i].name, parsed.stage[i].name);
		ck_assert_int_eq(cfg.spec.stage[i].ntargets, parsed.stage[i].ntargets);
		for (int t = 0; t < parsed.stage[i].ntargets; t++)
			ck_assert_str_eq(cfg.spec.stage[i].targets[t], parsed.stage[i].targets[t]);
	}
	/* a value with no good entry watches nothing: no fallback to the defaults */
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", "=x"), 1);
	ck_assert_int_eq(cfg.spec.nstages, 0);
}
END_TEST

START_TEST(good_values_are_used)
{
	nenv = 0;
	set("MEMSHIM_STAGES", " train = train_epoch | step ,eval=ns::Eval::run,train=lib.so:more");
	set("MEMSHIM_OUTPUT", "/tmp/out-%p.json");
	set("MEMSHIM_DISABLE", "yes");
	set("MEMSHIM_FOLLOW_CHILDREN", "0");
	set("MEMSHIM_LOG", "debug");
	set("MEMSHIM_SNAPSHOT_INTERVAL", "0.25");
	ck_assert_int_eq(load_capturing(&cfg), 0);
	ck_assert(!cfg.spec.is_default);
	ck_assert_int_eq(cfg.spec.nstages, 2);
	ck_assert_int_eq(cfg.spec.stage[0].ntargets, 3);
	ck_assert_str_eq(cfg.spec.stage[0].targets[0], "train_epoch");
	ck_assert_str_eq(cfg.spec.stage[0].targets[1], "step");
	ck_assert_str_eq(cfg.spec.stage[0].targets[2], "lib.so:more");
	ck_assert_str_eq(cfg.spec.stage[1].targets[0], "ns::Eval::run");
	ck_assert_str_eq(cfg.output, "/tmp/out-%p.json");
	ck_assert_int_eq(cfg.disabled, 1);
	ck_assert_int_eq(cfg.follow_children, 0);
	ck_assert_int_eq(cfg.log_level, MS_LOG_DEBUG);
	ck_assert(cfg.snapshot_interval == 0.25);
	ms_cfg.log_level = MS_LOG_WARN;
}
END_TEST

START_TEST(each_bad_stage_entry_warns_once_and_the_rest_is_used)
{
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", "ok=f,process=p,bad name=g,=h,noequals,empty=,x=a||b,,fine=z,"
						     "processing=q"),
			 6);
	ck_assert(strstr(captured, "\"bad name=g\"") != NULL);
	ck_assert(strstr(captured, "\"process=p\" ignored: \"process\" is the process-wide metrics' prefix") != NULL);
	ck_assert(strstr(captured, "\"noequals\"") != NULL);
	ck_assert_int_eq(cfg.spec.nstages, 3);
	ck_assert_str_eq(cfg.spec.stage[0].name, "ok");
	ck_assert_str_eq(cfg.spec.stage[1].name, "fine");
	ck_assert_str_eq(cfg.spec.stage[2].name, "processing");
	ck_assert(!ms_stage_name_valid("process") && ms_stage_name_valid("processing") && ms_stage_name_valid("Process"));
}
END_TEST

/* A target no detector takes (a ';' for a separator, a space or '-' in a name, an empty object)
 * warns; every form the detectors take is kept. */
START_TEST(targets_no_detector_takes_warn)
{
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", "a=train;,b=train eval,c=train-x,d=:f,e=g;h=i"), 5);
	ck_assert(strstr(captured, "\"a=train;\" ignored: a target is a Python name or a C/C++ symbol") != NULL);
	ck_assert_int_eq(cfg.spec.nstages, 0);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", "a=Trainer.train|mod.sub:Class.<locals>.f,b=ns::T::run(int) const,"
						     "c=/usr/lib/libfoo-1.2.so:f,d=libsqlite3.so.0:sqlite3_step,"
						     "e=A::~A|~A|ns::A::operator()|operator new,f=_ZN2ns1fEv"),
			 0);
	ck_assert_int_eq(cfg.spec.nstages, 6);
	ck_assert_int_eq(cfg.spec.stage[4].ntargets, 4);
}
END_TEST

START_TEST(snapshot_interval_auto_off_and_seconds)
{
	static const struct { const char *v; double want; } cases[] = {
		{ "auto", MS_SNAPSHOT_AUTO }, { "AUTO", MS_SNAPSHOT_AUTO }, { "off", 0 }, { "0", 0 }, { "1.5", 1.5 } };
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ck_assert_int_eq(load_only("MEMSHIM_SNAPSHOT_INTERVAL", cases[i].v), 0);
		ck_assert_msg(cfg.snapshot_interval == cases[i].want, "%s", cases[i].v);
	}
	nenv = 0;
	ck_assert_int_eq(load_capturing(&cfg), 0);
	ck_assert(cfg.snapshot_interval == MS_SNAPSHOT_AUTO); /* unset */
}
END_TEST

START_TEST(bad_values_fall_back_with_one_warning_each)
{
	static char huge[65537];
	memset(huge, 'x', sizeof huge - 1);
	nenv = 0;
	set("MEMSHIM_DISABLE", "maybe");
	set("MEMSHIM_LOG", "loud");
	set("MEMSHIM_FOLLOW_CHILDREN", "\xc3\xa9");
	set("MEMSHIM_SNAPSHOT_INTERVAL", "1e-9");
	set("MEMSHIM_OUTPUT", huge);
	set("MEMSHIM_TIMELINE", "");
	ck_assert_int_eq(load_capturing(&cfg), 5);
	ck_assert_int_eq(cfg.disabled, 0);
	ck_assert_int_eq(cfg.log_level, MS_LOG_WARN);
	ck_assert_int_eq(cfg.follow_children, 1);
	ck_assert(cfg.snapshot_interval == MS_SNAPSHOT_AUTO); /* the default policy */
	ck_assert(strstr(cfg.output, "memshim_metrics.json") != NULL);
	ck_assert(strstr(captured, "MEMSHIM_OUTPUT=\"xxxx") != NULL);
	ck_assert(strlen(captured) < 2000); /* a huge value is shown shortened */
}
END_TEST

START_TEST(sites_settings)
{
	static const struct { const char *v; int warn; long rate; } rates[] = {
		{ "65536", 0, 65536 }, { "1", 0, 1 }, { "1099511627776", 0, 1099511627776L },
		{ "0", 1, 524288 }, { "1099511627777", 1, 524288 }, { "+5", 1, 524288 }, { "5k", 0, 5120 },
		{ "512K", 0, 524288 }, { "128KiB", 0, 131072 }, { "1M", 0, 1048576 }, { "2mb", 0, 2097152 },
		{ "1G", 0, 1073741824L }, { "1T", 0, 1099511627776L }, { "2T", 1, 524288 }, { "0K", 1, 524288 },
		{ "5X", 1, 524288 }, { "5KK", 1, 524288 }, { "5 K", 1, 524288 }, { "K", 1, 524288 },
		{ "5Kx", 1, 524288 }, { " 5", 1, 524288 }, { "-5", 1, 524288 },
	};
	for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
		ck_assert_int_eq(load_only("MEMSHIM_SITES_RATE", rates[i].v), rates[i].warn);
		ck_assert_int_eq(cfg.sites_rate, rates[i].rate);
		ck_assert_int_eq(cfg.sites, 1);
	}
	static const struct { const char *v; int warn, mode; } modes[] = {
		{ "0", 0, MS_SITES_OFF }, { "off", 0, MS_SITES_OFF }, { "1", 0, MS_SITES_SAMPLED },
		{ "yes", 0, MS_SITES_SAMPLED }, { "exact", 0, MS_SITES_EXACT }, { "Exact", 0, MS_SITES_EXACT },
		{ "exactly", 1, MS_SITES_SAMPLED }, { "exact:train", 0, MS_SITES_SAMPLED }, { "2", 1, MS_SITES_SAMPLED },
	};
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
		ck_assert_msg(load_only("MEMSHIM_SITES", modes[i].v) == modes[i].warn, "MEMSHIM_SITES=%s: warnings",
			      modes[i].v);
		ck_assert_msg(cfg.sites == modes[i].mode, "MEMSHIM_SITES=%s: mode %d", modes[i].v, cfg.sites);
	}
}
END_TEST

/* MEMSHIM_SITES=exact:STAGE[,STAGE...] (or ':' between them): sampled, with the stages named; a
 * name that cannot be a stage's, an empty one or more than MS_SITES_EXACT_MAX: one warning, sampled
 * and none named. */
START_TEST(exact_stages_setting)
{
	static const struct { const char *v; int warn; const char *names; } cases[] = {
		{ "exact:train", 0, "train" }, { "EXACT:train,eval", 0, "train eval" }, { "exact:a:b_2,C", 0, "a b_2 C" },
		{ "exact:a,b,c,d,e,f,g,h", 0, "a b c d e f g h" }, { "exact:a,b,c,d,e,f,g,h,i", 1, "" },
		{ "exact:", 1, "" }, { "exact:train,", 1, "" }, { "exact:,train", 1, "" }, { "exact:tr-ain", 1, "" },
		{ "exact: train", 1, "" }, { "exact:train|eval", 1, "" }, { "exact", 0, "" }, { "1", 0, "" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ck_assert_msg(load_only("MEMSHIM_SITES", cases[i].v) == cases[i].warn, "MEMSHIM_SITES=%s: warnings",
			      cases[i].v);
		char names[256] = "";
		for (int k = 0; k < cfg.nsites_exact; k++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? " " : "", cfg.sites_exact[k]);
		ck_assert_msg(!strcmp(names, cases[i].names), "MEMSHIM_SITES=%s: names \"%s\"", cases[i].v, names);
		ck_assert_int_eq(cfg.sites, strcmp(cases[i].v, "exact") ? MS_SITES_SAMPLED : MS_SITES_EXACT);
	}
	nenv = 0;
	set("MEMSHIM_SITES", "exact:train");
	load_capturing(&ms_cfg);
	ck_assert(ms_sites_exact_names("train") && !ms_sites_exact_names("eval") && !ms_sites_exact_names("trai"));
	nenv = 0;
	load_capturing(&ms_cfg);
	ck_assert(!ms_sites_exact_names("train"));
}
END_TEST

/* Every bad value's warning says what the setting takes: the range and unit, the
 * minimum, the limit of a list. */
START_TEST(warnings_say_what_is_valid)
{
	static const struct { const char *name, *value, *says[3]; } cases[] = {
		{ "MEMSHIM_SITES_RATE", "0", { "under the minimum of 1 byte", "from 1 to 2^40 (1 TiB)", "512K" } },
		{ "MEMSHIM_SITES_RATE", "2T", { "over the maximum of 2^40 bytes", "K, M, G or T", NULL } },
		{ "MEMSHIM_SNAPSHOT_INTERVAL", "0.001", { "under the minimum of 0.01 seconds", "auto", "off" } },
		{ "MEMSHIM_SNAPSHOT_INTERVAL", "1e9", { "from 0.01 to 31536000", NULL, NULL } },
		{ "MEMSHIM_SITES", "exact:a,b,c,d,e,f,g,h,i", { "more than 8 stage names", "at most 8 stages", NULL } },
		{ "MEMSHIM_SITES", "exact:tr-ain", { "not a stage name", "[A-Za-z0-9_]+", NULL } },
		{ "MEMSHIM_DISABLE", "maybe", { "1, true, yes, on or 0, false, no, off", NULL, NULL } },
		{ "MEMSHIM_LOG", "loud", { "quiet, warn or debug", NULL, NULL } },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ck_assert_msg(load_only(cases[i].name, cases[i].value) == 1, "%s=%s: one warning: %s", cases[i].name,
			      cases[i].value, captured);
		for (int k = 0; k < 3 && cases[i].says[k]; k++)
			ck_assert_msg(strstr(captured, cases[i].says[k]), "%s=%s: no \"%s\" in %s", cases[i].name,
				      cases[i].value, cases[i].says[k], captured);
	}
}
END_TEST

/* Every boolean setting, and the two that take the same words (MEMSHIM_SITES,
 * MEMSHIM_SNAPSHOT_INTERVAL), set to WORD, and nothing else. */
static void set_only_every_boolean(const char *word)
{
	static const char *const names[] = { "MEMSHIM_DISABLE", "MEMSHIM_TIMELINE", "MEMSHIM_FOLLOW_CHILDREN",
					     "MEMSHIM_LIVE", "MEMSHIM_NATIVE_PLT", "MEMSHIM_SITES",
					     "MEMSHIM_SNAPSHOT_INTERVAL" };
	nenv = 0;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		set(names[i], word);
}

/* One rule for every boolean: the same words on and off, whatever the setting. */
START_TEST(one_rule_for_every_boolean)
{
	static const char *const yes[] = { "1", "yes", "YES", "on", "True" }, *const no[] = { "0", "no", "Off", "false" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		set_only_every_boolean(yes[i]);
		ck_assert_msg(load_capturing(&cfg) == 0, "%s: %s", yes[i], captured);
		ck_assert(cfg.disabled == 1 && cfg.timeline == 1 && cfg.follow_children == 1 && cfg.live == 1 &&
			  cfg.native_plt == 1 && cfg.sites == MS_SITES_SAMPLED);
		/* a number is seconds ("1"); a yes word is the default policy */
		ck_assert(cfg.snapshot_interval == (yes[i][0] == '1' ? 1.0 : MS_SNAPSHOT_AUTO));
	}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		set_only_every_boolean(no[i]);
		ck_assert_msg(load_capturing(&cfg) == 0, "%s: %s", no[i], captured);
		ck_assert(cfg.disabled == 0 && cfg.timeline == 0 && cfg.follow_children == 0 && cfg.live == 0 &&
			  cfg.native_plt == 0 && cfg.sites == MS_SITES_OFF && cfg.snapshot_interval == 0);
	}
}
END_TEST

/* MEMSHIM_STAGES="," holds no entry: one warning (set empty, it means no stages, silently). */
START_TEST(stages_without_an_entry_warn)
{
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", ","), 1);
	ck_assert(strstr(captured, "MEMSHIM_STAGES=\",\" holds no stage=target entry") != NULL);
	ck_assert_int_eq(cfg.spec.nstages, 0);
	ck_assert(!cfg.spec.is_default);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", " , ,"), 1);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", ""), 0);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", "train=f,"), 0);
	ck_assert_int_eq(cfg.spec.nstages, 1);
}
END_TEST

/* A value past the limits (stages, bytes of targets) gets one warning naming the limit and the
 * first entry left out, not one per entry; what fits is kept. */
START_TEST(an_over_long_spec_warns_once)
{
	static char spec[80000];
	size_t n = 0;
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(spec + n, sizeof spec - n, "s%d=f%d,", i, i);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", spec), 1);
	ck_assert(strstr(captured, "more than " MS_STR(MS_SPEC_MAX_STAGES) " stages") != NULL);
	ck_assert(strstr(captured, "8 entries from \"s32=f32\" on ignored") != NULL);
	ck_assert_int_eq(cfg.spec.nstages, MS_SPEC_MAX_STAGES);
	n = 0;
	for (int i = 0; n < sizeof spec - 3000; i++)
		n += (size_t)snprintf(spec + n, sizeof spec - n, "s%d=%0*d,", i % 20, 2000, i);
	ck_assert_msg(load_only("MEMSHIM_STAGES", spec) == 1, "%s", captured);
	ck_assert(strstr(captured, "MEMSHIM_STAGES is too long: its targets take at most " MS_STR(MS_SPEC_POOL) " bytes") != NULL);
	ck_assert_int_eq(cfg.spec.nstages, 16); /* 16 targets of 2000 bytes fit in 32 KiB */
	/* a stage's targets past its limit: that entry's warning says the limit */
	n = (size_t)snprintf(spec, sizeof spec, "t=f0");
	for (int i = 1; i <= MS_SPEC_MAX_TARGETS; i++)
		n += (size_t)snprintf(spec + n, sizeof spec - n, "|f%d", i);
	ck_assert_int_eq(load_only("MEMSHIM_STAGES", spec), 1);
	ck_assert(strstr(captured, "a stage takes at most " MS_STR(MS_SPEC_MAX_TARGETS)) != NULL);
}
END_TEST

START_TEST(quiet_silences_warnings)
{
	nenv = 0;
	set("MEMSHIM_LOG", "quiet");
	set("MEMSHIM_DISABLE", "maybe");
	ck_assert_int_eq(load_capturing(&cfg), 0);
	ms_cfg.log_level = MS_LOG_WARN;
}
END_TEST

START_TEST(long_specs_are_bounded)
{
	static char spec[70000];
	size_t n = 0;
	for (int i = 0; n < sizeof spec - 64; i++)
		n += (size_t)snprintf(spec + n, sizeof spec - n, "s%d=target_number_%d,", i % 40, i);
	nenv = 0;
	set("MEMSHIM_STAGES", spec);
	set("MEMSHIM_LOG", "quiet");
	load_capturing(&cfg);
	ck_assert_int_le(cfg.spec.nstages, MS_SPEC_MAX_STAGES);
	ck_assert_uint_le(cfg.spec.pool_used, MS_SPEC_POOL);
	ms_cfg.log_level = MS_LOG_WARN;
}
END_TEST

/* Every string over {a, b, c} up to 5 letters against every other: the band gives the full
 * table's distance where it is at most MOST, else MOST + 1. */
static int spell(int code, char *out)
{
	int n = 0;
	for (; code > 0; code = (code - 1) / 3)
		out[n++] = (char)('a' + (code - 1) % 3);
	out[n] = '\0';
	return n;
}

START_TEST(the_banded_distance_agrees_with_the_full_one)
{
	char a[8], b[8];
	int checked = 0, near = 0;
	for (int x = 0; x < 364; x++)
		for (int y = 0; y < 364; y++) {
			int n = spell(x, a), full = (spell(y, b), ms_edit_distance(a, (size_t)n, b));
			for (int most = 0; most <= 3; most++) {
				int want = full <= most ? full : most + 1;
				ck_assert_msg(ms_edit_distance_at_most(a, (size_t)n, b, most) == want,
					      "'%s' -> '%s' within %d: %d, want %d", a, b, most,
					      ms_edit_distance_at_most(a, (size_t)n, b, most), want);
				checked++;
				near += full <= most;
			}
		}
	ck_assert_int_eq(checked, 364 * 364 * 4);
	ck_assert_int_gt(near, 364 * 4); /* not only the equal pairs */
	char long_name[80];
	memset(long_name, 'x', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	ck_assert_int_eq(ms_edit_distance_at_most(long_name, strlen(long_name), long_name, 2), 3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("settings");
	tcase_add_test(tc, defaults_when_unset);
	tcase_add_test(tc, the_default_table_is_the_default_text);
	tcase_add_test(tc, good_values_are_used);
	tcase_add_test(tc, each_bad_stage_entry_warns_once_and_the_rest_is_used);
	tcase_add_test(tc, targets_no_detector_takes_warn);
	tcase_add_test(tc, bad_values_fall_back_with_one_warning_each);
	tcase_add_test(tc, snapshot_interval_auto_off_and_seconds);
	tcase_add_test(tc, sites_settings);
	tcase_add_test(tc, exact_stages_setting);
	tcase_add_test(tc, warnings_say_what_is_valid);
	tcase_add_test(tc, one_rule_for_every_boolean);
	tcase_add_test(tc, stages_without_an_entry_warn);
	tcase_add_test(tc, an_over_long_spec_warns_once);
	tcase_add_test(tc, quiet_silences_warnings);
	tcase_add_test(tc, long_specs_are_bounded);
	tcase_add_test(tc, the_banded_distance_agrees_with_the_full_one);
	suite_add_tcase(s, tc);
	return run_suite(s);
}

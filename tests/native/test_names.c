/* Unit suite for native target names (shim/native/names.c, pure logic): which targets are native,
 * and which symbols each one matches. */
#include <check.h>
#include "suite.h"
#include "native/native.h"

static struct ms_target t;

static int parse(const char *text)
{
	return ms_target_parse(&t, text, "prog");
}

START_TEST(which_targets_are_native)
{
	ck_assert_int_eq(parse("train_epoch"), 0);
	ck_assert_int_eq(t.kind, MS_TK_PLAIN);
	ck_assert_int_eq(parse("_ZN2ns7Trainer5trainEv"), 0);
	ck_assert_int_eq(parse("ns::Trainer::train"), 0);
	ck_assert_int_eq(t.kind, MS_TK_CXX);
	ck_assert_int_eq(parse("libfoo.so:bar"), 0);
	ck_assert_str_eq(t.name, "bar");
	ck_assert_int_eq((int)t.object_len, 9);
	ck_assert_int_eq(parse("/opt/x/libfoo.so.2:ns::f(int)"), 0);
	ck_assert_str_eq(t.name, "ns::f");
	ck_assert_int_eq(parse("prog:main_loop"), 0);
	ck_assert_int_eq(parse("Trainer.train"), -1);
	ck_assert_int_eq(parse("pkg.mod:Class.run"), -1);
	ck_assert_int_eq(parse("module:function"), -1);
	ck_assert_int_eq(parse(""), -1);
}
END_TEST

START_TEST(plain_names_match_the_symbol_and_its_clones)
{
	parse("train");
	ck_assert(ms_target_matches(&t, "train"));
	ck_assert(ms_target_matches(&t, "train.constprop.0"));
	ck_assert(ms_target_matches(&t, "train.cold"));
	ck_assert(!ms_target_matches(&t, "trainer"));
	ck_assert(ms_target_matches(&t, "_Z5traini"));   /* C++ train(int) at global scope */
	ck_assert(!ms_target_matches(&t, "_Z6trainsi"));
	ck_assert(!ms_target_matches(&t, "_ZN2ns5trainEv"));
}
END_TEST

START_TEST(cxx_names_match_through_their_mangled_prefix)
{
	parse("ns::Trainer::train");
	ck_assert(ms_target_matches(&t, "_ZN2ns7Trainer5trainEv"));
	ck_assert(ms_target_matches(&t, "_ZN2ns7Trainer5trainEi"));
	ck_assert(ms_target_matches(&t, "_ZNK2ns7Trainer5trainEv"));     /* const */
	ck_assert(ms_target_matches(&t, "_ZNR2ns7Trainer5trainEv"));     /* ref-qualified */
	ck_assert(ms_target_matches(&t, "_ZN2ns7Trainer5trainIiEEvT_")); /* template */
	ck_assert(ms_target_matches(&t, "_ZN2ns7Trainer5trainB5cxx11Ev")); /* ABI tag */
	ck_assert(ms_target_matches(&t, "_ZN2ns7Trainer5trainEv.isra.0"));
	ck_assert(!ms_target_matches(&t, "_ZN2ns7Trainer6train2Ev"));
	ck_assert(!ms_target_matches(&t, "_ZN2ns7Trainer5train5innerEv"));
	ck_assert(!ms_target_matches(&t, "_ZN3ns27Trainer5trainEv"));
	parse("train(int)");
	ck_assert(ms_target_matches(&t, "_Z5traini"));
	ck_assert(!ms_target_matches(&t, "_Z6trainsi"));
	ck_assert(!ms_target_matches(&t, "train"));
	parse("std::sort");
	ck_assert(ms_target_matches(&t, "_ZSt4sortIPiEvT_S1_"));
	parse("ns::Trainer::Trainer");
	ck_assert(ms_target_matches(&t, "_ZN2ns7TrainerC2Ev"));
	ck_assert(ms_target_matches(&t, "_ZN2ns7TrainerC1Ei"));
	parse("ns::Trainer::~Trainer");
	ck_assert(ms_target_matches(&t, "_ZN2ns7TrainerD1Ev"));
	ck_assert(!ms_target_matches(&t, "_ZN2ns7TrainerC1Ev"));
}
END_TEST

/* Rust's legacy mangling: the path without the build's hash, as nm -C and backtraces show it. */
START_TEST(rust_paths_match_without_their_hash)
{
	parse("prog::engine::Model::step");
	ck_assert(ms_target_matches(&t, "_ZN4prog6engine5Model4step17h0123456789abcdefE"));
	ck_assert(ms_target_matches(&t, "_ZN4prog6engine5Model4step17hee2f3767c65266ecE.llvm.1234"));
	ck_assert(!ms_target_matches(&t, "_ZN4prog6engine5Model4step17h0123456789abcdeE"));  /* 15 digits */
	ck_assert(!ms_target_matches(&t, "_ZN4prog6engine5Model4step17h0123456789abcdefEx"));
	ck_assert(!ms_target_matches(&t, "_ZN4prog6engine5Model5steps17h0123456789abcdefE"));
	ck_assert(!ms_target_matches(&t, "_ZN4prog6engine5Model4step5inner17h0123456789abcdefE"));
	parse("prog::main");
	ck_assert(ms_target_matches(&t, "_ZN4prog4main17h0123456789abcdefE"));
}
END_TEST

/* Rust's v0 mangling (rustc -C symbol-mangling-version=v0): the path as rustfilt prints it, the
 * crate's hash, generic arguments and an inherent impl's brackets left out. */
START_TEST(rust_v0_symbols_match_their_path)
{
	parse("v0t::engine::Model::step");
	ck_assert(ms_target_matches(&t, "_RNvMNtCs473ofah6B0H_3v0t6engineNtB2_5Model4step"));
	ck_assert(!ms_target_matches(&t, "_RNvMNtCs473ofah6B0H_3v0t6engineNtB2_5Model4grow"));
	ck_assert(!ms_target_matches(&t, "_RNvMNtCs473ofah6B0H_3v0t6otherNtB2_5Model4step"));
	ck_assert(!ms_target_matches(&t, "_RNCNvMNtCs473ofah6B0H_3v0t6engineNtB2_5Model4step0B4_")); /* a closure */
	ck_assert(!ms_target_matches(&t, "_RNvMNtCs473ofah6B0H_3v0t6engineNtB9_5Model4step"));     /* bad backref */
	parse("v0t::engine::generic");
	ck_assert(ms_target_matches(&t, "_RINvNtCs473ofah6B0H_3v0t6engine7genericdEB4_"));
	ck_assert(ms_target_matches(&t, "_RINvNtCs473ofah6B0H_3v0t6engine7genericmEB4_"));
	parse("v0t::engine::Boxed::grow");
	ck_assert(ms_target_matches(&t, "_RNvMs0_NtCs473ofah6B0H_3v0t6engineINtB5_5BoxedhE4growB7_"));
	parse("v0t::main");
	ck_assert(ms_target_matches(&t, "_RNvCs473ofah6B0H_3v0t4main"));
	ck_assert(!ms_target_matches(&t, "_RNvCs473ofah6B0H_3v0t4mai"));
	parse("v0t::engine::Model::run"); /* a trait's method: not by path */
	ck_assert(!ms_target_matches(&t, "_RNvXs_NtCs473ofah6B0H_3v0t6engineNtB4_5ModelNtB4_3Run3run"));
	parse("std::rt::lang_start"); /* generic arguments that are fn types and tuples */
	ck_assert(ms_target_matches(&t, "_RINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuECs473ofah6B0H_3v0t"));
	parse("std::sys::backtrace::__rust_begin_short_backtrace");
	ck_assert(ms_target_matches(&t, "_RINvNtNtCsjrHSEGnQ3l9_3std3sys9backtrace28___rust_begin_short_backtraceFEuuECs473ofah6B0H_3v0t"));
}
END_TEST

/* One template instance: builtin types, pointers and plain class names as arguments. */
START_TEST(template_instances_match_their_arguments)
{
	parse("accumulate_big<double>");
	ck_assert_int_eq(t.kind, MS_TK_CXX);
	ck_assert(ms_target_matches(&t, "_Z14accumulate_bigIdET_i"));
	ck_assert(!ms_target_matches(&t, "_Z14accumulate_bigIiET_i"));
	ck_assert(!ms_target_matches(&t, "_Z14accumulate_bigIdiET_i"));
	parse("accumulate_big<int>(int)");
	ck_assert(ms_target_matches(&t, "_Z14accumulate_bigIiET_i"));
	parse("ns::Box<unsigned long, const char*>::get");
	ck_assert(ms_target_matches(&t, "_ZN2ns3BoxImPKcE3getEv"));
	ck_assert(ms_target_matches(&t, "_ZNK2ns3BoxImPKcE3getEv"));
	ck_assert(!ms_target_matches(&t, "_ZN2ns3BoxIlPKcE3getEv"));
	parse("ns::make<Widget>");
	ck_assert(ms_target_matches(&t, "_ZN2ns4makeI6WidgetEET_v"));
	parse("ns::Box<int>::Box");
	ck_assert(ms_target_matches(&t, "_ZN2ns3BoxIiEC2Ev"));
	/* not encoded here (nested arguments, a repeated candidate): matches nothing */
	parse("f<std::vector<int>>");
	ck_assert_int_eq(t.nprefix, 0);
	parse("f<char*, char*>");
	ck_assert_int_eq(t.nprefix, 0);
	ck_assert_int_eq(parse("<lambda>"), -1); /* Python's */
}
END_TEST

START_TEST(objects_are_matched_by_name)
{
	parse("libfoo.so:bar");
	ck_assert(ms_target_object_matches(&t, "/usr/lib/libfoo.so"));
	ck_assert(ms_target_object_matches(&t, "/usr/lib/libfoo.so.1.2"));
	ck_assert(!ms_target_object_matches(&t, "/usr/lib/libfoobar.so"));
	ck_assert(!ms_target_object_matches(&t, "/usr/lib/xlibfoo.so"));
	parse("/opt/libfoo.so:bar");
	ck_assert(ms_target_object_matches(&t, "/opt/libfoo.so"));
	ck_assert(!ms_target_object_matches(&t, "/usr/libfoo.so"));
	parse("bar");
	ck_assert(ms_target_object_matches(&t, "/anything"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("native names");
	TCase *tc = tcase_create("names");
	tcase_add_test(tc, which_targets_are_native);
	tcase_add_test(tc, plain_names_match_the_symbol_and_its_clones);
	tcase_add_test(tc, cxx_names_match_through_their_mangled_prefix);
	tcase_add_test(tc, rust_paths_match_without_their_hash);
	tcase_add_test(tc, rust_v0_symbols_match_their_path);
	tcase_add_test(tc, template_instances_match_their_arguments);
	tcase_add_test(tc, objects_are_matched_by_name);
	suite_add_tcase(s, tc);
	return run_suite(s);
}

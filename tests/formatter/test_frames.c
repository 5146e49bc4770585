/* What --sites shows of a stack (formatter/model/frames.c): which frames are Python, the user's line
 * first with the native frames it called folded into one line, and the keys --by groups under. */
#include "util.h"
#include "model/opts.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

static struct mf_site make(json_t **frames, const char *const *names)
{
	*frames = json_array();
	for (; *names; names++)
		json_array_append_new(*frames, json_string(*names));
	return (struct mf_site){ 1, 1, *frames, 0, -1, -1, NULL, 0 };
}

/* Frees the N lines mf_site_lines returned. */
static void free_lines(char **lines, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

START_TEST(test_is_python)
{
	ck_assert(mf_frame_is_python("forward (/home/u/model.py:12)"));
	ck_assert(mf_frame_is_python("<module> (x.py:1)"));
	ck_assert(!mf_frame_is_python("dlopen+0x48 (libc.so.6)"));
	ck_assert(!mf_frame_is_python("_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)"));
	ck_assert(!mf_frame_is_python("0x7f3a12c0aa (libfoo.so)"));
	ck_assert(!mf_frame_is_python("cuMemAlloc_v2 (libcuda.so.1)"));
	ck_assert(!mf_frame_is_python("(7 other stacks)"));
	ck_assert(!mf_frame_is_python("f (:12)"));
}
END_TEST

static const char *const torch[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
	"_ZN2at6detail9empty_cpuEv+0x2a (libtorch_cpu.so)", "forward (/m.py:12)",
	"_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)", "step (/t.py:40)",
	"Py_RunMain+0x9e (libpython3.11.so.1.0)", NULL };

/* A native frame with its source line: "sym file.c:42 (obj)", the offset dropped, the file's base
 * name; still native, and its function alone for the fold and --by function. */
START_TEST(test_frame_lines)
{
	char *a = mf_frame_with_line("alloc_sixty+0x47 (sites_fixture)", "alloc_sixty", "/src/t/sites_fixture.c", 44);
	ck_assert_str_eq(a, "alloc_sixty sites_fixture.c:44 (sites_fixture)");
	ck_assert(!mf_frame_is_python(a));
	ck_assert_str_eq(mf_frame_line_at(a), " sites_fixture.c:44 (sites_fixture)");
	char *b = mf_frame_with_line("0x7f3a12c0aa (libfoo.so.1)", "foo_init", "foo.c", 7);
	ck_assert_str_eq(b, "foo_init foo.c:7 (libfoo.so.1)");
	char *c = mf_frame_with_line("0x7f3a12c0aa (libfoo.so.1)", NULL, "foo.c", 7);
	ck_assert_str_eq(c, "0x7f3a12c0aa foo.c:7 (libfoo.so.1)");
	char *d = mf_frame_with_line("_ZN3c109alloc_cpuEm+0x1f (libc10.so)", "x", "c10/core/alloc.cpp", 30);
	char *shown = mf_clean_frame(d), *bare = mf_frame_without_line(shown);
	ck_assert_str_eq(shown, "c10::alloc_cpu(unsigned long) alloc.cpp:30 (libc10.so)");
	ck_assert_str_eq(bare, "c10::alloc_cpu(unsigned long) (libc10.so)");
	/* no line: symbol+offset, an address, a Python frame */
	ck_assert_ptr_null(mf_frame_line_at("alloc_sixty+0x47 (sites_fixture)"));
	ck_assert_ptr_null(mf_frame_line_at("0x7f3a12c0aa (libfoo.so.1)"));
	ck_assert_ptr_null(mf_frame_line_at("forward (/home/u/model.py:12)"));
	ck_assert_ptr_null(mf_frame_line_at("x.c:12 (obj)"));
	const char *const stack[] = { d, "forward (/m.py:12)", NULL };
	json_t *fr;
	struct mf_site st = make(&fr, stack);
	char *key = mf_site_key(&st, MF_BY_FUNCTION, 1), **lines;
	ck_assert_str_eq(key, "c10::alloc_cpu (libc10.so)");
	size_t n = mf_site_lines(&st, 0, &lines);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(lines[1], "[native: c10::alloc_cpu]");
	free_lines(lines, n);
	free(key), free(a), free(b), free(c), free(d), free(shown), free(bare);
	json_decref(fr);
}
END_TEST

START_TEST(test_lines)
{
	json_t *fr;
	struct mf_site s = make(&fr, torch);
	char **lines;
	size_t n = mf_site_lines(&s, 0, &lines);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(lines[0], "forward (/m.py:12)");
	ck_assert_str_eq(lines[1], "[native: c10::alloc_cpu <- at::detail::empty_cpu]");
	ck_assert_str_eq(lines[2], "step (/t.py:40)");
	ck_assert(mf_site_python_first(&s, 0));
	free_lines(lines, n);
	n = mf_site_lines(&s, 1, &lines); /* --native: as recorded, demangled */
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(lines[0], "c10::alloc_cpu(unsigned long)+0x1f (libc10.so)");
	ck_assert_str_eq(lines[3], "_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)");
	ck_assert(!mf_site_python_first(&s, 1));
	free_lines(lines, n);
	json_decref(fr);
}
END_TEST

/* Python frames of installed libraries inside the user's call fold into one line below it; the
 * line shown first is the user's own, and --by keys follow it. */
static const char *const library[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
	"run_backward (/v/lib/python3.11/site-packages/torch/autograd/graph.py:979)",
	"_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)",
	"backward (/v/lib/python3.11/site-packages/torch/_tensor.py:623)",
	"_find_and_load (<frozen importlib._bootstrap>:1176)", "train (/home/u/t.py:22)",
	"<module> (/home/u/t.py:30)", NULL };

START_TEST(test_library_frames_fold)
{
	json_t *fr;
	struct mf_site s = make(&fr, library);
	char **lines;
	size_t n = mf_site_lines(&s, 0, &lines);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(lines[0], "train (/home/u/t.py:22)");
	ck_assert_str_eq(lines[1], "[library: run_backward (/v/lib/python3.11/site-packages/torch/autograd/graph.py:979) "
				   "<- backward <- _find_and_load]");
	ck_assert_str_eq(lines[2], "[native: c10::alloc_cpu <- … 1 more]"); /* the interpreter's: folded */
	ck_assert_str_eq(lines[3], "<module> (/home/u/t.py:30)");
	free_lines(lines, n);
	char *key = mf_site_key(&s, MF_BY_FUNCTION, 0);
	ck_assert_str_eq(key, "train (/home/u/t.py)");
	free(key);
	json_decref(fr);
}
END_TEST

/* Between the library's Python frames the interpreter's own frames (libpython, or a python
 * linked statically) are counted, not named; other native frames there are named after those the
 * innermost Python frame called; with nothing to name the line says what it holds. */
START_TEST(test_interpreter_frames_fold)
{
	static const char *const backward[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
		"_ZN2at10empty_likeEv+0x2a (libtorch_cpu.so)",
		"_engine_run_backward (/v/lib/python3.11/site-packages/torch/autograd/graph.py:768)",
		"_PyEval_EvalFrameDefault+0x1d2 (python3.11)", "PyObject_Call+0x6c (libpython3.11.so.1.0)",
		"_ZN5torch8autograd6python12PythonEngine7executeEv+0x4d (libtorch_python.so)",
		"backward (/v/lib/python3.11/site-packages/torch/_tensor.py:521)",
		"_PyEval_EvalFrameDefault+0x1d2 (python3.11)", "step (/home/u/train.py:44)",
		"_PyEval_EvalFrameDefault+0x1d2 (python3.11)", "main (/home/u/train.py:60)", NULL };
	static const char *const pure[] = { "<listcomp> (/usr/lib/python3.11/json/decoder.py:353)",
		"_PyEval_EvalFrameDefault+0x1d2 (libpython3.11.so.1.0)",
		"_PyFunction_Vectorcall+0x6c (libpython3.11.so.1.0)",
		"decode (/usr/lib/python3.11/json/decoder.py:337)", "load (/home/u/cfg.py:9)", NULL };
	json_t *fa, *fb;
	struct mf_site a = make(&fa, backward), b = make(&fb, pure);
	char **la, **lb;
	size_t na = mf_site_lines(&a, 0, &la), nb = mf_site_lines(&b, 0, &lb);
	ck_assert_uint_eq(na, 4);
	ck_assert_str_eq(la[0], "step (/home/u/train.py:44)");
	ck_assert_str_eq(la[2], "[native: c10::alloc_cpu <- at::empty_like <- "
			 "torch::autograd::python::PythonEngine::execute <- … 3 more]");
	ck_assert_str_eq(la[3], "main (/home/u/train.py:60)");
	ck_assert_uint_eq(nb, 3);
	ck_assert_str_eq(lb[1], "[library: <listcomp> (/usr/lib/python3.11/json/decoder.py:353) <- decode]");
	ck_assert_str_eq(lb[2], "[native: 2 frames of the interpreter]");
	free_lines(la, na), free_lines(lb, nb);
	json_decref(fa), json_decref(fb);
}
END_TEST

/* Three native names, then "… N more"; four are all shown rather than "… 1 more". */
START_TEST(test_fold_length)
{
	static const char *const four[] = { "a+0x1 (l.so)", "b+0x1 (l.so)", "c+0x1 (l.so)",
		"0x7f01 (l.so)", "f (/m.py:1)", NULL };
	static const char *const five[] = { "a+0x1 (l.so)", "b+0x1 (l.so)", "c+0x1 (l.so)",
		"d+0x1 (l.so)", "e+0x1 (l.so)", "f (/m.py:1)", NULL };
	json_t *fa, *fb;
	struct mf_site s4 = make(&fa, four), s5 = make(&fb, five);
	char **l4, **l5;
	size_t n4 = mf_site_lines(&s4, 0, &l4), n5 = mf_site_lines(&s5, 0, &l5);
	ck_assert_uint_eq(n4, 2);
	ck_assert_uint_eq(n5, 2);
	ck_assert_str_eq(l4[1], "[native: a <- b <- c <- 0x7f01 (l.so)]");
	ck_assert_str_eq(l5[1], "[native: a <- b <- c <- … 2 more]");
	free_lines(l4, n4), free_lines(l5, n5);
	json_decref(fa), json_decref(fb);
}
END_TEST

/* A Trainer run's sites all lead with main's trainer.train() (one call into a framework),
 * so they lead with the framework's own line that allocated, the user's line under it; sites whose
 * user's lines differ keep them first.  --by framework groups by that frame. */
static const char *const trainer_a[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
	"forward (/v/lib/python3.11/site-packages/transformers/activations.py:62)",
	"_call_impl (/v/lib/python3.11/site-packages/torch/nn/modules/module.py:1773)",
	"train (/v/lib/python3.11/site-packages/transformers/trainer.py:2325)", "main (/u/hf_trainer.py:77)",
	"<module> (/u/hf_trainer.py:93)", NULL };
static const char *const trainer_b[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
	"_init_group (/v/lib/python3.11/site-packages/torch/optim/adam.py:178)",
	"step (/v/lib/python3.11/site-packages/torch/optim/adam.py:230)", "main (/u/hf_trainer.py:77)",
	"<module> (/u/hf_trainer.py:93)", NULL };
static const char *const own_loop[] = { "_ZN3c109alloc_cpuEm+0x1f (libc10.so)",
	"_init_group (/v/lib/python3.11/site-packages/torch/optim/adam.py:178)", "train_loop (/u/t.py:30)", NULL };

START_TEST(test_framework_line_leads)
{
	json_t *fa, *fb, *fc;
	struct mf_site site[3] = { make(&fa, trainer_a), make(&fb, trainer_b), make(&fc, own_loop) };
	struct mf_sites s = { .s = site, .n = 2, .named = 2 };
	mf_sites_lead(&s);
	ck_assert(site[0].framework_first && site[1].framework_first);
	char **lines;
	size_t n = mf_site_lines(&site[0], 0, &lines);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(lines[0], "forward (/v/lib/python3.11/site-packages/transformers/activations.py:62)");
	ck_assert_str_eq(lines[1], "[native: c10::alloc_cpu]");
	ck_assert_str_eq(lines[2], "[library: _call_impl <- train]");
	ck_assert_str_eq(lines[3], "main (/u/hf_trainer.py:77)");
	ck_assert_str_eq(lines[4], "<module> (/u/hf_trainer.py:93)");
	free_lines(lines, n);
	char *key = mf_site_key(&site[1], MF_BY_FRAMEWORK, 0);
	ck_assert_str_eq(key, "_init_group (/v/lib/python3.11/site-packages/torch/optim/adam.py:178)");
	free(key);
	key = mf_site_key(&site[1], MF_BY_LINE, 0); /* --by line keeps the user's */
	ck_assert_str_eq(key, "main (/u/hf_trainer.py:77)");
	free(key);
	/* the user's own loop beside it: the user's lines tell the sites apart, they lead */
	site[0].framework_first = site[1].framework_first = 0;
	s.n = s.named = 3;
	mf_sites_lead(&s);
	ck_assert(!site[0].framework_first && !site[1].framework_first && !site[2].framework_first);
	n = mf_site_lines(&site[0], 0, &lines);
	ck_assert_str_eq(lines[0], "main (/u/hf_trainer.py:77)");
	free_lines(lines, n);
	/* one site alone says nothing about the others: its user's line leads */
	s.n = s.named = 1;
	mf_sites_lead(&s);
	ck_assert(!site[0].framework_first);
	json_decref(fa), json_decref(fb), json_decref(fc);
}
END_TEST

START_TEST(test_keys)
{
	static const char *const native[] = { "run_big+0x1a (libfoo.so)", "main+0x9 (prog)", NULL };
	json_t *a, *b;
	struct mf_site s = make(&a, torch), t = make(&b, native);
	const struct { const struct mf_site *s; enum mf_by by; int native; const char *key; } c[] = {
		{ &s, MF_BY_LINE, 0, "forward (/m.py:12)" },
		{ &s, MF_BY_FUNCTION, 0, "forward (/m.py)" },
		{ &s, MF_BY_FILE, 0, "/m.py" },
		{ &s, MF_BY_FUNCTION, 1, "c10::alloc_cpu (libc10.so)" },
		{ &t, MF_BY_LINE, 0, "run_big+0x1a (libfoo.so)" },
		{ &t, MF_BY_FUNCTION, 0, "run_big (libfoo.so)" },
		{ &t, MF_BY_FILE, 0, "libfoo.so" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char *k = mf_site_key(c[i].s, c[i].by, c[i].native);
		ck_assert_msg(!strcmp(k, c[i].key), "case %zu: %s, want %s", i, k, c[i].key);
		free(k);
	}
	json_decref(a), json_decref(b);
}
END_TEST

Suite *frames_suite(void)
{
	Suite *s = suite_create("frames");
	TCase *tc = tcase_create("frames");
	tcase_add_test(tc, test_is_python);
	tcase_add_test(tc, test_lines);
	tcase_add_test(tc, test_frame_lines);
	tcase_add_test(tc, test_library_frames_fold);
	tcase_add_test(tc, test_interpreter_frames_fold);
	tcase_add_test(tc, test_fold_length);
	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_framework_line_leads);
	suite_add_tcase(s, tc);
	return s;
}

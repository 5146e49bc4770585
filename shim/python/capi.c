/* The interpreter's C API, found at run time: nothing here links libpython.  The functions and
 * objects python/ uses are looked up once (ms_py_load_api) in the object that defines the
 * interpreter (an ELF lookup: the executable or libpython), else through dlsym's global search, and
 * kept in one table, ms_py.  Beside it, the few safe calls every python/ file makes (attributes of
 * built-in objects, string text, one-time warnings).  Calls nothing else in python/. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "core/ms.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "python/py.h"

struct ms_pyapi ms_py;

/* The interpreter's object and the warnings given. */
static struct {
	unsigned warned;                /* ms_py_warn_once's keys, one bit each */
	struct ms_elf_tables py_tables; /* of the object defining the C API (executable or libpython) */
	int have_py_tables;
} capi;

void ms_py_warn_once(int key, const char *what)
{
	unsigned bit = 1u << key;
	if (__atomic_fetch_or(&capi.warned, bit, __ATOMIC_RELAXED) & bit)
		return;
	ms_warn("%s", what);
}

void *ms_py_sym(const char *name)
{
	void *p = capi.have_py_tables ? ms_elf_tables_symbol(&capi.py_tables, name) : NULL;
	return p ? p : ms_real_dlsym(RTLD_DEFAULT, name);
}

int ms_py_capi_locate(const void *symbol)
{
	capi.have_py_tables = ms_elf_tables_of(ms_elf_object_of(symbol), &capi.py_tables) == 0;
	return capi.have_py_tables ? 0 : -1;
}

#define NEED(field, name)                                                                                              \
	do {                                                                                                           \
		*(void **)&ms_py.field = ms_py_sym(name);                                                              \
		if (!ms_py.field)                                                                                      \
			return name;                                                                                   \
	} while (0)

/* Fills ms_py; returns the name of a missing symbol, or NULL. */
const char *ms_py_load_api(void)
{
	if (ms_py.False)
		return NULL;
	NEED(IsInitialized, "Py_IsInitialized");
	NEED(GetVersion, "Py_GetVersion");
	const char *v = ms_py.GetVersion();
	if (!v || v[0] != '3' || v[1] != '.')
		return "Py_GetVersion";
	ms_py.minor = atoi(v + 2);
	NEED(ImportModule, "PyImport_ImportModule");
	NEED(GetAttrString, "PyObject_GetAttrString");
	NEED(SetAttrString, "PyObject_SetAttrString");
	NEED(CallFunctionObjArgs, "PyObject_CallFunctionObjArgs");
	NEED(GetItem, "PyObject_GetItem");
	NEED(Type, "PyObject_Type");
	NEED(TypeIsSubtype, "PyType_IsSubtype");
	NEED(LongFromLong, "PyLong_FromLong");
	NEED(LongAsLong, "PyLong_AsLong");
	NEED(UnicodeFromString, "PyUnicode_FromString");
	NEED(UnicodeInternFromString, "PyUnicode_InternFromString");
	NEED(UnicodeAsUTF8, "PyUnicode_AsUTF8");
	NEED(CFunctionNewEx, "PyCFunction_NewEx");
	NEED(IncRef, "Py_IncRef");
	NEED(DecRef, "Py_DecRef");
	NEED(ErrOccurred, "PyErr_Occurred");
	NEED(ErrClear, "PyErr_Clear");
	NEED(ErrFetch, "PyErr_Fetch");
	NEED(ErrRestore, "PyErr_Restore");
	NEED(DictGetItemString, "PyDict_GetItemString");
	NEED(EvalGetGlobals, "PyEval_GetGlobals");
	NEED(GetModuleDict, "PyImport_GetModuleDict");
	NEED(DictNext, "PyDict_Next");
	NEED(DictGetItem, "PyDict_GetItem");
	NEED(ModuleGetDict, "PyModule_GetDict");
	NEED(TupleSize, "PyTuple_Size");
	NEED(TupleGetItem, "PyTuple_GetItem");
	NEED(ThreadHead, "PyInterpreterState_ThreadHead");
	NEED(ThreadNext, "PyThreadState_Next");
	NEED(ListSize, "PyList_Size");
	NEED(ListGetItem, "PyList_GetItem");
	NEED(None, "_Py_NoneStruct");
	NEED(CodeType, "PyCode_Type");
	NEED(FunctionType, "PyFunction_Type");
	NEED(TypeType, "PyType_Type");
	NEED(ClassMethodType, "PyClassMethod_Type");
	NEED(StaticMethodType, "PyStaticMethod_Type");
	NEED(ModuleType, "PyModule_Type");
	NEED(False, "_Py_FalseStruct"); /* last: marks the table complete */
	return NULL;
}

int ms_py_in_main_interpreter(void)
{
	static void *(*get)(void);
	static void *(*main_interp)(void);
	static int looked;
	if (!looked) { /* GIL held: one thread at a time */
		*(void **)&get = ms_py_sym(ms_py.minor == 8 ? "_PyInterpreterState_Get" : "PyInterpreterState_Get");
		*(void **)&main_interp = ms_py_sym("PyInterpreterState_Main");
		looked = 1;
	}
	return !get || !main_interp || get() == main_interp();
}

void ms_py_decref(ms_pyobj *o)
{
	if (o)
		ms_py.DecRef(o);
}

ms_pyobj *ms_py_attr(ms_pyobj *o, const char *name)
{
	if (!o)
		return NULL;
	ms_pyobj *v = ms_py.GetAttrString(o, name);
	if (!v)
		ms_py.ErrClear();
	return v;
}

long ms_py_attr_long(ms_pyobj *o, const char *name, long fallback)
{
	ms_pyobj *v = ms_py_attr(o, name);
	if (!v)
		return fallback;
	long r = ms_py.LongAsLong(v);
	if (r == -1 && ms_py.ErrOccurred()) {
		ms_py.ErrClear();
		r = fallback;
	}
	ms_py_decref(v);
	return r;
}

int ms_py_text(ms_pyobj *o, char *buf, size_t size)
{
	if (!o)
		return -1;
	const char *s = ms_py.UnicodeAsUTF8(o);
	if (!s) {
		ms_py.ErrClear();
		return -1;
	}
	size_t n = strlen(s);
	if (n >= size)
		return -1;
	memcpy(buf, s, n + 1);
	return 0;
}

int ms_py_attr_text(ms_pyobj *o, const char *name, char *buf, size_t size)
{
	ms_pyobj *v = ms_py_attr(o, name);
	int r = ms_py_text(v, buf, size);
	ms_py_decref(v);
	return r;
}

/* Frames left without returning: the longjmp family, and C++ exceptions from the throw to the catch.
 * Each wrapper tells the hooks native stages set (intercept/hooks.h) and calls through; nothing else
 * changes.  A longjmp's target stack pointer is read from the jmp_buf, where glibc keeps it mangled
 * with the pointer guard (x86-64: xor with %fs:0x30, rotate left 17). */
#include <setjmp.h>
#include <stdint.h>
#include "core/ms.h"
#include "intercept/hooks.h"

#define JB_RSP 6
#define URC_FATAL_PHASE1_ERROR 3

typedef void (*jmp_fn)(struct __jmp_buf_tag *, int);
typedef int (*raise_fn)(void *);

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));
int _Unwind_RaiseException(void *exc);
int _Unwind_Resume_or_Rethrow(void *exc);
void *__cxa_begin_catch(void *exc);

void (*ms_before_jump)(uintptr_t target_sp);
void (*ms_on_unwind_begin)(void);
void (*ms_on_unwind_end)(void);

void ms_jump_resolve(void)
{
	(void)MS_REAL_LAZY(longjmp);
	(void)MS_REAL_LAZY(_longjmp);
	(void)MS_REAL_LAZY(siglongjmp);
	(void)MS_REAL_LAZY(__longjmp_chk);
}

/* ---- longjmp ------------------------------------------------------------------------------- */

static uintptr_t target_sp(const struct __jmp_buf_tag *env)
{
	uintptr_t v = (uintptr_t)env->__jmpbuf[JB_RSP], guard;
	__asm__("movq %%fs:0x30, %0" : "=r"(guard));
	v = (v >> 17) | (v << (64 - 17));
	return v ^ guard;
}

/* SLOT and NAME: the real function's ms_real_ pointer and name. */
static __attribute__((noreturn)) void jump(void **slot, const char *name, struct __jmp_buf_tag *env, int val)
{
	void (*hook)(uintptr_t) = __atomic_load_n(&ms_before_jump, __ATOMIC_ACQUIRE);
	if (hook)
		hook(target_sp(env));
	jmp_fn f = (jmp_fn)ms_resolve_lazy(slot, name);
	if (!f)
		f = MS_REAL_LAZY(longjmp);
	f(env, val);
	__builtin_unreachable();
}

EXPORT void longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump((void **)&ms_real_longjmp, "longjmp", env, val);
}

EXPORT void _longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump((void **)&ms_real__longjmp, "_longjmp", env, val);
}

EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	jump((void **)&ms_real_siglongjmp, "siglongjmp", env, val);
}

EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump((void **)&ms_real___longjmp_chk, "__longjmp_chk", env, val);
}

/* ---- C++ exceptions ------------------------------------------------------------------------ */

static void unwind_told(void (**hook)(void))
{
	void (*f)(void) = __atomic_load_n(hook, __ATOMIC_ACQUIRE);
	if (f)
		f();
}

/* Raising and rethrowing run the real unwinder between the begin and end hooks.  Returns only when
 * no handler was found (the caller then terminates) or on an error. */
static int raise_told(void **slot, const char *name, void *exc)
{
	raise_fn f = (raise_fn)ms_resolve_lazy(slot, name);
	if (!f)
		return URC_FATAL_PHASE1_ERROR;
	unwind_told(&ms_on_unwind_begin);
	int rc = f(exc);
	unwind_told(&ms_on_unwind_end);
	return rc;
}

EXPORT int _Unwind_RaiseException(void *exc)
{
	return raise_told((void **)&ms_real__Unwind_RaiseException, "_Unwind_RaiseException", exc);
}

EXPORT int _Unwind_Resume_or_Rethrow(void *exc)
{
	return raise_told((void **)&ms_real__Unwind_Resume_or_Rethrow, "_Unwind_Resume_or_Rethrow", exc);
}

EXPORT void *__cxa_begin_catch(void *exc)
{
	void *(*f)(void *) = MS_REAL_LAZY(__cxa_begin_catch);
	unwind_told(&ms_on_unwind_end);
	return f ? f(exc) : NULL;
}

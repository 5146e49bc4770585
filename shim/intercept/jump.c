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

/* ---- exceptions: C++, Rust, any language on the Itanium unwinder ---------------------------- */

/* The exceptions in flight on this thread that native stages were told of, innermost last.  One
 * ends when it is caught (__cxa_begin_catch: C++, or C++ catching another language's), when the
 * raise returns (no handler), or when its object is freed while in flight (Rust frees its own at
 * catch_unwind, without a call into the unwinder): malloc.c's general path asks ms_jump_freed. */
#define MAX_FLIGHTS 4
static __thread void *flights[MAX_FLIGHTS] MS_TLS;
__thread int ms_tls_flights MS_TLS;
/* Raised by cxx.c around the allocator's operator new; lowered here when that call raises. */
__thread int ms_tls_new_guarded MS_TLS;

static void unwind_told(void (**hook)(void))
{
	void (*f)(void) = __atomic_load_n(hook, __ATOMIC_ACQUIRE);
	if (f)
		f();
}

static int in_flight(const void *exc)
{
	for (int i = 0; i < ms_tls_flights; i++)
		if (flights[i] == exc)
			return 1;
	return 0;
}

/* Only while native stages watch the stack: nothing else needs to hear, and only then does every
 * free take the general path that can see the object go.  1 when EXC was added: a rethrow's real
 * _Unwind_Resume_or_Rethrow raises the same object again through our _Unwind_RaiseException, and
 * one catch ends it. */
static int flight_begins(void *exc)
{
	if (!__atomic_load_n(&ms_on_unwind_begin, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&ms_before_count, __ATOMIC_ACQUIRE) || ms_tls_flights == MAX_FLIGHTS || in_flight(exc))
		return 0;
	flights[ms_tls_flights++] = exc;
	unwind_told(&ms_on_unwind_begin);
	return 1;
}

static void flight_ends(void *exc)
{
	for (int i = ms_tls_flights - 1; i >= 0; i--)
		if (flights[i] == exc) {
			for (; i + 1 < ms_tls_flights; i++)
				flights[i] = flights[i + 1];
			ms_tls_flights--;
			unwind_told(&ms_on_unwind_end);
			return;
		}
}

void ms_jump_freed(void *ptr)
{
	if (ptr)
		flight_ends(ptr);
}

/* Raising and rethrowing run the real unwinder; it returns only when no handler was found (the
 * caller then terminates) or on an error.  The real functions are the caller's own
 * (intercept/scope.c): libgcc_s and libstdc++ are often in a local scope only. */
static int raise_told(struct ms_scoped *real, const void *caller, void *exc)
{
	raise_fn f = (raise_fn)ms_resolve_scoped(real, caller, NULL);
	if (!f)
		return URC_FATAL_PHASE1_ERROR; /* nothing defines it: the call could not have been bound */
	if (MS_UNLIKELY(ms_tls_new_guarded)) { /* thrown from the allocator's operator new (cxx.c) */
		ms_tls_new_guarded = 0;
		ms_tls_guard--;
	}
	int added = flight_begins(exc);
	int rc = f(exc);
	if (added)
		flight_ends(exc);
	return rc;
}

EXPORT int _Unwind_RaiseException(void *exc)
{
	static struct ms_scoped real = MS_SCOPED("_Unwind_RaiseException");
	return raise_told(&real, MS_CALLER(), exc);
}

EXPORT int _Unwind_Resume_or_Rethrow(void *exc)
{
	static struct ms_scoped real = MS_SCOPED("_Unwind_Resume_or_Rethrow");
	return raise_told(&real, MS_CALLER(), exc);
}

EXPORT void *__cxa_begin_catch(void *exc)
{
	static struct ms_scoped real = MS_SCOPED("__cxa_begin_catch");
	void *(*f)(void *) = (void *(*)(void *))ms_resolve_scoped(&real, MS_CALLER(), NULL);
	flight_ends(exc);
	return f ? f(exc) : NULL;
}

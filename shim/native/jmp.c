/* longjmp and friends: frames jumped over never return, so their stages close here, before the
 * jump (exceptions and forced unwinds are seen by the trampolines' personality instead).  The
 * target stack pointer is read from the jmp_buf, where glibc keeps it mangled with the pointer
 * guard (x86-64: xor with %fs:0x30, rotate left 17). */
#include <setjmp.h>
#include <stdint.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/native.h"

#define JB_RSP 6

typedef void (*jmp_fn)(struct __jmp_buf_tag *, int);

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

/* Looked up early: a longjmp out of a signal handler must not have to call dlsym. */
void ms_jmp_init(void)
{
	(void)MS_REAL_LAZY(longjmp);
	(void)MS_REAL_LAZY(_longjmp);
	(void)MS_REAL_LAZY(siglongjmp);
	(void)MS_REAL_LAZY(__longjmp_chk);
}

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
	ms_native_discard_below(target_sp(env));
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

/* longjmp and friends: frames jumped over never return, so their stages close here, before the
 * jump (exceptions and forced unwinds are seen by the trampolines' personality instead).  The
 * target stack pointer is read from the jmp_buf, where glibc keeps it mangled with the pointer
 * guard (x86-64: xor with %fs:0x30, rotate left 17). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdint.h>
#include "core/ms.h"
#include "native/native.h"

#define EXPORT __attribute__((visibility("default")))
#define JB_RSP 6

typedef void (*jmp_fn)(struct __jmp_buf_tag *, int);

void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));
void ms_jmp_init(void);

static jmp_fn real_longjmp, real__longjmp, real_siglongjmp, real_longjmp_chk;

static jmp_fn find(jmp_fn *cache, const char *name)
{
	jmp_fn f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!f) {
		ms_tls_guard++;
		f = (jmp_fn)ms_real_dlsym(RTLD_NEXT, name);
		if (!f) /* still resolving: our dlsym is a tail call, so "next" is still after us */
			f = (jmp_fn)dlsym(RTLD_NEXT, name);
		ms_tls_guard--;
		__atomic_store_n(cache, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* Looked up early: a longjmp out of a signal handler must not have to call dlsym. */
void ms_jmp_init(void)
{
	find(&real_longjmp, "longjmp");
	find(&real__longjmp, "_longjmp");
	find(&real_siglongjmp, "siglongjmp");
	find(&real_longjmp_chk, "__longjmp_chk");
}

static uintptr_t target_sp(const struct __jmp_buf_tag *env)
{
	uintptr_t v = (uintptr_t)env->__jmpbuf[JB_RSP], guard;
	__asm__("movq %%fs:0x30, %0" : "=r"(guard));
	v = (v >> 17) | (v << (64 - 17));
	return v ^ guard;
}

static __attribute__((noreturn)) void jump(jmp_fn *cache, const char *name, struct __jmp_buf_tag *env, int val)
{
	ms_native_discard_below(target_sp(env));
	jmp_fn f = find(cache, name);
	if (!f)
		f = find(&real_longjmp, "longjmp");
	f(env, val);
	__builtin_unreachable();
}

EXPORT void longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_longjmp, "longjmp", env, val);
}

EXPORT void _longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real__longjmp, "_longjmp", env, val);
}

EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_siglongjmp, "siglongjmp", env, val);
}

EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_longjmp_chk, "__longjmp_chk", env, val);
}

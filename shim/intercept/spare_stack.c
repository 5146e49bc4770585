/* A 256 KiB stack in .lbss (no page of it touched until used) for the report's last words, taken by
 * one thread at a time.  The switch is a few instructions of assembly: the callee sees an aligned
 * stack as after any call, and the caller's stack pointer waits in a callee-saved register. */
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "core/sys.h"
#include "intercept/spare_stack.h"

#define SPARE_STACK_SIZE (256 * 1024)
static unsigned char spare[SPARE_STACK_SIZE] MS_LARGE __attribute__((aligned(64)));
static int taken;

/* Whether this thread runs on its alternate signal stack now (one system call). */
static int on_alternate_stack(void)
{
	stack_t ss;
	return syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

/* FN(ARG) with the stack pointer at TOP (16-byte aligned); every register a call may change is
 * declared changed (AVX-512's upper registers are never live in the shim's code). */
static void call_at(void (*fn)(void *), void *arg, void *top)
{
	__asm__ volatile("mov %%rsp, %%rbx\n\t"
			 "mov %[top], %%rsp\n\t"
			 "call *%[fn]\n\t"
			 "mov %%rbx, %%rsp"
			 : "+D"(arg), [fn] "+r"(fn), [top] "+r"(top)
			 :
			 : "rbx", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
			   "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
			   "xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)",
			   "st(7)");
}

void ms_on_spare_stack(void (*fn)(void *), void *arg)
{
	if (!on_alternate_stack() || __atomic_exchange_n(&taken, 1, __ATOMIC_ACQUIRE)) {
		fn(arg);
		return;
	}
	/* a handler with SA_ONSTACK entered meanwhile would start at the top of the alternate stack (the
	 * kernel sees this thread off it), over the frames waiting there: asynchronous signals wait */
	uint64_t old;
	int masked = ms_sys_sigmask(SIG_BLOCK, ~MS_SIG_SYNCHRONOUS, &old) == 0;
	call_at(fn, arg, spare + sizeof spare);
	__atomic_store_n(&taken, 0, __ATOMIC_RELEASE);
	if (masked)
		ms_sys_sigmask(SIG_SETMASK, old, NULL);
}

/* A program that locks itself into seccomp (prctl PR_SET_SECCOMP; the seccomp system call through
 * syscall(), as libseccomp makes it) has opened what it needs: from then on a system call it never
 * makes itself may kill it.  The hook lifecycle.c sets writes what needs system calls first (the
 * live record, a snapshot) and marks the process sandboxed; memshim then makes no system call of
 * its own (doc/safety.md, "Programs that lock themselves into seccomp").  Both wrappers make the
 * call themselves, as the C library's do: no real function is looked up, so they work before the
 * library starts. */
#include <errno.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include "core/ms.h"
#include "core/sandbox.h"
#include "intercept/hooks.h"

void (*ms_on_sandbox)(int entering);

/* The system call NR with six arguments, its result as the kernel gives it (-errno on failure). */
static inline long raw_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The C library's convention: -1 and errno on failure. */
static long checked(long r)
{
	if ((unsigned long)r > -4096UL) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static void tell(int entering)
{
	void (*f)(int) = __atomic_load_n(&ms_on_sandbox, __ATOMIC_ACQUIRE);
	if (f)
		f(entering);
}

/* A call that installs a seccomp filter (or strict mode): told before, and after when it failed
 * (a filter stacked on one already in force changes nothing). */
static __attribute__((noinline)) long installing(int strict, long nr, long a, long b, long c, long d, long e, long f)
{
	int was = ms_sandboxed();
	if (!was)
		tell(strict ? MS_SANDBOX_STRICT : MS_SANDBOX_FILTER);
	long r = raw_syscall6(nr, a, b, c, d, e, f);
	if ((unsigned long)r > -4096UL && !was)
		tell(MS_SANDBOX_NONE); /* refused (no_new_privs unset, a bad filter): no sandbox */
	return checked(r);
}

/* Reached only from the assembly below. */
long ms_seccomp_syscall(long nr, long a, long b, long c, long d, long e, long f);
long ms_syscall_failed(long r);

/* syscall(SYS_seccomp, ...): the same registers as syscall()'s (its seventh argument on the stack). */
__attribute__((used, visibility("hidden"))) long ms_seccomp_syscall(long nr, long a, long b, long c, long d, long e,
								    long f)
{
	if (a == SECCOMP_SET_MODE_STRICT || a == SECCOMP_SET_MODE_FILTER)
		return installing(a == SECCOMP_SET_MODE_STRICT, nr, a, b, c, d, e, f);
	return checked(raw_syscall6(nr, a, b, c, d, e, f));
}

/* The error path of syscall() below: R is -errno. */
__attribute__((used, visibility("hidden"))) long ms_syscall_failed(long r)
{
	return checked(r);
}

/* syscall() as the C library writes it (every process calls it, memshim most of all: no variadic
 * prologue), but for SYS_seccomp, which goes to ms_seccomp_syscall with its arguments in place. */
__asm__(".text\n"
	".globl syscall\n"
	".type syscall, @function\n"
	"syscall:\n"
	".cfi_startproc\n"
	"	cmpq $" MS_STR(SYS_seccomp) ", %rdi\n"
					    "	je ms_seccomp_syscall\n"
					    "	movq %rdi, %rax\n"
					    "	movq %rsi, %rdi\n"
					    "	movq %rdx, %rsi\n"
					    "	movq %rcx, %rdx\n"
					    "	movq %r8, %r10\n"
					    "	movq %r9, %r8\n"
					    "	movq 8(%rsp), %r9\n"
					    "	syscall\n"
					    "	cmpq $-4095, %rax\n"
					    "	jae 1f\n"
					    "	ret\n"
					    "1:	movq %rax, %rdi\n"
					    "	jmp ms_syscall_failed\n"
					    ".cfi_endproc\n"
					    ".size syscall, .-syscall\n");

EXPORT int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long), d = va_arg(ap, long);
	va_end(ap);
	if (MS_UNLIKELY(option == PR_SET_SECCOMP))
		return (int)installing(a == SECCOMP_MODE_STRICT, SYS_prctl, option, a, b, c, d, 0);
	return (int)checked(raw_syscall6(SYS_prctl, option, a, b, c, d, 0));
}

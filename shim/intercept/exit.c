/* _exit and _Exit end the process without running exit handlers: the final metrics file is
 * written first, by the hook lifecycle.c sets once tracking starts. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "intercept/hooks.h"

void (*ms_before_exit)(const char *reason);

static void before_exit(void)
{
	void (*f)(const char *) = __atomic_load_n(&ms_before_exit, __ATOMIC_ACQUIRE);
	if (f)
		f("_exit");
}

EXPORT void _exit(int status)
{
	before_exit();
	if (ms_real__exit)
		ms_real__exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	before_exit();
	if (ms_real__Exit)
		ms_real__Exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* The one unwinder cursor of the shim: native stages (native/frames.c) and call-site stacks
 * (sites/stacks.c) walk up the stack through it.  A walk starts at its caller's frame and steps
 * with the quick unwinder (native/cfi.c), or with libunwind where the caller asks (native stages
 * fall back to it for frames the quick one does not read).  A return-address slot a native stage's
 * trampoline took over is reported as the trampoline (raw) and the return address it stands for
 * (ip); stepping on goes on from that return address, as if the trampoline were not there.
 *
 * Runs inside allocation hooks: no locks, no allocation, nothing written but the cursor.
 * libunwind is loaded with dlopen when native stages are configured, not linked: every other
 * process would pay for loading it and its dependencies at start. */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "intercept/fds.h"
#include "intercept/hooks.h"
#include "intercept/got.h"
#include "native/native.h"

_Static_assert(sizeof(unw_context_t) <= sizeof(((struct ms_unw_space *)0)->context), "libunwind's context fits");
_Static_assert(sizeof(unw_cursor_t) <= sizeof(((struct ms_unw_space *)0)->cursor), "libunwind's cursor fits");

int (*ms_unw_getcontext)(void *context);

/* libunwind's local-only functions, once loaded (ms_unwinder_init). */
static struct {
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*is_signal_frame)(unw_cursor_t *);
} unw;

static uintptr_t load(uintptr_t addr)
{
	return *(volatile uintptr_t *)addr;
}

void ms_cursor_at(struct ms_cursor *c, const uintptr_t start[3])
{
	c->sp = start[0];
	c->rbp = start[1];
	c->full = NULL;
	c->slot = start[0] - 8;
	ms_cursor_arrive(c, start[2]);
}

/* libunwind's idea of IP and SP for C's frame. */
static void full_regs(unw_cursor_t *cur, uintptr_t *ip, uintptr_t *sp)
{
	unw_word_t v;
	unw.get_reg(cur, UNW_REG_IP, &v);
	*ip = v;
	unw.get_reg(cur, UNW_REG_SP, &v);
	*sp = v;
}

int ms_cursor_full_init(struct ms_cursor *c, struct ms_unw_space *space)
{
	unw_cursor_t *cur = (unw_cursor_t *)space->cursor;
	if (unw.init_local(cur, (unw_context_t *)space->context) < 0)
		return -1;
	uintptr_t ip, sp;
	full_regs(cur, &ip, &sp);
	c->sp = sp;
	c->rbp = 0;
	c->full = cur;
	c->slot = sp - 8;
	ms_cursor_arrive(c, ip);
	return 0;
}

/* A step with libunwind.  A trampoline's frame (its own unwind entry, between the function that
 * returned into it and that function's caller) is passed on the way: C stood for it already. */
int ms_cursor_full_step(struct ms_cursor *c)
{
	unw_cursor_t *cur = c->full;
	if (unw.is_signal_frame(cur) > 0)
		return 2;
	if ((c->tramp >= 0 && unw.step(cur) <= 0) || unw.step(cur) <= 0)
		return 0; /* the outermost frame */
	uintptr_t ip, sp;
	full_regs(cur, &ip, &sp);
	if (load(sp - 8) != ip)
		return 0; /* not a plain return-address slot */
	c->sp = sp;
	c->slot = sp - 8;
	ms_cursor_arrive(c, ip);
	return 1;
}

/* ---- libunwind's pipe, out of the program's way ---------------------------------------------- */

/* libunwind's pipe2, through its own GOT slot: the pipe that validates memory (opened at its
 * first use and again whenever a read finds it closed) is made as asked, then both ends move to
 * high numbers, so the program's fds are the numbers it would get without the shim.  Where they
 * cannot move (a tiny fd limit), there is no pipe: libunwind then treats the memory it would
 * validate (frame-pointer guesses where unwind information is missing) as unreadable.  Both ends
 * are -1 on failure, never the numbers libunwind closed before: it would close them again, and
 * they may be the program's by then. */
static int pipe2_out_of_the_way(int fds[2], int flags)
{
	int made[2], saved = errno;
	fds[0] = fds[1] = -1;
	if (syscall(SYS_pipe2, made, flags) != 0)
		return -1;
	int top = ms_fd_top(), cmd = (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD;
	int high[2] = { ms_fd_move_high(made[0], top, cmd), ms_fd_move_high(made[1], top, cmd) };
	if (high[0] < 0 || high[1] < 0) {
		for (int i = 0; i < 2; i++)
			if (high[i] >= 0)
				syscall(SYS_close, high[i]);
		errno = EMFILE;
		return -1;
	}
	fds[0] = high[0];
	fds[1] = high[1];
	errno = saved;
	return 0;
}

static void take_slot(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg)
{
	(void)sym, (void)arg;
	ms_got_write(o, slot, (uintptr_t)pipe2_out_of_the_way);
}

static int find_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const struct link_map *map = arg;
	if (info->dlpi_addr != map->l_addr)
		return 0;
	struct ms_got_object o;
	if (ms_got_object_at(info->dlpi_addr, (const Elf64_Dyn *)map->l_ld, info->dlpi_phdr, info->dlpi_phnum, &o) == 0)
		ms_got_slots(&o, "pipe2", take_slot, NULL);
	return 1;
}

/* Before libunwind's first call: its calls of pipe2 go to pipe2_out_of_the_way. */
static void move_pipe_of(void *handle)
{
	struct link_map *map = NULL;
	if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map)
		dl_iterate_phdr(find_loaded, map);
}

#define UNW_NAME2(f) #f
#define UNW_NAME(f) UNW_NAME2(f) /* the symbol libunwind's header maps F to (_ULx86_64_step) */

/* Loads libunwind and publishes its functions only when every one was found. */
void ms_unwinder_init(void)
{
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		ms_debug("native stages: libunwind not found: frames the quick unwinder does not read end a look");
		return;
	}
	move_pipe_of(h);
	void *f[5] = { ms_real_dlsym(h, UNW_NAME(unw_tdep_getcontext)), ms_real_dlsym(h, UNW_NAME(unw_init_local)),
		       ms_real_dlsym(h, UNW_NAME(unw_step)), ms_real_dlsym(h, UNW_NAME(unw_get_reg)),
		       ms_real_dlsym(h, UNW_NAME(unw_is_signal_frame)) };
	int (*policy)(unw_addr_space_t, unw_caching_policy_t) =
		(int (*)(unw_addr_space_t, unw_caching_policy_t))ms_real_dlsym(h, UNW_NAME(unw_set_caching_policy));
	unw_addr_space_t *space = (unw_addr_space_t *)ms_real_dlsym(h, UNW_NAME(unw_local_addr_space));
	for (int i = 0; i < 5; i++)
		if (!f[i])
			return;
	if (policy && space)
		policy(*space, UNW_CACHE_PER_THREAD);
	*(void **)&unw.init_local = f[1];
	*(void **)&unw.step = f[2];
	*(void **)&unw.get_reg = f[3];
	*(void **)&unw.is_signal_frame = f[4];
	__atomic_store_n((void **)&ms_unw_getcontext, f[0], __ATOMIC_RELEASE); /* the one a walk tests */
}

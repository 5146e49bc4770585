/* core/sys.h's ms_sys_sigmask: the thread's mask it leaves is the one pthread_sigmask(3) leaves for
 * the same set (the C library's own signals 32 and 33 never blocked), and errno is kept. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include "suite.h"
#include "core/sys.h"

/* The mask a sigset_t holds: its first 64 bits. */
static uint64_t bits_of(const sigset_t *set)
{
	uint64_t bits;
	memcpy(&bits, set, sizeof bits);
	return bits;
}

/* The calling thread's mask, as the kernel's 64 bits. */
static uint64_t current_mask(void)
{
	sigset_t now;
	pthread_sigmask(SIG_BLOCK, NULL, &now);
	return bits_of(&now);
}

/* SET through both (HOW each time from the same starting mask): the same mask after. */
static void same_as_pthread(int how, uint64_t set)
{
	sigset_t start, c_set;
	pthread_sigmask(SIG_SETMASK, NULL, &start);
	sigemptyset(&c_set);
	for (int sig = 1; sig <= 64; sig++)
		if (set & MS_SIGBIT(sig))
			sigaddset(&c_set, sig);
	pthread_sigmask(how, &c_set, NULL);
	uint64_t want = current_mask();
	pthread_sigmask(SIG_SETMASK, &start, NULL);
	errno = 1234;
	ck_assert_int_eq(ms_sys_sigmask(how, set, NULL), 0);
	ck_assert_int_eq(errno, 1234);
	uint64_t got = current_mask();
	pthread_sigmask(SIG_SETMASK, &start, NULL);
	ck_assert_msg(got == want, "how %d, set %#llx: mask %#llx, pthread_sigmask's %#llx", how,
		      (unsigned long long)set, (unsigned long long)got, (unsigned long long)want);
}

START_TEST(masks_as_pthread_sigmask)
{
	const uint64_t sets[] = { 0, ~UINT64_C(0), MS_SIGBIT(SIGUSR1), MS_SIGBIT(32) | MS_SIGBIT(33),
				  ~(MS_SIGBIT(SIGSEGV) | MS_SIGBIT(SIGBUS) | MS_SIGBIT(SIGFPE) | MS_SIGBIT(SIGILL)) };
	const int hows[] = { SIG_BLOCK, SIG_SETMASK, SIG_UNBLOCK };
	for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
		for (size_t h = 0; h < sizeof hows / sizeof *hows; h++)
			same_as_pthread(hows[h], sets[i]);
}
END_TEST

/* OLD gets the mask as it was, and giving it back restores it. */
START_TEST(old_mask_restores)
{
	sigset_t start;
	uint64_t old;
	pthread_sigmask(SIG_SETMASK, NULL, &start);
	uint64_t before = current_mask();
	ck_assert_int_eq(ms_sys_sigmask(SIG_BLOCK, MS_SIGBIT(SIGUSR2) | MS_SIGBIT(SIGTERM), &old), 0);
	ck_assert(current_mask() & MS_SIGBIT(SIGUSR2));
	ck_assert(current_mask() & MS_SIGBIT(SIGTERM));
	ck_assert_uint_eq(old, before);
	ms_sys_sigmask(SIG_SETMASK, old, NULL);
	ck_assert_uint_eq(current_mask(), before);
	pthread_sigmask(SIG_SETMASK, &start, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sys");
	TCase *tc = tcase_create("sigmask");
	tcase_add_test(tc, masks_as_pthread_sigmask);
	tcase_add_test(tc, old_mask_restores);
	suite_add_tcase(s, tc);
	return run_suite(s);
}

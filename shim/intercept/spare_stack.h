/* memshim's last work (the file, a fatal signal's re-raise) on a stack of its own when the caller's
 * may be too small for it: a signal handler's alternate stack (8 KiB is usual, 3.4 KiB of it the
 * kernel's signal frame on AVX-512 machines) ending the process through _exit, exit, abort or a
 * fatal signal. */
#ifndef MS_SPARE_STACK_H
#define MS_SPARE_STACK_H

/* Runs FN(ARG) on the spare stack when this thread runs on its alternate signal stack and no other
 * thread is on the spare one; else where it is. */
void ms_on_spare_stack(void (*fn)(void *), void *arg);

#endif

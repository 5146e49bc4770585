/* memshim: per-stage CPU and GPU memory accounting for unmodified programs.
 *
 * Preload build/libmemshim.so to track memory; call these functions (from C, or from Python through
 * ctypes) to mark stages explicitly.  Stage names match [A-Za-z0-9_]+ and at most 63 characters.
 * All functions are safe to call from any thread, before and after main, and when the library is
 * disabled (then they do nothing and return 0).
 */
#ifndef MEMSHIM_H
#define MEMSHIM_H

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSHIM_VERSION_MAJOR 0
#define MEMSHIM_VERSION_MINOR 1

/* Opens stage NAME (or deepens it when already open: recursion is one call).
 * Returns 0, or -1 when NAME is invalid or the stage table is full. */
int memshim_stage_begin(const char *name);

/* Closes stage NAME.  Returns 0, or -1 for an end without a matching begin (never aborts). */
int memshim_stage_end(const char *name);

/* Writes the metrics file now as a snapshot ("complete": false); the final file is still written at
 * exit.  Returns 0 on success, -1 when disabled or the file could not be written. */
int memshim_snapshot(void);

#ifdef __cplusplus
}
#endif

#endif

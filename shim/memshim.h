/* memshim: per-stage CPU and GPU memory accounting for unmodified programs.
 *
 * Preload build/libmemshim.so to track memory; call these functions (from C, or from Python through
 * ctypes) to mark stages explicitly.  Stage names match [A-Za-z0-9_]+ and at most 63 characters.
 * All functions are safe to call from any thread, before and after main, and when the library is
 * not tracking the process (not preloaded, MEMSHIM_DISABLE=1, stepped aside): then the stage calls
 * do nothing and return 0, memshim_snapshot and memshim_metrics_json return -1, memshim_active 0.
 */
#ifndef MEMSHIM_H
#define MEMSHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSHIM_VERSION_MAJOR 0
#define MEMSHIM_VERSION_MINOR 1

/* Opens stage NAME (or deepens it when already open: recursion is one call).
 * Returns 0, or -1 when NAME is invalid or the stage table is full. */
int memshim_stage_begin(const char *name);

/* Opens stage NAME as memshim_stage_begin does and labels the call it opens with LABEL (any text;
 * its first 255 bytes are kept): when that call ends, its numbers are kept under the label in the
 * metrics file's "labelled_calls" (a test's name, a request id, a batch number), however many calls
 * the stage has (the file and its snapshots have them, memshim_metrics_json does not).  When NAME is already open, the begin only deepens it and LABEL is not used; with
 * LABEL NULL it is memshim_stage_begin.  Returns as memshim_stage_begin. */
int memshim_stage_begin_labelled(const char *name, const char *label);

/* Closes stage NAME.  Returns 0, or -1 for an end without a matching begin (never aborts). */
int memshim_stage_end(const char *name);

/* Closes stage NAME as memshim_stage_end does, for a call an exception ended (EXCEPTION: its type
 * name, e.g. "KeyboardInterrupt", or NULL): when this end closes the call, the metrics file records
 * it as "raised" (memory its traceback holds stays in alloc_delta; the dump says so). */
int memshim_stage_end_raised(const char *name, const char *exception);

/* Writes the metrics file now as a snapshot ("complete": false); the final file is still written at
 * exit.  Returns 0 on success, -1 when not tracking (disabled) or the file could not be written. */
int memshim_snapshot(void);

/* Copies the metrics so far into BUF as the metrics file's JSON ("complete": false, "reason":
 * "live"; completed calls, and open stages with their numbers so far), NUL-terminated when SIZE > 0.
 * Returns the document's full length: when that is SIZE or more, the copy was cut short, so call
 * again with a buffer of at least the returned length + 1 (BUF NULL, SIZE 0 only asks the length).
 * Returns -1 when the library is not tracking this process (not preloaded, disabled, stepped aside).
 * The labelled calls (memshim_stage_begin_labelled) are left out: the metrics file has them. */
long memshim_metrics_json(char *buf, size_t size);

/* As memshim_metrics_json, without the timeline and the call sites: the numbers alone, a few KB
 * where the whole document may be megabytes (asking while a stage is open counts what the program
 * does with the copy: parsing a megabyte of JSON in Python peaks ~5 MB). */
long memshim_metrics_json_brief(char *buf, size_t size);

/* 1 when the library is preloaded and tracking this process, else 0. */
int memshim_active(void);

#ifdef __cplusplus
}
#endif

#endif

/* Live records (shim/output/live_record.h) for memshim-format and memshim top: reading one
 * consistently, telling whether its process still runs, and turning it into a metrics document. */
#ifndef MF_LIVE_H
#define MF_LIVE_H

#include "model/document.h"

#include <stdio.h>
#include <stddef.h>
#include <jansson.h>
#include "../../shim/output/live_record.h"

/* Whether a metrics file and a record are of the same process, and as new (live.c, modes/recover.c). */
#define MF_SAME_START 1e-3 /* the file's start_time is the record's, written to the microsecond */
#define MF_SAME_TIME 1e-3  /* a file written within this of the record's last update is as new */

/* Non-zero when the LEN bytes of BUF start like a live record (its magic number). */
int mf_live_magic(const char *buf, size_t len);

/* A consistent copy of the record at PATH into OUT; *TORN (may be NULL) set when its process died
 * inside an update.  On failure one "memshim-format: PATH: problem" line goes to ERR (NULL: none)
 * and -1 is returned: not this user's, not a live record, truncated, another version. */
int mf_live_read(const char *path, struct ms_live_record *out, int *torn, FILE *err);

/* Whether the record's process runs: its pid exists and started when the record says (not a pid
 * reused since). */
int mf_live_alive(const struct ms_live_record *r);

/* The record as a metrics document ("complete": false, "reason": "live" while ALIVE, else
 * "recovered"; "live_record" says where it came from). */
json_t *mf_live_json(const struct ms_live_record *r, const char *path, int alive, int torn);

/* mf_load of a live record: its metrics document loaded as a file's. */
int mf_live_load(const char *path, struct mf_file *f, FILE *err);

/* F, an incomplete metrics file (a snapshot: a process killed with SIGKILL under a plain
 * LD_PRELOAD leaves its last one, maybe from its first second): when this user's live record of
 * the same process (its pid and start, in MEMSHIM_LIVE_DIR or the default directory) was updated
 * after F was written, F is loaded from the record instead (its path kept), with one line on ERR
 * saying so.  Returns 1 when it was. */
int mf_live_newer(struct mf_file *f, FILE *err);

/* N bytes of a record's text as a JSON string; bytes that are not UTF-8 read as '?'. */
json_t *mf_live_text(const char *s, size_t n);

/* The default directory of this user's records: $XDG_RUNTIME_DIR/memshim, else
 * /dev/shm/memshim-<uid> (what the shim uses without MEMSHIM_LIVE_DIR); malloc'd. */
char *mf_live_default_dir(void);

#endif

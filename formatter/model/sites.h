/* The call sites live at the stages' peaks as the file lists them (sites.c: stages[].peak_sites,
 * peak_sites_gpu and their _before lists), what --sites shows of a site's frames (frames.c), one
 * frame's text (frame.c) and C++ names demangled (demangle.c). */
#ifndef MF_SITES_H
#define MF_SITES_H

#include "model/document.h"
#include "model/opts.h"

#include <jansson.h>
#include <stddef.h>

/* sites.c: the call sites live at the stages' peaks (stages[].peak_sites, peak_sites_gpu). */
enum { MF_SITES_TOP = 10, MF_SITES_DEPTH = 5, MF_SITES_MAX = 1000 };
struct mf_site {
	double bytes;
	long long samples;   /* -1 when the file does not say */
	json_t *frames;      /* borrowed: innermost first; NULL when the entry has none */
	size_t order;        /* its index in the file */
	double exact;        /* exact_bytes: the part counted at true size, -1 when not said */
	long long others;    /* the closing entry: the stacks it stands for; -1 for a site */
	json_t *lines;       /* borrowed: [file, line] or null per frame (input/lines.c), or NULL */
	int framework_first; /* leads with the framework's own line that allocated (mf_sites_lead) */
};
/* Which list of a stage: what the stage added (peak_sites), or what it inherited (_before). */
enum mf_view { MF_ADDED, MF_BEFORE };
struct mf_sites {
	struct mf_site *s; /* owned, largest first, the closing entry (if any) last */
	size_t n;
	size_t named;      /* the sites before the closing entry */
	double total;      /* the bytes of all entries */
	double exact;      /* their exact_bytes */
	int exact_known;   /* some entry says its exact_bytes */
	long long samples; /* their samples (GPU: allocations) */
	int present;       /* the stage has the list */
	int split;         /* the stage has the _before list: peak_sites is only what it added */
	double lag;        /* how far the list may lag the peak, -1 when not said */
};
/* STAGE's CPU (GPU != 0: GPU) sites that the stage added (an older file: all live at the peak);
 * entries that are not sites are left out. */
void mf_sites_get(json_t *stage, int gpu, struct mf_sites *out);
/* The same for either list. */
void mf_sites_view(json_t *stage, int gpu, enum mf_view view, struct mf_sites *out);
/* Bytes as text (malloc'd): "47MB" as the dump prints memory, or "47.0 MB" (mf_fmt_bytes). */
typedef char *mf_bytes_fn(double bytes);
char *mf_mb(double bytes);
/* "added by the stage, live at its peak: 47MB in 5 sites and 7 other stacks; shares are of its
 * need, 42MB (alloc_delta + peaked_delta)" (malloc'd); *BASE (when not NULL): what the shares
 * are of. */
char *mf_sites_summary(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s, mf_bytes_fn *fmt,
		       double *base);
/* "40MB exact (blocks counted at their size), 7MB sampled (estimated)" (SHARES: "40MB exact
 * (85.1%, blocks ...), 7MB sampled (14.9%, estimated)"), "all of it exact: ...", or NULL when the
 * entries do not say (malloc'd). */
char *mf_sites_exact_text(const struct mf_sites *s, mf_bytes_fn *fmt, int shares);
/* The stage's need of CPU (GPU) memory, which the added view's shares are of: alloc_delta + peaked_delta, or
 * -1 when the stage does not say or it is not positive. */
double mf_stage_need(json_t *stage, int gpu);
/* What a list's shares are of: the stage's need (what it added, when it says), else its peak (an
 * older file, or what it inherited), else the bytes listed; returns those bytes. */
enum mf_base { MF_BASE_NEED, MF_BASE_PEAK, MF_BASE_LISTED };
double mf_sites_base(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s, enum mf_base *kind);
void mf_sites_free(struct mf_sites *s);
size_t mf_site_nframes(const struct mf_site *s);
const char *mf_site_frame(const struct mf_site *s, size_t i); /* "?" for what is not a string */
int mf_file_has_sites(const struct mf_file *f);
double mf_stage_peak(json_t *stage, int gpu); /* its "peak", or -1 */
/* "CPU peak 150MB" or "GPU peak unknown" (malloc'd). */
char *mf_stage_peak_text(json_t *stage, int gpu);
/* Every allocation is in the list (GPU; CPU with MEMSHIM_SITES=exact, or what an exact stage
 * added): a row counts allocations, not samples. */
int mf_sites_every_allocation(const struct mf_file *f, json_t *stage, int gpu, enum mf_view view);
/* "CPU peak 150MB; sampled every 512 KB on average, 240 samples at the peak; ..." (malloc'd). */
char *mf_sites_about(const struct mf_file *f, json_t *stage, int gpu, const struct mf_sites *s);
/* Frame K of S's source file (the full path) and line: 1, or 0 when it has none. */
int mf_site_source(const struct mf_site *s, size_t k, const char **file, long *line);

/* frames.c: what --sites shows of a site's frames. */
/* The lines --sites shows for S, innermost first (*LINES and each line malloc'd): with Python
 * frames (and not NATIVE), the innermost one, "[native: ...]" for the frames it called, then its
 * Python callers; else every frame. Returns how many. */
size_t mf_site_lines(const struct mf_site *s, int native, char ***lines);
int mf_site_python_first(const struct mf_site *s, int native); /* S shows a Python frame first */
/* The group --by BY puts S in: its innermost Python frame's line, "func (file)" or file; a
 * native-only stack (or NATIVE) by its innermost frame: as shown, "function (object)" or object;
 * MF_BY_FRAMEWORK: the framework's own line that allocated (the innermost library Python frame
 * inside the user's line), else the user's line. */
char *mf_site_key(const struct mf_site *s, enum mf_by by, int native);
/* When every site of S that has a line of the user's own leads with the same one (a Trainer run:
 * main's trainer.train(), one call into a framework), the sites with library frames inside it
 * lead with the framework's own line that allocated instead, the user's line under it. */
void mf_sites_lead(struct mf_sites *s);

/* frame.c: one frame's text. */
int mf_frame_is_python(const char *frame);     /* "func (/path/file.py:12)" */
char *mf_clean_frame(const char *frame);       /* demangled and printable (malloc'd) */
const char *mf_frame_where(const char *frame); /* where " (object)" or " (file:line)" starts, or NULL */
/* FRAME ("sym+0x1f (obj)" or "0x.. (obj)") shown with its line: "sym file.c:42 (obj)", the file's
 * base name; an address alone takes FUNCTION's name when there is one (malloc'd). */
char *mf_frame_with_line(const char *frame, const char *function, const char *file, long line);
/* Where " file.c:42" starts in a native frame shown with its line, or NULL. */
const char *mf_frame_line_at(const char *frame);
char *mf_frame_without_line(const char *shown); /* SHOWN without " file.c:42" (malloc'd) */

/* demangle.c */
/* FRAME as shown: a C++ symbol ("_Z...+0x1f (lib.so)") demangled when the C++ runtime's demangler
 * can be loaded, else FRAME as it is (malloc'd). */
char *mf_frame_display(const char *frame);

#endif

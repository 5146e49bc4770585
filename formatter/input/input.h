/* Reading metrics files into struct mf_file: a file on disk or a live record (read.c), a parsed
 * document checked (load.c), the files of a --diff side (paths.c), native frames' source lines from
 * the objects' DWARF (lines.c). */
#ifndef MF_INPUT_H
#define MF_INPUT_H

#include "model/document.h"

#include <stdio.h>
#include <jansson.h>

/* The metrics format version this reader understands. */
#define MF_VERSION 1

/* read.c: loads PATH; on failure writes one "memshim-format: PATH: problem" line to ERR. */
int mf_load(const char *path, struct mf_file *f, FILE *err);
/* load.c: the same for a document already parsed (ROOT is taken over, also on failure). */
int mf_load_json(const char *path, json_t *root, struct mf_file *f, FILE *err);
void mf_file_free(struct mf_file *f);
/* The one "memshim-format: PATH: problem" line on ERR; returns -1. */
int mf_file_problem(FILE *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* paths.c: the files of one side of --diff (a directory: its *.json and *.json.<pid> metrics
 * files, in name order; other JSON there is passed over). */
struct mf_paths {
	char **p;
	size_t n;
};
int mf_paths_add(struct mf_paths *ps, const char *path, FILE *err);
void mf_paths_free(struct mf_paths *ps);
/* The files beside PATH named PATH.<pid> that processes of the run rooted at ROOT_PID wrote (its
 * children's, which a dump of PATH alone does not show), in name order into PS. */
void mf_paths_children(struct mf_paths *ps, const char *path, long long root_pid);

/* lines.c: native frames' source lines from the objects' DWARF line tables (elfutils' libdw).
 * F's frames that have a location and a line become "sym file.c:42 (obj)"; the objects stay open
 * for the next file until mf_lines_end. */
void mf_lines_resolve(struct mf_file *f);
void mf_lines_end(void);

#endif

/* What the command line asked for, as every mode reads it: the mode and the options' values
 * (filled by cli/options.c from its table). */
#ifndef MF_OPTS_H
#define MF_OPTS_H

/* The modes (modes.def), as the option table (cli/options.c) and the pipeline name them. */
enum mf_mode {
#define MF_MODE(id, name, pick, run, synopsis) MF_##id,
#include "model/modes.def"
#undef MF_MODE
	MF_NMODES
};

struct mf_opts {
	enum mf_mode mode;    /* MF_DUMP unless an option selects another */
	const char *mode_arg; /* --plot, --flame: the picture to write; --compare: HF's file */
	const char *stage;    /* --stage, or NULL */
	int calls;            /* --calls */
	int all;              /* --all: no process is left out or summarised */
	int auto_merge;       /* --auto-merge: --merge when the files hold two or more ranks */
	const char *json_dir;
	struct mf_threshold {
		double pct;   /* growth must exceed this % of |old| (< 0: no percent part) */
		double bytes; /* and this many bytes (< 0: no byte part) */
	} threshold;          /* --threshold 5%,1MB */
	const char *threshold_text;
	int allow_missing;  /* --allow-missing: a stage gone from NEW is no regression */
	int plot_w, plot_h; /* --size, 0 for the default */
	int flame_gpu;      /* --gpu: the flame graph of the GPU sites */
	int depth, top;     /* --depth, --top (0: the default) */
	int by;             /* --by: enum mf_by */
	int native;         /* --native: every frame as recorded, no Python-first folding */
	int no_lines;       /* --no-lines: native frames without their source lines */
};

/* --by: how --sites groups the sites (by the innermost Python frame, else the innermost frame). */
enum mf_by { MF_BY_NONE, MF_BY_LINE, MF_BY_FUNCTION, MF_BY_FILE, MF_BY_FRAMEWORK };

#endif

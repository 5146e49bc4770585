/* memshim-format's command line: the table of options and the table of modes (options.c), the
 * arguments as parsed, and the whole program with its streams (cli.c) so tests run it in-process. */
#ifndef MF_CLI_H
#define MF_CLI_H

#include "model/opts.h"
#include "model/select.h"

#include <stdio.h>
#include <stddef.h>

/* How a value is read (the option table's kinds). */
enum mf_kind {
	MF_FLAG,         /* no value: sets an int field to 1 (or only selects its mode) */
	MF_TEXT,         /* any non-empty text */
	MF_PICTURE,      /* a file name ending in .svg or .png */
	MF_COUNT,        /* a whole number from 1 to MF_SITES_MAX */
	MF_CHOICE,       /* one of the option's choices: its index + 1 in an int field */
	MF_SIZE,         /* WxH, each MF_PLOT_MIN to MF_PLOT_MAX: plot_w and plot_h */
	MF_THRESHOLD,    /* 5%,1MB (mf_parse_threshold), at most once */
	MF_OWN,          /* selects a mode that reads the whole command line itself */
	MF_SHOW_HELP,    /* prints --help and stops */
	MF_SHOW_VERSION, /* prints the version and stops */
};

#define MF_MODE_BIT(id) (1u << MF_##id)
#define MF_NO_FIELD ((size_t)-1)

/* One option: what it reads, where it goes, which modes take it, and its --help entry. */
struct mf_option {
	const char *name;  /* "--stage" */
	const char *alias; /* "-h", or NULL */
	const char *arg;   /* what --help shows after the name ("NAME"), or NULL */
	enum mf_kind kind;
	size_t field;               /* offsetof(struct mf_opts, ...), or MF_NO_FIELD */
	unsigned modes;             /* MF_MODE_BIT of each mode that takes it */
	int selects;                /* it selects its one mode (--merge, --plot OUT) */
	const char *bad;            /* the usage error of a bad value (MF_COUNT, MF_CHOICE, MF_SIZE, ...) */
	const char *const *choices; /* MF_CHOICE: the values it takes, NULL-terminated */
	const char *help;           /* --help text, lines after the first indented; NULL: not listed */
};
extern const struct mf_option mf_options[];
extern const size_t mf_noptions;

struct mf_run;
/* One mode: its name in messages, which files it shows, what prints it, its usage lines. */
struct mf_mode_def {
	const char *name;
	enum mf_pick pick;
	int (*run)(const struct mf_run *r, FILE *out, FILE *err);
	const char *synopsis;
};
extern const struct mf_mode_def mf_modes[MF_NMODES];

/* The command line as parsed. */
struct mf_args {
	struct mf_opts o;
	char **files;
	int nfiles;
	int sep;       /* --diff: files before a "--" that follows a file, else -1 */
	size_t *given; /* every option given, in order: its index in mf_options */
	int ngiven;
};

/* Fills A (free it with mf_args_free, also on failure); MF_OK, MF_BAD after one usage error on
 * ERR, or -1 when --help or --version printed to OUT and nothing is left to do. */
int mf_parse_args(int argc, char **argv, struct mf_args *a, FILE *out, FILE *err);
/* What the tables rule out: an option given to a mode that does not take it (one error naming
 * both), then the mode's operands; sets the default threshold. MF_OK or MF_BAD. */
int mf_check_args(struct mf_args *a, FILE *err);
void mf_args_free(struct mf_args *a);
/* The option named exactly S (or its alias), or NULL. */
const struct mf_option *mf_option_named(const char *s);
/* The mode OP selects (MF_DUMP for one that selects none). */
enum mf_mode mf_option_mode(const struct mf_option *op);
/* The --help text, made from the two tables. */
void mf_print_help(FILE *out);
int mf_usage_error(FILE *err, const char *what, const char *arg);

/* cli.c: the whole program, with its streams, so tests run it in-process. */
int mf_main(int argc, char **argv, FILE *out, FILE *err);

#endif

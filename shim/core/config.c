/* The one table of settings and their parsers: every environment variable the shim reads.  Each
 * bad value of a user's setting gets one warning naming it, and its default is used; the text rows
 * are kept as they are (their readers judge them, as before). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"

struct ms_config ms_cfg = {
	.log_level = MS_LOG_WARN, .follow_children = 1, .timeline = 1, .sites = 1, .sites_rate = 524288, .live = 1
};

/* transformers' Trainer only (and subclasses, which run its methods): another framework's class
 * named Trainer (Lightning's) binds when named */
const char ms_default_stages[] =
	"init=transformers.trainer:Trainer.__init__,"
	"train=transformers.trainer:Trainer.train|transformers.trainer:Trainer._inner_training_loop,"
	"eval=transformers.trainer:Trainer.evaluate,test=transformers.trainer:Trainer.predict";

/* The same parsed, copied in by every process that loads the settings instead of parsing the text
 * (7K instructions of a 150K start; tests/unit/test_config.c holds the two equal). */
static const struct ms_spec_stage default_spec[] = {
	{ "init", 1, { "transformers.trainer:Trainer.__init__" } },
	{ "train", 2, { "transformers.trainer:Trainer.train", "transformers.trainer:Trainer._inner_training_loop" } },
	{ "eval", 1, { "transformers.trainer:Trainer.evaluate" } },
	{ "test", 1, { "transformers.trainer:Trainer.predict" } },
};

static void spec_default(struct ms_spec *spec)
{
	spec->nstages = sizeof default_spec / sizeof *default_spec;
	memcpy(spec->stage, default_spec, sizeof default_spec);
}

/* An exec'd process of a run (one that found a lineage record above it) inherited the settings
 * its first process read and warned about: what is wrong with them is said once per run, by the
 * first process (else every process pyenv's shim or a shell script runs names the same bad value
 * again); MEMSHIM_LOG=debug shows them in the others. */
static int (*inherited_run)(void); /* asked at the first warning only: most processes have none */
/* clang-format off */
#define config_warn(...) ms_log(inherited_run && inherited_run() ? MS_LOG_DEBUG : MS_LOG_WARN, __VA_ARGS__)
/* clang-format on */

enum kind { K_BOOL, K_SITES, K_LOG, K_PATH, K_DIR, K_INTERVAL, K_BYTES, K_STAGES, K_TEXT };

/* What a value of each kind may be: every bad value's warning says it.  The booleans' words are
 * one rule for every setting that takes one (MEMSHIM_SITES and the snapshot interval too). */
#define BOOL_WORDS "1, true, yes, on or 0, false, no, off (any case)"
static const char *const valid[] = {
	[K_BOOL] = BOOL_WORDS,
	[K_SITES] = BOOL_WORDS ", exact, or exact:STAGE[,STAGE...] naming at most 8 stages ([A-Za-z0-9_]+, "
			       "up to 63 characters)",
	[K_LOG] = "quiet, warn or debug",
	[K_PATH] = "a file's path, at most 4095 bytes",
	[K_DIR] = "a directory's path, at most 4095 bytes",
	[K_INTERVAL] = "auto (or a yes word), off (or 0, or a no word), or seconds from 0.01 to 31536000 (a year), "
		       "e.g. 0.5",
	[K_BYTES] = "bytes from 1 to 2^40 (1 TiB), digits with an optional binary suffix K, M, G or T (512K, 1MiB, "
		    "2g)",
};

/* Where each row's value came from at the last load (MEMSHIM_LOG=debug says it at start). */
enum source { FROM_DEFAULT, FROM_ENV, FROM_DEFAULT_BAD_ENV };
static const char *const source_name[] = { "default", "env", "default: the environment's was not valid" };

/* A more precise reason than the kind's text, set by a parser for the warning (start: one thread). */
static const char *bad_because;

struct setting {
	const char *name;
	enum kind kind;
	const char *fallback; /* applied when unset or bad */
	size_t offset;        /* K_TEXT: the slot in text[] */
};

#define AT(field) offsetof(struct ms_config, field)
/* Each row: the variable, how its value is parsed, its default, where it goes.  The comment says
 * what it means and in what unit (doc/format.md and the README document them for users). */
static const struct setting settings[] = {
	/* what goes to stderr: quiet, warn or debug */
	{ "MEMSHIM_LOG", K_LOG, "warn", AT(log_level) },
	/* boolean: count nothing, write no file */
	{ "MEMSHIM_DISABLE", K_BOOL, "0", AT(disabled) },
	/* path of the metrics file (placeholders %p, %r, %l, %h expanded) */
	{ "MEMSHIM_OUTPUT", K_PATH, "memshim_metrics.json", AT(output) },
	/* boolean: forked children track too */
	{ "MEMSHIM_FOLLOW_CHILDREN", K_BOOL, "1", AT(follow_children) },
	/* directory of forked children's files; "": their name is the parent's .PID */
	{ "MEMSHIM_CHILDREN_DIR", K_DIR, "", AT(children_dir) },
	/* seconds between snapshots, auto or off */
	{ "MEMSHIM_SNAPSHOT_INTERVAL", K_INTERVAL, "auto", AT(snapshot_interval) },
	/* boolean: record the memory timeline */
	{ "MEMSHIM_TIMELINE", K_BOOL, "1", AT(timeline) },
	/* call sites: boolean, exact, or exact:STAGE,... */
	{ "MEMSHIM_SITES", K_SITES, "1", AT(sites) },
	/* bytes: mean allocated between two samples */
	{ "MEMSHIM_SITES_RATE", K_BYTES, "524288", AT(sites_rate) },
	/* boolean: keep the live record (memshim top) */
	{ "MEMSHIM_LIVE", K_BOOL, "1", AT(live) },
	/* boolean: bind native targets through the GOT */
	{ "MEMSHIM_NATIVE_PLT", K_BOOL, "1", AT(native_plt) },
	/* directory of live records; "": the default place */
	{ "MEMSHIM_LIVE_DIR", K_DIR, "", AT(live_dir) },
	/* stage=target|target,...; unset: Hugging Face Trainer's stages; "": none */
	{ "MEMSHIM_STAGES", K_STAGES, ms_default_stages, AT(spec) },
	/* As text: the user's MEMSHIM_OUTPUT as typed (an exec'd child compares it with its root's) */
	{ "MEMSHIM_OUTPUT", K_TEXT, NULL, 0 },
	/* The launchers' ranks (core/process.c, doc/python.md#ranks) */
	{ "RANK", K_TEXT, NULL, 1 },
	{ "LOCAL_RANK", K_TEXT, NULL, 2 },
	{ "WORLD_SIZE", K_TEXT, NULL, 3 },
	{ "GROUP_RANK", K_TEXT, NULL, 4 },
	{ "NODE_RANK", K_TEXT, NULL, 5 },
	{ "LOCAL_WORLD_SIZE", K_TEXT, NULL, 6 },
	{ "PMI_RANK", K_TEXT, NULL, 7 },
	{ "MPI_LOCALRANKID", K_TEXT, NULL, 8 },
	{ "PMI_SIZE", K_TEXT, NULL, 9 },
	{ "OMPI_COMM_WORLD_RANK", K_TEXT, NULL, 10 },
	{ "OMPI_COMM_WORLD_LOCAL_RANK", K_TEXT, NULL, 11 },
	{ "OMPI_COMM_WORLD_SIZE", K_TEXT, NULL, 12 },
	{ "MV2_COMM_WORLD_RANK", K_TEXT, NULL, 13 },
	{ "MV2_COMM_WORLD_LOCAL_RANK", K_TEXT, NULL, 14 },
	{ "MV2_COMM_WORLD_SIZE", K_TEXT, NULL, 15 },
	{ "PMIX_RANK", K_TEXT, NULL, 16 },
	{ "SLURM_PROCID", K_TEXT, NULL, 17 },
	{ "SLURM_LOCALID", K_TEXT, NULL, 18 },
	{ "SLURM_NTASKS", K_TEXT, NULL, 19 },
	{ "SLURM_NODEID", K_TEXT, NULL, 20 },
	{ "TORCHELASTIC_RESTART_COUNT", K_TEXT, NULL, 27 }, /* torchrun: which attempt of the job */
	/* The system's */
	{ "TMPDIR", K_TEXT, NULL, 21 },          /* output/identity.c: the fallback directory */
	{ "XDG_RUNTIME_DIR", K_TEXT, NULL, 22 }, /* output/live.c: the live record's default place */
	{ "LD_PRELOAD", K_TEXT, NULL, 23 },      /* intercept/resolve.c: preloaded, or loaded late */
	/* Set by memshim run when it prints the dump, which names the run's unmatched targets */
	{ "MEMSHIM_RUN_DUMP", K_TEXT, NULL, 24 },
	/* Set by memshim run: its directory of the run, where helpers write (output/report.c) */
	{ "MEMSHIM_RUN_DIR", K_TEXT, NULL, 25 },
	/* directory read as the memory cgroup (intercept/cgroup.c; tests lay one out); "none": no cgroup */
	{ "MEMSHIM_CGROUP_DIR", K_TEXT, NULL, 26 },
};
#define N_SETTINGS (sizeof settings / sizeof *settings)
static unsigned char source_of[N_SETTINGS];

/* Case-insensitive in ASCII, whatever the locale: the words are ASCII (and every process parses
 * the defaults: the C library's strcasecmp and its tables are pages of code to fault in). */
static int same_word(const char *a, const char *b)
{
	for (;; a++, b++) {
		char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a,
		     y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
		if (x != y)
			return 0;
		if (!x)
			return 1;
	}
}

static int parse_bool(const char *v, int *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		if (same_word(v, yes[i]))
			return *out = 1, 0;
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (same_word(v, no[i]))
			return *out = 0, 0;
	return -1;
}

/* "exact:STAGE,STAGE" (or ':' between them: neither can be in a stage name) into CFG's list; -1
 * when a name is not a stage name or there are more than MS_SITES_EXACT_MAX. */
static int parse_exact_stages(const char *v, struct ms_config *cfg)
{
	int n = 0;
	for (const char *p = v;; p++) {
		size_t len = strcspn(p, ",:");
		if (n == MS_SITES_EXACT_MAX)
			return bad_because = "exact: more than 8 stage names", -1;
		if (len >= MS_STAGE_NAME_MAX)
			return bad_because = "exact: a stage name is longer than 63 characters", -1;
		memcpy(cfg->sites_exact[n], p, len);
		cfg->sites_exact[n][len] = '\0';
		if (!ms_stage_name_valid(cfg->sites_exact[n++]))
			return bad_because = len ? "exact: a name is not a stage name ([A-Za-z0-9_]+, not process)"
						 : "exact: an empty stage name",
			       -1;
		p += len;
		if (!*p)
			break;
	}
	cfg->nsites_exact = n;
	return 0;
}

/* MEMSHIM_SITES: a boolean (off, or sampled), "exact" (every allocation recorded), or
 * "exact:STAGE,..." (sampled, every allocation recorded while one of those stages is open). */
static int parse_sites(const char *v, struct ms_config *cfg)
{
	cfg->nsites_exact = 0;
	if (same_word(v, "exact"))
		return cfg->sites = MS_SITES_EXACT, 0;
	char word[6];
	ms_strlcpy(word, v, sizeof word);
	if (same_word(word, "exact") && v[5] == ':') {
		cfg->sites = MS_SITES_SAMPLED;
		return parse_exact_stages(v + 6, cfg) < 0 ? (cfg->nsites_exact = 0, -1) : 0;
	}
	return parse_bool(v, &cfg->sites); /* 1 is MS_SITES_SAMPLED */
}

int ms_sites_exact_names(const char *name)
{
	for (int i = 0; i < ms_cfg.nsites_exact; i++)
		if (!strcmp(ms_cfg.sites_exact[i], name))
			return 1;
	return 0;
}

static int parse_log(const char *v, int *out)
{
	static const char *const names[] = { "quiet", "warn", "debug" };
	for (int i = 0; i < 3; i++)
		if (same_word(v, names[i]))
			return *out = i, 0;
	return -1;
}

/* Seconds, or "auto" (MS_SNAPSHOT_AUTO: the default policy) or "off" (0); the boolean words as
 * every setting takes them: a yes is the default policy, a no is off. */
static int parse_interval(const char *v, double *out)
{
	int on;
	if (same_word(v, "auto"))
		return *out = MS_SNAPSHOT_AUTO, 0;
	if (!(*v >= '0' && *v <= '9') && parse_bool(v, &on) == 0)
		return *out = on ? MS_SNAPSHOT_AUTO : 0, 0;
	char *end;
	double d = strtod(v, &end);
	if (end == v || *end || !isfinite(d))
		return -1;
	if (d < 0 || d > 86400.0 * 365)
		return bad_because = "out of range: from 0.01 to 31536000 seconds (a year), or 0 for off", -1;
	if (d > 0 && d < 0.01) /* below 0.01 s the thread would do little else than rewrite the file */
		return bad_because = "under the minimum of 0.01 seconds (0 turns snapshots off)", -1;
	*out = d;
	return 0;
}

/* The power of 1024 of a size suffix: K, M, G or T, any case, then nothing, "B" or "iB"; -1 else. */
static int suffix_power(const char *s)
{
	static const char units[] = "kmgt";
	if (!*s)
		return 0;
	const char *u = strchr(units, *s | 0x20);
	if (!u || !(same_word(s + 1, "") || same_word(s + 1, "b") || same_word(s + 1, "ib")))
		return -1;
	return (int)(u - units) + 1;
}

/* A byte count from 1 to 1 TiB: digits, then optionally K, M, G or T (binary: 512K, 1MiB, 2g). */
static int parse_bytes(const char *v, long *out)
{
	unsigned long long n = 0;
	if (*v < '0' || *v > '9')
		return -1;
	for (; *v >= '0' && *v <= '9'; v++)
		if ((n = n * 10 + (unsigned)(*v - '0')) > (1ULL << 40))
			return bad_because = "over the maximum of 2^40 bytes (1 TiB)", -1;
	int power = suffix_power(v);
	for (int i = 0; i < power && n <= (1ULL << 40); i++)
		n *= 1024;
	if (power < 0)
		return -1;
	if (n < 1)
		return bad_because = "under the minimum of 1 byte", -1;
	if (n > (1ULL << 40))
		return bad_because = "over the maximum of 2^40 bytes (1 TiB)", -1;
	*out = (long)n;
	return 0;
}

/* Relative paths are taken from the working directory at start, so a later chdir changes nothing. */
static int parse_path(const char *v, char *out)
{
	size_t n = strlen(v);
	if (n >= MS_PATH_MAX)
		return bad_because = "too long: a path has at most 4095 bytes", -1;
	if (n == 0)
		return -1;
	if (v[0] == '/') {
		ms_strlcpy(out, v, MS_PATH_MAX);
		return 0;
	}
	char cwd[MS_PATH_MAX];
	if (!ms_sys_getcwd(cwd, sizeof cwd))
		return -1;
	size_t c = strlen(cwd);
	if (c + 1 + n >= MS_PATH_MAX)
		return bad_because = "too long: with the working directory before it, over 4095 bytes", -1;
	ms_format(out, MS_PATH_MAX, "%s/%s", cwd, v);
	return 0;
}

/* A directory that may be unset (""): a path as above. */
static int parse_dir(const char *v, char *out)
{
	if (!*v)
		return out[0] = '\0', 0;
	return parse_path(v, out);
}

/* V into text slot SLOT: copied into the pool, so a later setenv, putenv'd buffer or a
 * setproctitle that reuses the environment's memory changes nothing the shim reads. */
static void keep_text(struct ms_config *cfg, size_t slot, const char *v)
{
	size_t n = strlen(v) + 1;
	if (slot >= MS_TEXT_SETTINGS)
		return; /* a row numbered past text[]: never filled (test_settings_text finds it) */
	if (n > sizeof cfg->text_pool - cfg->text_used) {
		cfg->text[slot] = v; /* no room: the environment's own string */
		return;
	}
	char *copy = cfg->text_pool + cfg->text_used;
	memcpy(copy, v, n);
	cfg->text_used += n;
	cfg->text[slot] = copy;
}

static int apply(const struct setting *s, struct ms_config *cfg, const char *v)
{
	void *field = (char *)cfg + s->offset;
	switch (s->kind) {
	case K_BOOL:
		return parse_bool(v, field);
	case K_SITES:
		return parse_sites(v, cfg);
	case K_LOG:
		return parse_log(v, field);
	case K_PATH:
		return parse_path(v, field);
	case K_DIR:
		return parse_dir(v, field);
	case K_INTERVAL:
		return parse_interval(v, field);
	case K_BYTES:
		return parse_bytes(v, field);
	case K_STAGES:
		if (v == ms_default_stages)
			spec_default(field);
		else
			ms_spec_parse(field, v);
		return 0; /* bad entries were warned about one by one */
	case K_TEXT:
		keep_text(cfg, s->offset, v);
		return 0;
	}
	return -1;
}

/* Shows at most 64 bytes of a bad value (it may be huge or hold control bytes), why it is bad when
 * its parser said, and what the setting takes. */
static void warn_bad(const struct setting *s, const char *value)
{
	char shown[68];
	size_t i = 0;
	for (; i < 64 && value[i]; i++)
		shown[i] = (value[i] >= 0x20 && value[i] < 0x7f) ? value[i] : '?';
	memcpy(shown + i, value[i] ? "..." : "", value[i] ? 4 : 1);
	const char *takes = (size_t)s->kind < sizeof valid / sizeof *valid ? valid[s->kind] : NULL;
	config_warn("%s=\"%s\" is not valid (%s%s%s%s); using \"%s\"", s->name, shown, bad_because ? bad_because : "",
		    bad_because && takes ? "; " : "", takes ? "it takes " : "", takes ? takes : "", s->fallback);
}

/* An empty spec: its header only (a stage entry is cleared when it is added), so the pages of its
 * tables are not written (every process loads the settings; each page written is a fault). */
static void spec_reset(struct ms_spec *spec)
{
	spec->nstages = 0;
	spec->is_default = 0;
	spec->pool_used = 0;
}

/* CFG before the table's defaults go in (they set every field; this only clears what they append
 * to or may skip). */
static void config_reset(struct ms_config *cfg)
{
	cfg->disabled = cfg->log_level = cfg->follow_children = cfg->timeline = cfg->sites = cfg->live = 0;
	cfg->output[0] = cfg->children_dir[0] = '\0';
	cfg->snapshot_interval = 0;
	cfg->sites_rate = 0;
	cfg->nsites_exact = 0;
	spec_reset(&cfg->spec);
	memset(cfg->text, 0, sizeof cfg->text);
	cfg->text_used = 0;
}

void ms_config_load(struct ms_config *cfg, ms_getenv_fn get)
{
	config_reset(cfg);
	for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
		if (settings[i].fallback)
			apply(&settings[i], cfg, settings[i].fallback);
	/* MEMSHIM_LOG first (the table's order) so later warnings honour it */
	for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
		const struct setting *s = &settings[i];
		const char *v = get(s->name);
		source_of[i] = FROM_DEFAULT;
		/* empty is unset, but an empty stage list is none, and a text is kept as it is */
		if (!v || (!*v && s->kind != K_STAGES && s->kind != K_TEXT))
			continue;
		if (s->kind == K_STAGES)
			spec_reset(&cfg->spec);
		bad_because = NULL;
		source_of[i] = FROM_ENV;
		if (apply(s, cfg, v) < 0) {
			if (s->kind == K_LOG)
				cfg->log_level = MS_LOG_WARN;
			warn_bad(s, v);
			apply(s, cfg, s->fallback);
			source_of[i] = FROM_DEFAULT_BAD_ENV;
		}
		if (s->kind == K_LOG)
			ms_cfg.log_level = cfg->log_level; /* ms_log reads the global */
	}
	cfg->spec.is_default = get("MEMSHIM_STAGES") == NULL;
}

_Static_assert(N_SETTINGS < 255, "a row number fits the scan's unsigned char chains");
_Static_assert(sizeof "OMPI_COMM_WORLD_LOCAL_RANK" < 255, "a name's length fits too");
static const char *environ_value[N_SETTINGS]; /* each row's value, found by one pass at start */
#define MAX_UNKNOWN 4
static const char *unknown[MAX_UNKNOWN]; /* MEMSHIM_ names that are no setting (the first few) */
static size_t unknown_len[MAX_UNKNOWN];
static int nunknown;
static const char *environment(const char *name);

/* The one read of the environment: one pass over it for every row, an entry compared only with
 * the rows of its first letter and its name's length (43 getenv calls were 16K instructions a
 * process); none in a setuid program (AT_SECURE, as secure_getenv). */
static void environ_scan(void)
{
	unsigned char first[128] = { 0 }, next[N_SETTINGS], length[N_SETTINGS]; /* chains: row + 1, 0 ends */
	if (getauxval(AT_SECURE) || !environ)
		return;
	for (size_t i = N_SETTINGS; i-- > 0;) {
		unsigned char c = (unsigned char)settings[i].name[0] & 127;
		next[i] = first[c], first[c] = (unsigned char)(i + 1);
		length[i] = (unsigned char)strlen(settings[i].name);
	}
	for (char **e = environ; *e; e++) {
		const char *equals = strchr(*e, '=');
		size_t n = equals ? (size_t)(equals - *e) : 0;
		int known = 0;
		for (unsigned r = first[(unsigned char)**e & 127]; r && n; r = next[r - 1])
			if (length[r - 1] == n && !memcmp(*e, settings[r - 1].name, n)) {
				known = 1;
				if (!environ_value[r - 1])
					environ_value[r - 1] = equals + 1; /* the first, as getenv */
			}
		if (!known && n > 8 && !strncmp(*e, "MEMSHIM_", 8) && strncmp(*e, "MEMSHIM_PYTEST_", 15) &&
		    nunknown < MAX_UNKNOWN)
			unknown[nunknown] = *e, unknown_len[nunknown++] = n;
	}
}

int ms_edit_distance(const char *a, size_t n, const char *b)
{
	size_t m = strlen(b);
	int row[64];
	if (n >= 63 || m >= 63)
		return 99;
	for (size_t j = 0; j <= m; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= n; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= m; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			best = up + 1 < best ? up + 1 : best;
			best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
			diag = up;
			row[j] = best;
		}
	}
	return row[m];
}

int ms_edit_distance_at_most(const char *a, size_t n, const char *b, int most)
{
	size_t m = strlen(b), k = most < 0 ? 0 : (size_t)most;
	int row[64], far = (int)k + 1;
	if (n >= 63 || m >= 63 || (n > m ? n - m : m - n) > k)
		return far;
	for (size_t j = 0; j <= m; j++)
		row[j] = j <= k ? (int)j : far;
	for (size_t i = 1; i <= n; i++) {
		size_t lo = i > k ? i - k : 1, hi = i + k < m ? i + k : m;
		int diag = row[lo - 1], least = far;
		row[lo - 1] = lo == 1 && i <= k ? (int)i : far; /* left of the band: too far */
		for (size_t j = lo; j <= hi; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			best = up + 1 < best ? up + 1 : best;
			best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
			best = best > far ? far : best;
			diag = up;
			row[j] = best;
			least = best < least ? best : least;
		}
		if (least > (int)k && !(lo == 1 && i <= k))
			return far; /* every way on is already too long */
	}
	return row[m];
}

int ms_config_unknown_settings(void)
{
	return nunknown;
}

void ms_config_warn_unknown(void)
{
	for (int u = 0; u < nunknown; u++) {
		const char *near = NULL;
		int most = unknown_len[u] - 8 <= 4 ? 1 : 2; /* MEMSHIM_FOO is no MEMSHIM_LOG */
		for (size_t i = 0; i < N_SETTINGS && !near; i++)
			if (settings[i].kind != K_TEXT &&
			    ms_edit_distance(unknown[u], unknown_len[u], settings[i].name) <= most)
				near = settings[i].name;
		char name[64];
		ms_strlcpy(name, unknown[u], unknown_len[u] + 1 < sizeof name ? unknown_len[u] + 1 : sizeof name);
		ms_warn("unknown setting %s ignored%s%s%s", name, near ? " (did you mean " : "", near ? near : "",
			near ? "?)" : "");
	}
}

/* ms_config_load asks in the table's order, with the rows' own names: the next row first */
static const char *environment(const char *name)
{
	static size_t hint;
	for (size_t k = 0; k < N_SETTINGS; k++) {
		size_t i = (hint + k) % N_SETTINGS;
		if (settings[i].name == name || !strcmp(settings[i].name, name))
			return hint = i + 1, environ_value[i];
	}
	return NULL; /* not a row: never read (settings_lint keeps every read in the table) */
}

void ms_config_start(int (*inherited)(void))
{
	environ_scan();
	inherited_run = inherited;
	ms_config_load(&ms_cfg, environment);
	inherited_run = NULL; /* ms_spec_parse from elsewhere (the API, tests) warns as before */
}

/* The zeros before THOUSANDTHS (0 to 999) written as three digits. */
static const char *leading_zeros(long thousandths)
{
	return thousandths < 10 ? "00" : thousandths < 100 ? "0" : "";
}

/* TARGET into OUT as MEMSHIM_STAGES spells it: "STAGE=TARGET" for a stage's first (a ',' before it
 * when LATER: not the first stage), "|TARGET" for the others (STAGE NULL).  The length written. */
static size_t stage_target(char *out, size_t size, const char *stage, int later, const char *target)
{
	if (!stage)
		return ms_format(out, size, "|%s", target);
	return ms_format(out, size, "%s%s=%s", later ? "," : "", stage, target);
}

/* Row S's value in CFG as it is used (paths made absolute, numbers parsed) into OUT. */
static void effective_value(const struct setting *s, const struct ms_config *cfg, char *out, size_t size)
{
	static const char *const log_words[] = { "quiet", "warn", "debug" };
	static const char *const sites_words[] = { "off", "sampled", "exact" };
	const void *field = (const char *)cfg + s->offset;
	size_t n = 0;
	switch (s->kind) {
	case K_BOOL:
		ms_format(out, size, "%d", *(const int *)field);
		return;
	case K_LOG:
		ms_format(out, size, "%s", log_words[cfg->log_level < 0 || cfg->log_level > 2 ? 1 : cfg->log_level]);
		return;
	case K_SITES:
		n = ms_format(out, size, "%s", sites_words[cfg->sites < 0 || cfg->sites > 2 ? 1 : cfg->sites]);
		for (int i = 0; i < cfg->nsites_exact && n < size; i++)
			n += ms_format(out + n, size - n, "%s%s", i ? "," : ", exact in ", cfg->sites_exact[i]);
		return;
	case K_PATH:
	case K_DIR:
		ms_format(out, size, "%s", (const char *)field);
		return;
	case K_INTERVAL: {
		double d = *(const double *)field;
		long ms = (long)(d * 1000 + 0.5);
		if (d == MS_SNAPSHOT_AUTO)
			ms_format(out, size, "auto");
		else if (d <= 0)
			ms_format(out, size, "off");
		else
			ms_format(out, size, "%ld.%s%ld s", ms / 1000, leading_zeros(ms % 1000), ms % 1000);
		return;
	}
	case K_BYTES:
		ms_format(out, size, "%ld bytes", *(const long *)field);
		return;
	case K_STAGES:
		out[0] = '\0'; /* none */
		for (int i = 0; i < cfg->spec.nstages && n < size; i++)
			for (int t = 0; t < cfg->spec.stage[i].ntargets && n < size; t++)
				n += stage_target(out + n, size - n, t ? NULL : cfg->spec.stage[i].name, i > 0,
						  cfg->spec.stage[i].targets[t]);
		return;
	case K_TEXT:
		break;
	}
	ms_format(out, size, "?");
}

void ms_config_log_effective(void)
{
	for (size_t i = 0; i < N_SETTINGS; i++) {
		if (settings[i].kind == K_TEXT)
			continue; /* the launchers' and the system's variables: no setting of ours */
		char value[512];
		effective_value(&settings[i], &ms_cfg, value, sizeof value);
		ms_debug("setting %s=%s (source: %s)", settings[i].name, value, source_name[source_of[i]]);
	}
}

const char *ms_config_text(const struct ms_config *cfg, const char *name)
{
	for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
		if (settings[i].kind == K_TEXT && settings[i].name[0] == name[0] && !strcmp(settings[i].name, name))
			return settings[i].offset < MS_TEXT_SETTINGS ? cfg->text[settings[i].offset] : NULL;
	return NULL;
}

const char *ms_setting_text(const char *name)
{
	return ms_config_text(&ms_cfg, name);
}

int ms_target_names_object(const char *text, size_t n)
{
	return memmem(text, n, ".so", 3) != NULL || memchr(text, '/', n) != NULL;
}

int ms_stage_name_valid(const char *name)
{
	size_t n = 0;
	for (; name && n < MS_STAGE_NAME_MAX && name[n]; n++) {
		char c = name[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return n > 0 && n < MS_STAGE_NAME_MAX && strcmp(name, "process") != 0;
}

/* Bit T of stage S: ms_cfg.spec.stage[S].targets[T] was found natively. */
static uint32_t native_found[MS_SPEC_MAX_STAGES];

static int spec_target_index(int stage, const char *target)
{
	if (stage < 0 || stage >= ms_cfg.spec.nstages || stage >= MS_SPEC_MAX_STAGES)
		return -1;
	for (int k = 0; k < ms_cfg.spec.stage[stage].ntargets && k < 32; k++)
		if (!strcmp(ms_cfg.spec.stage[stage].targets[k], target))
			return k;
	return -1;
}

void ms_spec_note_native(int stage, const char *target)
{
	int k = spec_target_index(stage, target);
	if (k >= 0 && !(__atomic_load_n(&native_found[stage], __ATOMIC_RELAXED) >> k & 1))
		__atomic_fetch_or(&native_found[stage], UINT32_C(1) << k, __ATOMIC_RELAXED);
}

int ms_spec_native(int stage, const char *target)
{
	int k = spec_target_index(stage, target);
	return k >= 0 && (__atomic_load_n(&native_found[stage], __ATOMIC_RELAXED) >> k & 1);
}

int ms_spec_find(const struct ms_spec *spec, const char *name)
{
	for (int i = 0; i < spec->nstages; i++)
		if (strcmp(spec->stage[i].name, name) == 0)
			return i;
	return -1;
}

static const char *trim(const char *b, const char **e)
{
	while (b < *e && (*b == ' ' || *b == '\t'))
		b++;
	while (*e > b && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
	return b;
}

static const char *pool_add(struct ms_spec *spec, const char *b, size_t n)
{
	if (spec->pool_used + n + 1 > sizeof spec->pool)
		return NULL;
	char *p = spec->pool + spec->pool_used;
	memcpy(p, b, n);
	p[n] = '\0';
	spec->pool_used += n + 1;
	return p;
}

static void warn_entry(const char *b, const char *e, const char *why)
{
	char shown[68];
	size_t n = (size_t)(e - b) < 64 ? (size_t)(e - b) : 64;
	for (size_t i = 0; i < n; i++)
		shown[i] = (b[i] >= 0x20 && b[i] < 0x7f) ? b[i] : '?';
	memcpy(shown + n, (size_t)(e - b) > 64 ? "..." : "", (size_t)(e - b) > 64 ? 4 : 1);
	config_warn("MEMSHIM_STAGES entry \"%s\" ignored: %s", shown, why);
}

static int name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == ':' || c == '<' || c == '>' || c == '~' || c == '$' || c >= 0x80;
}

/* Whether [B, E) can be a target of any detector: [object:]name, the name a Python qualname or a
 * C/C++ symbol (a parameter list after it, an operator's own characters); what no detector takes
 * (a ';' for a separator, a space or '-' in a name) would otherwise be dropped without a word. */
static int target_plausible(const char *b, const char *e)
{
	const char *name = b;
	for (const char *p = b; p < e; p++)
		if (*p == ':' && (p + 1 == e || p[1] != ':') && (p == b || p[-1] != ':')) {
			if (p == b)
				return 0; /* an empty object */
			name = p + 1;     /* the object (a path, a file name, a module) before it */
			break;
		}
	for (const char *p = b; p < name; p++)
		if (*p == ' ' || *p == ';' || *p == '=')
			return 0;
	const char *end = name; /* the name ends at its parameter list */
	while (end < e && *end != '(')
		end++;
	const char *paren = end < e ? end : NULL;
	const char *bad = name; /* the first character a name cannot have */
	while (bad < end && name_char((unsigned char)*bad))
		bad++;
	if (name == end)
		return 0;
	if (bad < end) { /* fine after "operator" only ("operator()", "operator new", "operator<<"): searched
			  * for then, as most names are plain (every process parses the default targets) */
		size_t n = (size_t)(end - name);
		const char *op = n >= 8 ? memmem(name, n, "operator", 8) : NULL;
		if (!op || op > bad)
			return 0;
	}
	for (const char *p = paren ? paren : e; p < e; p++)
		if (*p == ';' || *p == '=')
			return 0;
	return 1;
}

/* The limits of the whole value: an entry past one is not bad in itself, so all of them are named
 * in one warning, not one each. */
static const char too_long[] = "MEMSHIM_STAGES is too long";
static const char too_many[] = "too many stages";

/* Adds the targets in [B, E) separated by '|' to stage ST; returns an error text or NULL. */
static const char *add_targets(struct ms_spec *spec, struct ms_spec_stage *st, const char *b, const char *e)
{
	while (b <= e) {
		const char *bar = memchr(b, '|', (size_t)(e - b));
		const char *te = bar ? bar : e;
		const char *tb = trim(b, &te);
		if (tb == te)
			return "empty target";
		if (!target_plausible(tb, te))
			return "a target is a Python name or a C/C++ symbol, optionally object:name (entries are separated by ',', targets by '|')";
		if (st->ntargets == MS_SPEC_MAX_TARGETS)
			return "too many targets: a stage takes at most " MS_STR(MS_SPEC_MAX_TARGETS);
		const char *t = pool_add(spec, tb, (size_t)(te - tb));
		if (!t)
			return too_long;
		st->targets[st->ntargets++] = t;
		if (!bar)
			break;
		b = bar + 1;
	}
	return NULL;
}

static const char *parse_entry(struct ms_spec *spec, const char *b, const char *e)
{
	const char *eq = memchr(b, '=', (size_t)(e - b));
	if (!eq)
		return "expected stage=target";
	const char *ne = eq;
	const char *nb = trim(b, &ne);
	char name[MS_STAGE_NAME_MAX];
	if ((size_t)(ne - nb) >= sizeof name)
		return "stage name too long";
	memcpy(name, nb, (size_t)(ne - nb));
	name[ne - nb] = '\0';
	if (!strcmp(name, "process"))
		return "\"process\" is the process-wide metrics' prefix: name the stage otherwise";
	if (!ms_stage_name_valid(name))
		return "stage names are [A-Za-z0-9_]+";
	int idx = ms_spec_find(spec, name);
	if (idx < 0) {
		if (spec->nstages == MS_SPEC_MAX_STAGES)
			return too_many;
		idx = spec->nstages;
		memset(&spec->stage[idx], 0, sizeof spec->stage[idx]);
		ms_strlcpy(spec->stage[idx].name, name, sizeof spec->stage[idx].name);
	}
	struct ms_spec_stage saved = spec->stage[idx];
	size_t pool_saved = spec->pool_used;
	const char *why = add_targets(spec, &spec->stage[idx], eq + 1, e);
	if (why) {
		spec->stage[idx] = saved;
		spec->pool_used = pool_saved;
		return why;
	}
	if (idx == spec->nstages)
		spec->nstages++;
	return NULL;
}

#define MS_SPEC_WARNINGS 5 /* a long garbage value must not flood stderr */

/* One warning for the entries past a limit of the whole value (WHY: too_long or too_many): how
 * many, the first of them, and the limit. */
static void warn_limit(const char *why, int n, const char *first, size_t first_len)
{
	char shown[40];
	size_t k = first_len < 32 ? first_len : 32;
	for (size_t i = 0; i < k; i++)
		shown[i] = (first[i] >= 0x20 && first[i] < 0x7f) ? first[i] : '?';
	memcpy(shown + k, first_len > 32 ? "..." : "", first_len > 32 ? 4 : 1);
	/* clang-format off */
	if (why == too_many)
		config_warn("MEMSHIM_STAGES names more than " MS_STR(MS_SPEC_MAX_STAGES) " stages, the most it takes: "
			"%d entr%s from \"%s\" on ignored", n, n == 1 ? "y" : "ies", shown);
	else
		config_warn("MEMSHIM_STAGES is too long: its targets take at most " MS_STR(MS_SPEC_POOL) " bytes; %d "
			"entr%s from \"%s\" on ignored", n, n == 1 ? "y" : "ies", shown);
}
/* clang-format on */

int ms_spec_parse(struct ms_spec *spec, const char *text)
{
	int bad = 0, over = 0, entries = 0;
	const char *over_why = NULL, *over_first = NULL;
	size_t over_len = 0;
	const char *p = text;
	while (*p) {
		const char *comma = strchr(p, ',');
		const char *e = comma ? comma : p + strlen(p);
		const char *te = e;
		const char *b = trim(p, &te);
		if (b < te) {
			entries++;
			const char *why = parse_entry(spec, b, te);
			if (why == too_long || why == too_many) {
				if (!over++) {
					over_why = why;
					over_first = b;
					over_len = (size_t)(te - b);
				}
			} else if (why && ++bad <= MS_SPEC_WARNINGS) {
				warn_entry(b, te, why);
			}
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	if (bad > MS_SPEC_WARNINGS)
		config_warn("MEMSHIM_STAGES: %d more bad entries ignored", bad - MS_SPEC_WARNINGS);
	if (over)
		warn_limit(over_why, over, over_first, over_len);
	if (!entries && text[strspn(text, " \t")]) { /* "," or " , ": set, but no entry */
		char shown[36];
		ms_strlcpy(shown, text, sizeof shown - 3);
		if (strlen(text) > sizeof shown - 4)
			strcat(shown, "...");
		config_warn("MEMSHIM_STAGES=\"%s\" holds no stage=target entry: no stages are watched (unset it for "
			    "Hugging Face Trainer's, set it empty for none)",
			    shown);
	}
	return bad + over + (!entries && text[strspn(text, " \t")]);
}

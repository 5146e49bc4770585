/* --recover and --recover-under: a live record written out as the metrics file its process would
 * have written (input/live.c makes the document), for a process killed with SIGKILL or one still running. */
#include "modes/modes.h"
#include "base/base.h"
#include "input/live.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- --recover ---------------------------------------------------------------------------------- */

static const char mf_recover_usage[] =
	"usage: memshim-format --recover RECORD -o FILE [--keep]\n"
	"Writes the metrics file of a live record (a process killed with SIGKILL, or one still\n"
	"running): the numbers up to its last update. FILE - writes to stdout. The record of a\n"
	"process that is gone is removed once written, unless --keep.\n";

static int mf_write_doc(json_t *doc, const char *file, FILE *out, FILE *err)
{
	if (!strcmp(file, "-")) {
		int rc = json_dumpf(doc, out, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
		fputc('\n', out);
		return rc ? MF_BAD : MF_OK;
	}
	char *tmp = mf_xasprintf("%s.tmp.%d", file, (int)getpid());
	int rc = json_dump_file(doc, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	if (rc == 0 && rename(tmp, file) < 0)
		rc = -1;
	if (rc) {
		fprintf(err, "memshim-format: cannot write %s: %s\n", file, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return rc ? MF_BAD : MF_OK;
}

int mf_recover_main(int argc, char **argv, FILE *out, FILE *err)
{
	const char *record = NULL, *file = NULL;
	int keep = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--recover") && i + 1 < argc && !record)
			record = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc && !file)
			file = argv[++i];
		else if (!strcmp(argv[i], "--keep"))
			keep = 1;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return fputs(mf_recover_usage, out), MF_OK;
		else
			return fprintf(err, "memshim-format: --recover takes RECORD -o FILE [--keep], not %s\n",
				       argv[i]),
			       MF_BAD;
	}
	if (!record || !file)
		return fputs(mf_recover_usage, err), MF_BAD;
	struct ms_live_record *r = mf_xmalloc(sizeof *r);
	int torn = 0, rc = MF_BAD;
	if (mf_live_read(record, r, &torn, err) == 0) {
		int alive = mf_live_alive(r);
		json_t *doc = mf_live_json(r, record, alive, torn);
		rc = mf_write_doc(doc, file, out, err);
		json_decref(doc);
		if (rc == MF_OK && strcmp(file, "-"))
			fprintf(out, "memshim-format: %s: pid %d (%s), %.1f s after its start, written to %s%s\n",
				record, r->pid, alive ? "running" : "gone", r->elapsed, file,
				!alive && !keep ? "; record removed" : "");
		if (rc == MF_OK && !alive && !keep && unlink(record) < 0)
			fprintf(err, "memshim-format: %s: cannot remove: %s\n", record, strerror(errno));
	}
	free(r);
	return rc;
}

/* ---- --recover-under: what `memshim run` does after its command died by a signal --------------- */

/* Whether the metrics file at PATH already tells at least what the record R does, so that
 * recovering would only replace it with a poorer one (no timeline, no call sites): R's own process
 * wrote it (same pid and start time) as its final or signal file, or any process wrote it at or
 * after R's last update.  A missing or unreadable file, and one the record has moved past (an older
 * snapshot, an earlier run's file), does not.  OWN: 1 R's process wrote it, 2 the image the same
 * pid exec'd, 0 another process. */
static int mf_file_holds(const char *path, const struct ms_live_record *r, int *own)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	json_t *pid = json_object_get(root, "pid"), *start = json_object_get(root, "start_time");
	json_t *end = json_object_get(root, "end_time");
	const char *reason = json_string_value(json_object_get(root, "reason"));
	int same_pid = json_is_integer(pid) && json_integer_value(pid) == r->pid;
	*own = same_pid && json_is_number(start) && fabs(json_number_value(start) - r->start_unix) < MF_SAME_START;
	if (same_pid && !*own)
		*own = 2; /* the same pid's later image (an exec) */
	int last_word = json_is_true(json_object_get(root, "complete")) || (reason && !strcmp(reason, "signal"));
	int newer = json_is_number(end) && json_number_value(end) >= r->update_unix - MF_SAME_TIME;
	int holds = root && ((*own == 1 && last_word) || newer);
	json_decref(root);
	return holds;
}

/* Which records --recover-under takes: those whose root_pid is ROOT_PID (when > 0), those of
 * processes started at or after SINCE (when >= 0). */
struct mf_recover_filter {
	long root_pid;
	double since;
};

static int mf_recover_wanted(const struct ms_live_record *r, const struct mf_recover_filter *f)
{
	return (f->root_pid <= 0 || r->root_pid == f->root_pid) && (f->since < 0 || r->start_unix >= f->since);
}

/* The record at PATH, of a process gone whose metrics file is under DIR and does not hold what the
 * record does, written out as that file; the record is removed once written, or when its own
 * process's file already holds it.  Returns 1 when a file was written. */
static int mf_recover_one(const char *path, const char *dir, const struct mf_recover_filter *f, FILE *out, FILE *err)
{
	struct ms_live_record *r = mf_xmalloc(sizeof *r);
	int torn = 0, done = 0, own = 0;
	if (mf_live_read(path, r, &torn, NULL) == 0 && mf_recover_wanted(r, f) && !mf_live_alive(r)) {
		char output[sizeof r->output + 1];
		snprintf(output, sizeof output, "%.*s", (int)strnlen(r->output, sizeof r->output), r->output);
		size_t n = strlen(dir);
		int under = !strncmp(output, dir, n) && (output[n] == '/' || (n && dir[n - 1] == '/'));
		char beside[sizeof output + 24];
		int holds = under && mf_file_holds(output, r, &own), other = holds && own == 0;
		/* another process's newer file under that name (a torchrun rank of the next attempt, where
		 * this one was killed): the record goes beside it, NAME.<pid>, as a child's file would */
		snprintf(beside, sizeof beside, "%s.%d", output, (int)r->pid);
		if (other && mf_file_holds(beside, r, &own))
			other = 0;
		if (holds && !other) {
			if (own == 1)
				unlink(path); /* its own file says as much: the record has nothing more */
		} else if (under) {
			json_t *doc = mf_live_json(r, path, 0, torn);
			const char *to = other ? beside : output;
			if (mf_write_doc(doc, to, out, err) == MF_OK) {
				fprintf(err,
					"memshim: pid %d ended without writing its file: recovered %s from its live record%s\n",
					r->pid, to, other ? " (its name holds a later process's file)" : "");
				unlink(path);
				done = 1;
			}
			json_decref(doc);
		}
	}
	free(r);
	return done;
}

static const char mf_recover_under_usage[] =
	"usage: memshim-format --recover-under DIR [--root-pid PID] [--since SECONDS]\n";

/* The options after --recover-under DIR into F; 0, or -1 after one line on ERR. */
static int mf_recover_under_args(int argc, char **argv, struct mf_recover_filter *f, FILE *err)
{
	for (int i = 3; i < argc; i += 2) {
		char *end = NULL;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v && !strcmp(argv[i], "--root-pid") && f->root_pid <= 0) {
			f->root_pid = strtol(v, &end, 10);
			if (*v && !*end && f->root_pid > 0 && f->root_pid <= INT_MAX)
				continue;
		} else if (v && !strcmp(argv[i], "--since") && f->since < 0) {
			f->since = strtod(v, &end);
			if (*v && !*end && isfinite(f->since) && f->since >= 0)
				continue;
		} else {
			fprintf(err,
				"memshim-format: --recover-under takes DIR [--root-pid PID] [--since SECONDS], not %s\n",
				argv[i]);
			return -1;
		}
		fprintf(err, "memshim-format: bad %s: %s\n", argv[i], v);
		return -1;
	}
	return 0;
}

int mf_recover_under_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct mf_recover_filter filter = { 0, -1 };
	if (argc < 3 || strcmp(argv[1], "--recover-under"))
		return fputs(mf_recover_under_usage, err), MF_BAD;
	if (mf_recover_under_args(argc, argv, &filter, err))
		return MF_BAD;
	char dir[PATH_MAX];
	if (!realpath(argv[2], dir))
		return fprintf(err, "memshim-format: %s: %s\n", argv[2], strerror(errno)), MF_BAD;
	char *dirs[2] = { NULL, mf_live_default_dir() };
	const char *env = getenv("MEMSHIM_LIVE_DIR");
	if (env && *env)
		dirs[0] = mf_xasprintf("%s", env);
	for (int i = 0; i < 2; i++) {
		DIR *d = dirs[i] ? opendir(dirs[i]) : NULL;
		struct dirent *e;
		size_t sl = strlen(MS_LIVE_SUFFIX);
		while (d && (e = readdir(d))) {
			size_t len = strlen(e->d_name);
			if (len <= sl || strcmp(e->d_name + len - sl, MS_LIVE_SUFFIX))
				continue;
			char *path = mf_xasprintf("%s/%s", dirs[i], e->d_name);
			mf_recover_one(path, dir, &filter, out, err);
			free(path);
		}
		if (d)
			closedir(d);
		free(dirs[i]);
	}
	return MF_OK;
}

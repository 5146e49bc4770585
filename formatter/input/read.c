/* A metrics file on disk: read whole, parsed, a live record told apart by its magic number and
 * loaded from its record (live.c), and a snapshot whose live record has moved past shown from the
 * record instead. Checking the document is load.c's. */
#include "input/input.h"
#include "base/base.h"
#include "model/document.h"
#include "input/live.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Reads the whole file, so a directory or an I/O error is told apart from bad JSON. */
static char *mf_slurp(const char *path, size_t *len, FILE *err)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		mf_file_problem(err, path, "cannot open: %s", strerror(errno));
		return NULL;
	}
	size_t cap = 65536, n = 0;
	char *buf = mf_xmalloc(cap);
	for (;;) {
		n += fread(buf + n, 1, cap - n, fp);
		if (n < cap)
			break;
		buf = mf_xrealloc(buf, cap *= 2);
	}
	int bad = ferror(fp), e = errno;
	fclose(fp);
	if (bad) {
		free(buf);
		mf_file_problem(err, path, "cannot read: %s", strerror(e));
		return NULL;
	}
	*len = n;
	return buf;
}

static json_t *mf_parse(const char *path, const char *buf, size_t len, FILE *err)
{
	json_error_t je;
	if (len == 0) {
		mf_file_problem(err, path, "empty file");
		return NULL;
	}
	json_t *root = json_loadb(buf, len, 0, &je);
	if (!root) {
		if (json_error_code(&je) == json_error_premature_end_of_input)
			mf_file_problem(err, path, "truncated JSON (%s at line %d, column %d)", je.text, je.line,
					je.column);
		else
			mf_file_problem(err, path, "not valid JSON (%s at line %d, column %d)", je.text, je.line,
					je.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		mf_file_problem(err, path, "not a memshim metrics file (the JSON is not an object)");
		return NULL;
	}
	return root;
}

int mf_load(const char *path, struct mf_file *f, FILE *err)
{
	size_t len = 0;
	memset(f, 0, sizeof *f);
	char *buf = mf_slurp(path, &len, err);
	if (!buf)
		return -1;
	if (mf_live_magic(buf, len)) /* a live record (live.c) */
		return free(buf), mf_live_load(path, f, err);
	json_t *root = mf_parse(path, buf, len, err);
	free(buf);
	if (!root || mf_load_json(path, root, f, err))
		return -1;
	mf_live_newer(f, err); /* a snapshot its process's live record has moved past */
	return 0;
}

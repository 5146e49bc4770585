/* Native frames' source lines, resolved here rather than in the shim, as heaptrack does:
 * the file says where each native frame lies (stages[].peak_sites*[].locations: an object of
 * sites.objects and the address in its file), and elfutils' libdw reads the object's DWARF line
 * table, from the file itself or its debug file found by build-id (/usr/lib/debug/.build-id/).
 * A frame with a line, "sym+0x1f (obj)", is shown "sym file.c:42 (obj)"; the full path and the line
 * stay beside it for the exports (an internal "mf_lines" array per entry).  An object that moved,
 * whose build-id no longer matches, or without a line table leaves its frames as they were.  One
 * libdw session per object, kept for every file read. */
#include "input/input.h"
#include "base/base.h"
#include "model/document.h"
#include "model/sites.h"

#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One object as a file names it: where libdw found its lines, or that it found none. */
struct mf_obj {
	char *path, *build_id; /* build_id: NULL when the file gave none */
	Dwfl *dwfl;            /* NULL: no lines from this object */
	Dwfl_Module *mod;
	Dwarf_Addr bias; /* libdw's address of the file's address 0 */
};

/* The objects opened so far (kept for every file read, until mf_lines_end) and the debug-file
 * search path libdw reads through the callbacks below. */
static struct {
	struct mf_obj *objs;
	size_t nobjs;
	char *debuginfo_path;
} mf_lines;

static const Dwfl_Callbacks mf_offline = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &mf_lines.debuginfo_path,
};

/* Whether MOD's build-id is WANT (hex); an object the file gave none for matches any. */
static int mf_build_id_is(Dwfl_Module *mod, const char *want)
{
	const unsigned char *bits;
	GElf_Addr at;
	char hex[2 * 64 + 1];
	if (!want)
		return 1;
	int n = dwfl_module_build_id(mod, &bits, &at);
	if (n <= 0 || n > 64)
		return 0;
	for (size_t i = 0; i < (size_t)n; i++)
		snprintf(hex + 2 * i, 3, "%02x", bits[i]);
	return !strcmp(hex, want);
}

/* Opens FILE for O's lines: 1 when it is O's object (its build-id) and has a line table. */
static int mf_obj_try(struct mf_obj *o, const char *file)
{
	Dwarf_Addr dwbias;
	if (access(file, R_OK))
		return 0;
	o->dwfl = dwfl_begin(&mf_offline);
	o->mod = o->dwfl ? dwfl_report_offline(o->dwfl, "", file, -1) : NULL;
	if (o->dwfl)
		dwfl_report_end(o->dwfl, NULL, NULL);
	if (o->mod && mf_build_id_is(o->mod, o->build_id) && dwfl_module_getelf(o->mod, &o->bias) &&
	    dwfl_module_getdwarf(o->mod, &dwbias))
		return 1;
	if (o->dwfl)
		dwfl_end(o->dwfl);
	o->dwfl = NULL;
	o->mod = NULL;
	return 0;
}

/* The object at PATH with BUILD_ID, opened once for all files. */
static struct mf_obj *mf_obj_of(const char *path, const char *build_id)
{
	for (size_t i = 0; i < mf_lines.nobjs; i++)
		if (!strcmp(mf_lines.objs[i].path, path) && (mf_lines.objs[i].build_id == NULL) == (build_id == NULL) &&
		    (!build_id || !strcmp(mf_lines.objs[i].build_id, build_id)))
			return &mf_lines.objs[i];
	mf_lines.objs = mf_xrealloc(mf_lines.objs, (mf_lines.nobjs + 1) * sizeof *mf_lines.objs);
	struct mf_obj *o = &mf_lines.objs[mf_lines.nobjs++];
	memset(o, 0, sizeof *o);
	o->path = mf_xstrdup(path);
	o->build_id = build_id ? mf_xstrdup(build_id) : NULL;
	if (!mf_obj_try(o, path) && build_id && strlen(build_id) > 2) { /* moved or rebuilt: its debug file */
		char *debug = mf_xasprintf("/usr/lib/debug/.build-id/%.2s/%s.debug", build_id, build_id + 2);
		mf_obj_try(o, debug);
		free(debug);
	}
	return o;
}

void mf_lines_end(void)
{
	for (size_t i = 0; i < mf_lines.nobjs; i++) {
		if (mf_lines.objs[i].dwfl)
			dwfl_end(mf_lines.objs[i].dwfl);
		free(mf_lines.objs[i].path);
		free(mf_lines.objs[i].build_id);
	}
	free(mf_lines.objs);
	mf_lines.objs = NULL;
	mf_lines.nobjs = 0;
}

/* The line of the call that returns to OFFSET in O (OFFSET - 1 is inside the call instruction):
 * its file (malloc'd, a relative name joined to its compilation directory), or NULL. */
static char *mf_obj_line(struct mf_obj *o, unsigned long long offset, int *line, const char **function)
{
	if (!o->dwfl || !offset)
		return NULL;
	Dwarf_Addr at = o->bias + offset - 1;
	Dwfl_Line *l = dwfl_module_getsrc(o->mod, at);
	const char *file = l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;
	const char *dir = l && file && file[0] != '/' ? dwfl_line_comp_dir(l) : NULL;
	*function = dwfl_module_addrname(o->mod, at);
	if (!file || !*file || *line <= 0)
		return NULL;
	return dir && dir[0] == '/' ? mf_xasprintf("%s/%s", dir, file) : mf_xstrdup(file);
}

/* Frame K of ENTRY's frames, located by LOC ([object, offset]) among OBJECTS, with its line. */
static void mf_frame_resolve(json_t *frames, size_t k, json_t *loc, json_t *objects, json_t *lines)
{
	json_t *obj = json_array_get(objects, (size_t)json_integer_value(json_array_get(loc, 0)));
	json_t *off = json_array_get(loc, 1), *bid = json_object_get(obj, "build_id");
	const char *path = json_string_value(json_object_get(obj, "path")),
		   *frame = json_string_value(json_array_get(frames, k));
	const char *function;
	int line = 0;
	if (json_array_size(loc) != 2 || !json_is_integer(json_array_get(loc, 0)) || !json_is_integer(off) ||
	    json_integer_value(off) <= 0 || !path || path[0] != '/' || !frame || mf_frame_is_python(frame))
		return;
	struct mf_obj *o = mf_obj_of(path, json_string_value(bid));
	char *file = mf_obj_line(o, (unsigned long long)json_integer_value(off), &line, &function);
	if (!file)
		return;
	char *shown = mf_frame_with_line(frame, function, file, line);
	json_t *text = json_string(shown), *source = json_pack("[s, i]", file, line);
	free(shown), free(file);
	if (text && source) { /* a path that is not UTF-8 leaves the frame as it was */
		json_array_set_new(frames, k, text);
		json_array_set_new(lines, k, source);
	} else {
		json_decref(text), json_decref(source);
	}
}

/* Every frame of the entries of LIST that has a location and a line. */
static void mf_list_resolve(json_t *list, json_t *objects)
{
	size_t i, k;
	json_t *e, *loc;
	json_array_foreach(list, i, e) {
		json_t *frames = json_object_get(e, "frames"), *locs = json_object_get(e, "locations");
		if (!json_is_array(frames) || !json_is_array(locs))
			continue;
		json_t *lines = json_array();
		for (k = 0; k < json_array_size(frames); k++)
			json_array_append_new(lines, json_null());
		json_array_foreach(locs, k, loc)
			if (k < json_array_size(frames) && json_is_array(loc))
				mf_frame_resolve(frames, k, loc, objects, lines);
		json_object_set_new(e, "mf_lines", lines);
	}
}

void mf_lines_resolve(struct mf_file *f)
{
	json_t *objects = json_object_get(json_object_get(f->root, "sites"), "objects");
	if (!json_array_size(objects))
		return;
	for (size_t i = 0; i < json_array_size(f->stages); i++) {
		json_t *st = json_array_get(f->stages, i);
		for (void *it = json_object_iter(st); it; it = json_object_iter_next(st, it)) {
			json_t *list = json_object_iter_value(it);
			if (!strncmp(json_object_iter_key(it), "peak_sites", 10) && json_is_array(list))
				mf_list_resolve(list, objects);
		}
	}
}

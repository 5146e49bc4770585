/* Finding the metrics file: the path is walked one component at a time through directory
 * descriptors, following a symlink only where the kernel's protected_symlinks rule would. */
#ifndef MS_OUTPATH_H
#define MS_OUTPATH_H

#include <limits.h>
#include <sys/types.h>
#include "core/config.h"

enum ms_out_how {
	MS_OUT_REPLACE,  /* a regular file or none yet: replace NAME in DIRFD atomically */
	MS_OUT_IN_PLACE, /* a device or FIFO (NAME in DIRFD), or a /proc link to open (REST in DIRFD) */
	MS_OUT_REFUSED,  /* a symlink the kernel would not follow for us: LINK, owned by LINK_OWNER */
};

/* The walk in progress (one per struct ms_outpath: callers on other threads never share it). */
struct ms_outpath_walk {
	int dirfd;
	int links;
	char todo[MS_PATH_MAX];   /* what is left to walk */
	char target[MS_PATH_MAX]; /* a link's text */
	char spliced[MS_PATH_MAX];
	char shown[MS_PATH_MAX]; /* the directories walked so far, for the warning */
};

struct ms_outpath {
	/* set by the caller: stop at the last name, whatever it is (a directory the caller opens itself
	 * with O_NOFOLLOW) */
	int parent_only;
	enum ms_out_how how;
	int dirfd;               /* O_PATH descriptor of the directory holding the file, or -1 */
	int follow;              /* in place through /proc: open REST following its links */
	char name[NAME_MAX + 1]; /* the file's name in DIRFD */
	char rest[MS_PATH_MAX];  /* in place through /proc: what is left of the path from DIRFD */
	char link[MS_PATH_MAX];  /* refused: the link, as the walk reached it */
	uid_t link_owner;
	struct ms_outpath_walk wk;
};

/* Walks PATH into OUT.  Returns 0, or -errno (ELOOP after 40 links, ENOENT for a missing directory,
 * EISDIR for a directory).  Async-signal-safe, no allocation; close OUT->dirfd when done.  With
 * OUT->parent_only the last name is not looked at: OUT->name in OUT->dirfd, how MS_OUT_REPLACE. */
int ms_outpath_walk(struct ms_outpath *out, const char *path);

#endif

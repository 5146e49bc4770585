/* An object's GNU build-id from the bytes of its PT_NOTE segment, and bytes as hex: pure functions
 * (the call-site report names each object by path and build-id, doc/metrics-format.md). */
#ifndef MS_ELFNOTE_H
#define MS_ELFNOTE_H

#include <stddef.h>

/* The descriptor of the first note named NAME (its NUL counted; padding after it allowed, as Go
 * writes "Go\0\0") of type TYPE among the SIZE bytes of notes at NOTES (the segment aligned to
 * ALIGN, 4 or 8): its bytes, *LEN their number; NULL when there is none or a note runs past SIZE. */
const unsigned char *ms_note_find(const unsigned char *notes, size_t size, size_t align, const char *name,
				  unsigned type, size_t *len);
/* The NT_GNU_BUILD_ID descriptor among the SIZE bytes of notes at NOTES (the segment aligned to
 * ALIGN, 4 or 8): its bytes, *LEN their number; NULL when there is none or a note runs past SIZE. */
const unsigned char *ms_note_build_id(const unsigned char *notes, size_t size, size_t align, size_t *len);
/* The N bytes B as lowercase hex into OUT (SIZE >= 2 N + 1, else cut at a whole byte); the length. */
size_t ms_hex(const unsigned char *b, size_t n, char *out, size_t size);

#endif

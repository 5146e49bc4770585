/* Build-ids from note bytes (see elfnote.h): bounds checked at every step, since the bytes are
 * whatever an object loaded into the program says. */
#include <elf.h>
#include <string.h>
#include "core/elfnote.h"

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

const unsigned char *ms_note_find(const unsigned char *notes, size_t size, size_t align, const char *name,
				  unsigned type, size_t *len)
{
	size_t a = align == 8 ? 8 : 4, at = 0, namesz = strlen(name) + 1;
	while (size - at >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		memcpy(&nh, notes + at, sizeof nh);
		size_t name_at = at + sizeof nh;
		if (nh.n_namesz > size - name_at)
			return NULL;
		size_t desc_at = align_up(name_at + nh.n_namesz, a); /* offsets from the aligned start */
		if (desc_at > size || nh.n_descsz > size - desc_at)
			return NULL;
		if (nh.n_type == type && nh.n_namesz >= namesz && !memcmp(notes + name_at, name, namesz) &&
		    nh.n_descsz) {
			*len = nh.n_descsz;
			return notes + desc_at;
		}
		size_t next = align_up(desc_at + nh.n_descsz, a);
		if (next <= at || next > size)
			return NULL;
		at = next;
	}
	return NULL;
}

const unsigned char *ms_note_build_id(const unsigned char *notes, size_t size, size_t align, size_t *len)
{
	return ms_note_find(notes, size, align, "GNU", NT_GNU_BUILD_ID, len);
}

size_t ms_hex(const unsigned char *b, size_t n, char *out, size_t size)
{
	static const char digits[] = "0123456789abcdef";
	size_t k = 0;
	if (!size)
		return 0;
	for (size_t i = 0; i < n && k + 2 < size; i++) {
		out[k++] = digits[b[i] >> 4];
		out[k++] = digits[b[i] & 15];
	}
	out[k] = '\0';
	return k;
}

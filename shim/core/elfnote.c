/* Build-ids from note bytes (see elfnote.h): bounds checked at every step, since the bytes are
 * whatever an object loaded into the program says. */
#include <elf.h>
#include <string.h>
#include "core/elfnote.h"

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

const unsigned char *ms_note_build_id(const unsigned char *notes, size_t size, size_t align, size_t *len)
{
	size_t a = align == 8 ? 8 : 4, at = 0;
	while (size - at >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		memcpy(&nh, notes + at, sizeof nh);
		size_t name_at = at + sizeof nh;
		if (nh.n_namesz > size - name_at)
			return NULL;
		size_t desc_at = align_up(name_at + nh.n_namesz, a); /* offsets from the aligned start */
		if (desc_at > size || nh.n_descsz > size - desc_at)
			return NULL;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(notes + name_at, "GNU", 4) && nh.n_descsz) {
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

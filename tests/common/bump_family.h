/* The malloc family of a fixture with its own bump allocator (own_malloc.c, sites_bump.c).  The
 * including file first defines static void *take(size_t size, size_t align): a block aligned to
 * ALIGN (16 or more) with its size stored just before it, or NULL.  free keeps nothing. */
#ifndef MS_TEST_BUMP_FAMILY_H
#define MS_TEST_BUMP_FAMILY_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

void *malloc(size_t size) { return take(size, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t size) { return n && size > SIZE_MAX / n ? NULL : take(n * size, 16); }
size_t malloc_usable_size(void *p)
{
	size_t n = 0;
	if (p)
		memcpy(&n, (char *)p - sizeof n, sizeof n);
	return n;
}
void *realloc(void *p, size_t size)
{
	void *q = take(size, 16);
	if (q && p)
		memcpy(q, p, malloc_usable_size(p) < size ? malloc_usable_size(p) : size);
	return q;
}
int posix_memalign(void **out, size_t align, size_t size)
{
	*out = take(size, align < 16 ? 16 : align);
	return *out ? 0 : ENOMEM;
}
void *aligned_alloc(size_t align, size_t size) { return take(size, align < 16 ? 16 : align); }
void *memalign(size_t align, size_t size) { return take(size, align < 16 ? 16 : align); }

#endif

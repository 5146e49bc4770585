/* A malloc-heavy library function of the kind users name as a stage (a parser's entry point):
 * tok_line splits a line into words, copies each (strdup), keeps them in an array that grows
 * (realloc), joins them upper-cased into a new string, hashes it and frees everything: about 80
 * allocations and frees a call on the bench's lines, among ordinary work.  Exported and called through the PLT. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

unsigned long tok_line(const char *line);

unsigned long tok_line(const char *line)
{
	size_t n = 0, cap = 2, len = 0;
	char **words = malloc(cap * sizeof *words);
	for (const char *p = line; *p;) {
		while (*p == ' ')
			p++;
		const char *start = p;
		while (*p && *p != ' ')
			p++;
		if (p == start)
			break;
		if (n == cap)
			words = realloc(words, (cap *= 2) * sizeof *words);
		words[n++] = strndup(start, (size_t)(p - start));
		len += (size_t)(p - start) + 1;
	}
	char *joined = malloc(len + 1), *q = joined;
	for (size_t i = 0; i < n; i++) {
		for (const char *w = words[i]; *w; w++)
			*q++ = (char)toupper((unsigned char)*w);
		*q++ = i + 1 < n ? '_' : '\0';
	}
	if (!n)
		*q = '\0';
	unsigned long h = 5381;
	for (const char *c = joined; *c; c++)
		h = h * 33 + (unsigned char)*c;
	for (size_t i = 0; i < n; i++)
		free(words[i]);
	free(words);
	free(joined);
	return h;
}

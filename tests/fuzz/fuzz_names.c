/* libFuzzer target: native target names (shim/native/names.c).  The input is a target, a newline
 * and a symbol: parsing the target (template arguments encoded) and matching it against the symbol
 * (Itanium prefixes, Rust's legacy hash, the v0 reader's back references) never overrun. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "native/native.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *copy(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t tn = nl ? (size_t)(nl - data) : size;
	char *text = copy(data, tn), *sym = copy(nl ? nl + 1 : data + size, nl ? size - tn - 1 : 0);
	struct ms_target t;
	if (ms_target_parse(&t, text, "prog") == 0) {
		if (t.nprefix < 0 || t.nprefix > MS_TARGET_PREFIXES)
			abort();
		ms_target_matches(&t, sym);
		ms_target_object_matches(&t, sym);
	}
	free(text);
	free(sym);
	return 0;
}

/* What a native target names: "symbol" (a C function, or any C++ function of that name at global
 * scope), "_Z...mangled", "ns::Class::method", each optionally pinned to one object as "lib.so:symbol".  C++ names are matched without a demangler: the
 * qualified name is encoded as the start of its mangled form (Itanium ABI), which every overload,
 * const/ref-qualified variant and template instance of it shares.  Rust paths ("crate::mod::Type::fn")
 * match the same way in Rust's legacy mangling, whose last component is a hash of the build; v0
 * symbols ("_R...") are read into their path's identifiers, without allocating.  The
 * symbol tables (native/syms.c) and the GOT (native/plt.c) are matched by these same rules.  Pure
 * logic (unit-testable). */
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "native/native.h"

static int ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

static int is_ident(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!ident_char(s[i]))
			return 0;
	return 1;
}

/* The ':' that separates "object:symbol" (a single colon, never part of "::"), or NULL. */
static const char *object_colon(const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p != ':')
			continue;
		if (p[1] == ':') {
			p++;
			continue;
		}
		return p;
	}
	return NULL;
}

/* Appends "<len><name>" to OUT (size SIZE, at *AT); -1 when it does not fit. */
static int put_source_name(char *out, size_t size, size_t *at, const char *name, size_t n)
{
	char num[24];
	int k = 0;
	size_t v = n;
	do {
		num[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (*at + (size_t)k + n + 1 > size)
		return -1;
	while (k)
		out[(*at)++] = num[--k];
	memcpy(out + *at, name, n);
	*at += n;
	out[*at] = '\0';
	return 0;
}

static int put(char *out, size_t size, size_t *at, const char *s)
{
	size_t n = strlen(s);
	if (*at + n + 1 > size)
		return -1;
	memcpy(out + *at, s, n + 1);
	*at += n;
	return 0;
}

#define MAX_COMPONENTS 16
#define MAX_TEMPLATE_ARGS 8

struct comps {
	const char *s[MAX_COMPONENTS];
	size_t n[MAX_COMPONENTS];      /* the identifier */
	const char *a[MAX_COMPONENTS]; /* its template arguments ("double" of "f<double>"), or NULL */
	size_t an[MAX_COMPONENTS];
	int count;
};

/* Splits NAME at "::"; every part must be an identifier (the last may be "~Ident"), optionally
 * followed by simple template arguments ("<double>", "<int, char*>": no nested ones). */
static int split(const char *name, struct comps *c)
{
	c->count = 0;
	const char *p = name;
	for (;;) {
		const char *e = strstr(p, "::");
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (c->count == MAX_COMPONENTS)
			return -1;
		const char *lt = memchr(p, '<', n);
		c->s[c->count] = p;
		c->n[c->count] = lt ? (size_t)(lt - p) : n;
		c->a[c->count] = NULL;
		if (lt) {
			if (p[n - 1] != '>' || memchr(lt + 1, '<', n - (size_t)(lt - p) - 1))
				return -1;
			c->a[c->count] = lt + 1;
			c->an[c->count] = n - (size_t)(lt - p) - 2;
		}
		int last = e == NULL;
		n = c->n[c->count++];
		int ok = is_ident(p, n) || (last && n > 1 && p[0] == '~' && is_ident(p + 1, n - 1));
		if (!ok)
			return -1;
		if (last)
			return 0;
		p = e + 2;
	}
}

/* Itanium codes of the builtin types a template argument names. */
static const struct {
	const char *name, *code;
} builtin_types[] = {
	{ "void", "v" },           { "bool", "b" },
	{ "char", "c" },           { "signed char", "a" },
	{ "unsigned char", "h" },  { "short", "s" },
	{ "unsigned short", "t" }, { "int", "i" },
	{ "unsigned", "j" },       { "unsigned int", "j" },
	{ "long", "l" },           { "unsigned long", "m" },
	{ "long long", "x" },      { "unsigned long long", "y" },
	{ "float", "f" },          { "double", "d" },
	{ "long double", "e" },    { "wchar_t", "w" },
	{ "char16_t", "Ds" },      { "char32_t", "Di" },
	{ "size_t", "m" },         { "int8_t", "a" },
	{ "uint8_t", "h" },        { "int16_t", "s" },
	{ "uint16_t", "t" },       { "int32_t", "i" },
	{ "uint32_t", "j" },       { "int64_t", "l" },
	{ "uint64_t", "m" },
};

static int space(char c)
{
	return c == ' ' || c == '\t';
}

/* Appends the mangled form of type argument S (N bytes: "[const] builtin-or-Ident [const] {*}"):
 * 1 for a builtin type, 2 for a type that is a substitution candidate (a repeat would be written
 * "S_"), -1 when it is not one this encodes. */
static int put_type(char *out, size_t size, size_t *at, const char *s, size_t n)
{
	char words[64];
	size_t w = 0;
	int stars = 0, is_const = 0;
	for (size_t i = 0; i < n;) {
		if (space(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '*') {
			stars++, i++;
			continue;
		}
		size_t k = i;
		while (k < n && !space(s[k]) && s[k] != '*')
			k++;
		if (stars || !is_ident(s + i, k - i))
			return -1;
		if (k - i == 5 && !memcmp(s + i, "const", 5)) {
			is_const = 1;
		} else {
			if (w + (k - i) + 2 > sizeof words)
				return -1;
			if (w)
				words[w++] = ' ';
			memcpy(words + w, s + i, k - i);
			w += k - i;
		}
		i = k;
	}
	words[w] = '\0';
	if (w == 0)
		return -1;
	for (int i = 0; i < stars; i++)
		if (put(out, size, at, "P") < 0)
			return -1;
	if (is_const && put(out, size, at, "K") < 0)
		return -1;
	for (size_t i = 0; i < sizeof builtin_types / sizeof builtin_types[0]; i++)
		if (!strcmp(words, builtin_types[i].name))
			return put(out, size, at, builtin_types[i].code) < 0 ? -1 : 1 + (stars || is_const);
	if (strchr(words, ' ') || put_source_name(out, size, at, words, w) < 0)
		return -1;
	return 2;
}

/* Appends "I<args>E" for template arguments A (N bytes); -1 when one is not encoded, or a
 * substitution candidate repeats (its mangled form would be a reference). */
static int put_template_args(char *out, size_t size, size_t *at, const char *a, size_t n)
{
	size_t start[MAX_TEMPLATE_ARGS], len[MAX_TEMPLATE_ARGS];
	int count = 0;
	if (put(out, size, at, "I") < 0)
		return -1;
	for (size_t i = 0; i <= n;) {
		size_t k = i;
		while (k < n && a[k] != ',')
			k++;
		if (count == MAX_TEMPLATE_ARGS)
			return -1;
		start[count] = *at;
		int kind = put_type(out, size, at, a + i, k - i);
		if (kind < 0)
			return -1;
		len[count] = *at - start[count];
		for (int j = 0; kind == 2 && j < count; j++)
			if (len[j] == len[count] && !memcmp(out + start[j], out + start[count], len[j]))
				return -1;
		count++;
		i = k + 1;
	}
	return put(out, size, at, "E");
}

/* Appends component I of C: its source name and template arguments. */
static int put_component(char *out, size_t size, size_t *at, const struct comps *c, int i)
{
	if (put_source_name(out, size, at, c->s[i], c->n[i]) < 0)
		return -1;
	return c->a[i] ? put_template_args(out, size, at, c->a[i], c->an[i]) : 0;
}

/* Mangled prefixes for T->name (a demangled qualified name). */
static void build_prefixes(struct ms_target *t)
{
	struct comps c;
	t->nprefix = 0;
	if (split(t->name, &c) < 0)
		return;
	int first = 0, is_std = c.n[0] == 3 && !memcmp(c.s[0], "std", 3);
	const char *lead = "_Z";
	char body[176];
	size_t at = 0;
	body[0] = '\0';
	if (is_std) {
		first = 1;
		if (put(body, sizeof body, &at, "St") < 0)
			return;
	}
	int nested = c.count - first > 1;
	if (nested)
		lead = "_ZN";
	int last = c.count - 1;
	for (int i = first; i < last; i++)
		if (put_component(body, sizeof body, &at, &c, i) < 0)
			return;
	static const char *const ctor[] = { "C1", "C2", "C3" }, *const dtor[] = { "D0", "D1", "D2" };
	const char *const *special = NULL;
	if (nested && c.n[last] == c.n[last - 1] && !memcmp(c.s[last], c.s[last - 1], c.n[last]))
		special = ctor;
	else if (nested && c.s[last][0] == '~' && c.n[last] - 1 == c.n[last - 1] &&
		 !memcmp(c.s[last] + 1, c.s[last - 1], c.n[last - 1]))
		special = dtor;
	else if (c.s[last][0] == '~')
		return;
	for (int k = 0; k < (special ? 3 : 1) && t->nprefix < MS_TARGET_PREFIXES; k++) {
		char *out = t->prefix[t->nprefix];
		size_t o = 0;
		out[0] = '\0';
		if (put(out, sizeof t->prefix[0], &o, lead) < 0 || put(out, sizeof t->prefix[0], &o, body) < 0)
			return;
		int bad = special ? put(out, sizeof t->prefix[0], &o, special[k])
				  : put_component(out, sizeof t->prefix[0], &o, &c, last);
		if (bad < 0)
			return;
		t->nprefix++;
	}
}

int ms_target_parse(struct ms_target *t, const char *text, const char *exe_base)
{
	memset(t, 0, sizeof *t);
	t->text = text;
	t->stage = -1;
	const char *name = text;
	const char *colon = object_colon(text);
	if (colon) {
		size_t n = (size_t)(colon - text);
		int native_object = ms_target_names_object(text, n) ||
				    (exe_base && *exe_base && strlen(exe_base) == n && !memcmp(text, exe_base, n));
		if (n == 0 || !native_object)
			return -1; /* "module:qualname" belongs to the Python detector */
		t->object = text;
		t->object_len = n;
		name = colon + 1;
	}
	size_t n = strcspn(name, "(");
	while (n && name[n - 1] == ' ')
		n--;
	if (n == 0 || n >= sizeof t->name)
		return -1;
	memcpy(t->name, name, n);
	t->name[n] = '\0';
	const char *lt = strchr(t->name, '<'); /* "f<double>", never Python's "<lambda>" */
	if (strstr(t->name, "::") || t->name[0] == '~' || name[strcspn(name, "(")] == '(' ||
	    (lt && lt > t->name && ident_char(lt[-1]))) {
		t->kind = MS_TK_CXX;
		build_prefixes(t);
		return 0;
	}
	if (!is_ident(t->name, n))
		return -1; /* dotted names are Python's */
	t->kind = MS_TK_PLAIN;
	if (strncmp(t->name, "_Z", 2))
		build_prefixes(t); /* also a C++ function at global scope: "train" is _Z5train... */
	return 0;
}

/* After a nested name: the end of the name, an ABI tag or template arguments. */
static int nested_end(char c)
{
	return c == 'E' || c == 'B' || c == 'I';
}

/* Rust's legacy mangling ends a path with its hash, "17h<16 hex digits>E", which changes every
 * build: a name without it matches (".llvm.N" clones too). */
static int rust_hash_end(const char *s)
{
	if (strncmp(s, "17h", 3))
		return 0;
	for (int i = 3; i < 19; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[19] == 'E' && (s[20] == '\0' || s[20] == '.');
}

/* ---- Rust's v0 mangling ("_R..."): the path read, as a demangler prints it ---------------------- */

#define V0_DEPTH 16   /* back references followed at once */
#define V0_NEST 64    /* paths and types inside each other: the reader runs on the program's stacks */
#define V0_STEPS 4096 /* paths and types read in all (back references can repeat a part) */

/* A v0 symbol being read: S is the text after "_R" (back references count from there). */
struct v0 {
	const char *s;
	size_t at;
	int depth, nest, steps;
	const char *id[MAX_COMPONENTS];
	size_t idn[MAX_COMPONENTS];
	int count;
};

static int v0_digit62(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 36;
	return -1;
}

/* "_" is 0, "<base-62 digits>_" their value + 1. */
static int v0_base62(struct v0 *p, size_t *out)
{
	size_t v = 0;
	if (p->s[p->at] == '_') {
		p->at++;
		*out = 0;
		return 0;
	}
	for (int d; (d = v0_digit62(p->s[p->at])) >= 0; p->at++)
		v = v > ((size_t)1 << 48) ? v : v * 62 + (size_t)d; /* saturated: hashes are 64-bit */
	if (p->s[p->at] != '_')
		return -1;
	p->at++;
	*out = v + 1;
	return 0;
}

static int v0_skip_disambiguator(struct v0 *p)
{
	size_t ignored;
	if (p->s[p->at] != 's')
		return 0;
	p->at++;
	return v0_base62(p, &ignored);
}

/* [disambiguator] <decimal length> ["_"] <bytes>; punycode ("u...") is not read. */
static int v0_ident(struct v0 *p, const char **id, size_t *n)
{
	if (v0_skip_disambiguator(p) < 0 || p->s[p->at] == 'u')
		return -1;
	size_t len = 0;
	if (p->s[p->at] < '0' || p->s[p->at] > '9')
		return -1;
	for (; p->s[p->at] >= '0' && p->s[p->at] <= '9'; p->at++)
		if ((len = len * 10 + (size_t)(p->s[p->at] - '0')) > 4096)
			return -1;
	if (p->s[p->at] == '_')
		p->at++;
	if (strnlen(p->s + p->at, len) < len)
		return -1;
	*id = p->s + p->at;
	*n = len;
	p->at += len;
	return 0;
}

static int v0_emit(struct v0 *p, const char *id, size_t n)
{
	if (p->count == MAX_COMPONENTS)
		return -1;
	p->id[p->count] = id;
	p->idn[p->count++] = n;
	return 0;
}

static int v0_path(struct v0 *p, int emit);
static int v0_type(struct v0 *p, int emit);

/* "B<base-62>": reads what starts at that earlier offset with READ, then goes on after it. */
static int v0_backref(struct v0 *p, int (*read)(struct v0 *, int), int emit)
{
	size_t b = p->at - 1, to;
	if (v0_base62(p, &to) < 0 || to >= b || p->depth == V0_DEPTH)
		return -1;
	size_t back = p->at;
	p->at = to;
	p->depth++;
	int r = read(p, emit);
	p->depth--;
	p->at = back;
	return r;
}

static int v0_lifetime(struct v0 *p)
{
	size_t ignored;
	if (p->s[p->at] != 'L')
		return 0;
	p->at++;
	return v0_base62(p, &ignored);
}

/* A const generic argument: a placeholder, a back reference, or a basic type and its hex value. */
static int v0_const(struct v0 *p, int emit)
{
	(void)emit;
	char c = p->s[p->at];
	if (c == 'p') {
		p->at++;
		return 0;
	}
	if (c == 'B') {
		p->at++;
		return v0_backref(p, v0_const, 0);
	}
	if (c == '\0' || !strchr("abchijlmnostxy", c))
		return -1; /* structs, tuples and arrays as values are not read */
	p->at++;
	if (p->s[p->at] == 'n')
		p->at++;
	while (v0_digit62(p->s[p->at]) >= 0 && v0_digit62(p->s[p->at]) < 16)
		p->at++;
	return p->s[p->at++] == '_' ? 0 : -1;
}

/* Types are read to be skipped (generic arguments); only a path type names a Self. */
static int v0_types_until_e(struct v0 *p)
{
	while (p->s[p->at] != 'E')
		if (v0_type(p, 0) < 0)
			return -1;
	p->at++;
	return 0;
}

static int v0_fn_sig(struct v0 *p)
{
	size_t ignored;
	const char *id;
	if (p->s[p->at] == 'G' && (p->at++, v0_base62(p, &ignored) < 0))
		return -1;
	if (p->s[p->at] == 'U')
		p->at++;
	if (p->s[p->at] == 'K') {
		p->at++;
		if (p->s[p->at] == 'C')
			p->at++;
		else if (v0_ident(p, &id, &ignored) < 0)
			return -1;
	}
	return v0_types_until_e(p) < 0 ? -1 : v0_type(p, 0);
}

static int v0_dyn_bounds(struct v0 *p)
{
	size_t ignored;
	const char *id;
	if (p->s[p->at] == 'G' && (p->at++, v0_base62(p, &ignored) < 0))
		return -1;
	while (p->s[p->at] != 'E') {
		if (v0_path(p, 0) < 0)
			return -1;
		while (p->s[p->at] == 'p') {
			p->at++;
			if (v0_ident(p, &id, &ignored) < 0 || v0_type(p, 0) < 0)
				return -1;
		}
	}
	p->at++;
	return v0_lifetime(p);
}

static int v0_type_in(struct v0 *p, int emit)
{
	char c = p->s[p->at];
	if (c != '\0' && strchr("CNMXYI", c))
		return v0_path(p, emit);
	if (emit || c == '\0')
		return -1; /* a Self that is not a path (an impl on a reference, a tuple) */
	p->at++;
	if (strchr("abcdefhijlmnostuvxyzp", c))
		return 0;
	switch (c) {
	/* clang-format off */
	case 'A': return v0_type(p, 0) < 0 ? -1 : v0_const(p, 0);
	case 'S': case 'P': case 'O': return v0_type(p, 0);
	case 'R': case 'Q': return v0_lifetime(p) < 0 ? -1 : v0_type(p, 0);
	case 'T': return v0_types_until_e(p);
	case 'F': return v0_fn_sig(p);
	case 'D': return v0_dyn_bounds(p);
	case 'B': return v0_backref(p, v0_type, 0);
	default: return -1;
		/* clang-format on */
	}
}

static int v0_generic_args(struct v0 *p)
{
	while (p->s[p->at] != 'E') {
		char c = p->s[p->at];
		int r = c == 'L' ? v0_lifetime(p) : c == 'K' ? (p->at++, v0_const(p, 0)) : v0_type(p, 0);
		if (r < 0)
			return -1;
	}
	p->at++;
	return 0;
}

/* A path; EMIT: its identifiers are the name's components (a crate, modules, a type's path for an
 * inherent impl, the item).  Closures and shims ("NC", "NS") and trait impls are not nameable. */
static int v0_path_in(struct v0 *p, int emit)
{
	const char *id;
	size_t n;
	char c = p->s[p->at++];
	switch (c) {
	case 'C':
		return v0_ident(p, &id, &n) < 0 || (emit && v0_emit(p, id, n) < 0) ? -1 : 0;
	case 'N': {
		char ns = p->s[p->at++];
		if (ns == '\0' || v0_path(p, emit) < 0 || v0_ident(p, &id, &n) < 0)
			return -1;
		if (!emit)
			return 0;
		return ns >= 'A' && ns <= 'Z' ? -1 : v0_emit(p, id, n);
	}
	case 'M': /* an inherent impl: named by its Self type */
		return v0_skip_disambiguator(p) < 0 || v0_path(p, 0) < 0 ? -1 : v0_type(p, emit);
	case 'I':
		return v0_path(p, emit) < 0 ? -1 : v0_generic_args(p);
	case 'B':
		return v0_backref(p, v0_path, emit);
	case 'X': /* <Type as Trait>::item: read past (a generic argument), never named */
		if (emit || v0_skip_disambiguator(p) < 0 || v0_path(p, 0) < 0)
			return -1;
		/* fall through */
	case 'Y':
		return emit || v0_type(p, 0) < 0 ? -1 : v0_path(p, 0);
	default:
		return -1;
	}
}

/* READ inside the bounds of nesting and work. */
static int v0_nested(struct v0 *p, int (*read)(struct v0 *, int), int emit)
{
	if (p->nest == V0_NEST || ++p->steps > V0_STEPS)
		return -1;
	p->nest++;
	int r = read(p, emit);
	p->nest--;
	return r;
}

static int v0_path(struct v0 *p, int emit)
{
	return v0_nested(p, v0_path_in, emit);
}

static int v0_type(struct v0 *p, int emit)
{
	return v0_nested(p, v0_type_in, emit);
}

/* Whether v0 symbol SYM's path is NAME ("crate::module::Type::item", generic arguments ignored). */
static int v0_matches(const char *name, const char *sym)
{
	const char *last = name;
	for (const char *e; (e = strstr(last, "::"));)
		last = e + 2;
	if (!strstr(sym, last))
		return 0; /* the usual case, without reading the symbol */
	struct v0 p = { .s = sym + 2 };
	while (p.s[p.at] >= '0' && p.s[p.at] <= '9')
		p.at++; /* an encoding version */
	if (v0_path(&p, 1) < 0)
		return 0;
	const char *c = name;
	for (int i = 0; i < p.count; i++) {
		const char *e = strstr(c, "::");
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n != p.idn[i] || memcmp(c, p.id[i], n) || (i + 1 < p.count) != (e != NULL))
			return 0;
		c = e ? e + 2 : c + n;
	}
	return p.count > 0;
}

static void filter_add(struct ms_target_filter *f, unsigned char a, unsigned char b)
{
	unsigned k = (unsigned)a << 8 | b;
	f->bits[k / 8] |= (unsigned char)(1u << (k % 8));
}

/* What ms_target_matches can accept starts with: the plain name (a one-byte name: itself or its
 * clones), "_Z" for mangled forms, "_R" for Rust v0. */
void ms_target_filter_build(struct ms_target_filter *f, const struct ms_target *t, int n)
{
	memset(f, 0, sizeof *f);
	for (int i = 0; i < n; i++) {
		unsigned char a = (unsigned char)t[i].name[0], b = (unsigned char)(a ? t[i].name[1] : 0);
		filter_add(f, a, b);
		if (a && !b)
			filter_add(f, a, '.');
		if (t[i].nprefix) {
			filter_add(f, '_', 'Z');
			filter_add(f, '_', 'R');
		}
	}
}

int ms_target_matches(const struct ms_target *t, const char *sym)
{
	if (sym[0] == '_' && sym[1] == 'R' && t->kind == MS_TK_CXX && t->nprefix)
		return v0_matches(t->name, sym);
	if (t->kind == MS_TK_PLAIN && sym[0] == t->name[0]) { /* most symbols differ at once */
		size_t n = strlen(t->name);
		if (!strncmp(sym, t->name, n) && (sym[n] == '\0' || sym[n] == '.'))
			return 1;
	}
	if (t->nprefix == 0 || sym[0] != '_' || sym[1] != 'Z')
		return 0; /* every prefix starts "_Z" (lead) */
	for (int k = 0; k < t->nprefix; k++) {
		const char *p = t->prefix[k];
		if (p[2] != 'N') { /* _Z<name>: the length makes the prefix unambiguous */
			if (sym[2] != p[2] || sym[3] != p[3])
				continue; /* the length's first digit and what follows: most differ here */
			size_t n = strlen(p);
			if (!strncmp(sym, p, n) && sym[n] != '\0' && sym[n] != '.')
				return 1;
			continue;
		}
		if (strncmp(sym, "_ZN", 3))
			continue;
		const char *s = sym + 3;
		while (*s == 'r' || *s == 'V' || *s == 'K' || *s == 'R' || *s == 'O')
			s++;
		size_t n = strlen(p + 3);
		// NOLINTNEXTLINE(bugprone-not-null-terminated-result): a prefix test
		if (!strncmp(s, p + 3, n) && (nested_end(s[n]) || rust_hash_end(s + n)))
			return 1;
	}
	return 0;
}

int ms_c_runtime_file(const char *base)
{
	static const char *const runtime[] = { "libc.so",       "libm.so",     "libmvec.so",  "ld-linux",
					       "libpthread.so", "libdl.so",    "librt.so",    "libutil.so",
					       "libresolv.so",  "libcrypt.so", "libgcc_s.so", "libstdc++.so" };
	for (size_t i = 0; i < sizeof runtime / sizeof *runtime; i++)
		if (!strncmp(base, runtime[i], strlen(runtime[i])))
			return 1;
	return 0;
}

int ms_target_object_matches(const struct ms_target *t, const char *path)
{
	const char *base = ms_file_name(path);
	/* a plain name of the runtime's: any object but the runtime's own */
	if (t->runtime_of[0] && (ms_c_runtime_file(base) || !strcmp(base, t->runtime_of)))
		return 0;
	if (!t->object)
		return 1;
	size_t n = t->object_len, len = strlen(path);
	if (memchr(t->object, '/', n))
		return len >= n && !memcmp(path + len - n, t->object, n) &&
		       (len == n || path[len - n - 1] == '/' || t->object[0] == '/');
	return !strncmp(base, t->object, n) && (base[n] == '\0' || base[n] == '.');
}

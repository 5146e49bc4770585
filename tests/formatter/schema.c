/* A JSON Schema checker for the subset of draft 2020-12 that doc/metrics.schema.json uses: type,
 * const, enum, minimum, required, properties, patternProperties (POSIX extended expressions, the
 * part they share with ECMA-262), additionalProperties, items, prefixItems, minItems, maxItems
 * and $ref to #/$defs/NAME.  Any other keyword is reported, so the schema cannot use one that
 * would go unchecked here. */
#include "schema.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

struct t_check {
	json_t *root;
	int strict, problems;
	char *why;
	size_t size;
};

static void problem(struct t_check *c, const char *path, const char *what, const char *detail)
{
	if (!c->problems++)
		snprintf(c->why, c->size, "%s: %s%s%s", *path ? path : "/", what, detail ? " " : "",
			 detail ? detail : "");
}

static int is_type(json_t *v, const char *type)
{
	if (!strcmp(type, "object"))
		return json_is_object(v);
	if (!strcmp(type, "array"))
		return json_is_array(v);
	if (!strcmp(type, "string"))
		return json_is_string(v);
	if (!strcmp(type, "boolean"))
		return json_is_boolean(v);
	if (!strcmp(type, "null"))
		return json_is_null(v);
	if (!strcmp(type, "number"))
		return json_is_number(v);
	if (!strcmp(type, "integer")) /* 1.0 is an integer in JSON Schema */
		return json_is_integer(v) ||
		       (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
	return -1;
}

/* Numbers compare by value (1 and 1.0 are equal), everything else as JSON. */
static int same(json_t *a, json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	return json_equal(a, b);
}

static int matches(const char *pattern, const char *key, struct t_check *c, const char *path)
{
	regex_t re;
	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB)) {
		problem(c, path, "bad pattern in the schema:", pattern);
		return 0;
	}
	int m = regexec(&re, key, 0, NULL, 0) == 0;
	regfree(&re);
	return m;
}

static void check(struct t_check *c, json_t *s, json_t *v, const char *path);

static json_t *deref(struct t_check *c, json_t *ref, const char *path)
{
	const char *r = json_string_value(ref);
	json_t *target = NULL;
	if (r && !strncmp(r, "#/$defs/", 8))
		target = json_object_get(json_object_get(c->root, "$defs"), r + 8);
	if (!target)
		problem(c, path, "unresolved $ref", r);
	return target;
}

static void check_type(struct t_check *c, json_t *t, json_t *v, const char *path)
{
	size_t i;
	json_t *one;
	if (json_is_string(t)) {
		int ok = is_type(v, json_string_value(t));
		if (ok < 0)
			problem(c, path, "unknown type in the schema:", json_string_value(t));
		else if (!ok)
			problem(c, path, "not of type", json_string_value(t));
		return;
	}
	json_array_foreach(t, i, one)
		if (is_type(v, json_string_value(one)) == 1)
			return;
	problem(c, path, "of none of the types allowed", NULL);
}

static void check_object(struct t_check *c, json_t *s, json_t *v, const char *path)
{
	json_t *props = json_object_get(s, "properties"), *pats = json_object_get(s, "patternProperties");
	json_t *extra = json_object_get(s, "additionalProperties"), *req = json_object_get(s, "required");
	json_t *m, *ps;
	const char *key, *pat;
	char sub[1024];
	size_t i;
	json_array_foreach(req, i, m)
		if (!json_object_get(v, json_string_value(m)))
			problem(c, path, "missing required member", json_string_value(m));
	json_object_foreach(v, key, m) {
		int described = 0;
		snprintf(sub, sizeof sub, "%s/%s", path, key);
		if (json_object_get(props, key)) {
			described = 1;
			check(c, json_object_get(props, key), m, sub);
		}
		json_object_foreach(pats, pat, ps)
			if (matches(pat, key, c, path)) {
				described = 1;
				check(c, ps, m, sub);
			}
		if (described)
			continue;
		if (json_is_false(extra))
			problem(c, sub, "not allowed here", NULL);
		else if (json_is_object(extra))
			check(c, extra, m, sub);
		else if (c->strict && (props || pats)) /* a node with only $ref leaves it to its target */
			problem(c, sub, "not described by the schema", NULL);
	}
}

static void check_array(struct t_check *c, json_t *s, json_t *v, const char *path)
{
	json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	json_t *lo = json_object_get(s, "minItems"), *hi = json_object_get(s, "maxItems"), *m;
	char sub[1024];
	size_t i;
	if (lo && json_array_size(v) < (size_t)json_integer_value(lo))
		problem(c, path, "too few items", NULL);
	if (hi && json_array_size(v) > (size_t)json_integer_value(hi))
		problem(c, path, "too many items", NULL);
	json_array_foreach(v, i, m) {
		snprintf(sub, sizeof sub, "%s/%zu", path, i);
		if (i < json_array_size(prefix))
			check(c, json_array_get(prefix, i), m, sub);
		else if (items)
			check(c, items, m, sub);
	}
}

static const char *const known[] = { "$schema", "$id", "$comment", "title", "description", "$defs",
	"$ref", "type", "const", "enum", "minimum", "required", "properties", "patternProperties",
	"additionalProperties", "items", "prefixItems", "minItems", "maxItems" };

static void check(struct t_check *c, json_t *s, json_t *v, const char *path)
{
	const char *kw;
	json_t *x;
	if (json_is_true(s))
		return;
	if (!json_is_object(s)) {
		problem(c, path, "the schema here is not an object", NULL);
		return;
	}
	json_object_foreach(s, kw, x) {
		size_t k = 0;
		while (k < sizeof known / sizeof known[0] && strcmp(known[k], kw))
			k++;
		if (k == sizeof known / sizeof known[0])
			problem(c, path, "keyword this checker does not know:", kw);
	}
	if ((x = json_object_get(s, "$ref")) && (x = deref(c, x, path)))
		check(c, x, v, path);
	if ((x = json_object_get(s, "type")))
		check_type(c, x, v, path);
	if ((x = json_object_get(s, "const")) && !same(x, v))
		problem(c, path, "not the constant the schema wants", NULL);
	if ((x = json_object_get(s, "enum"))) {
		size_t i;
		json_t *one;
		int found = 0;
		json_array_foreach(x, i, one)
			found |= same(one, v);
		if (!found)
			problem(c, path, "not one of the values allowed", NULL);
	}
	if ((x = json_object_get(s, "minimum")) && json_is_number(v) &&
	    json_number_value(v) < json_number_value(x))
		problem(c, path, "below the minimum", NULL);
	if (json_is_object(v))
		check_object(c, s, v, path);
	if (json_is_array(v))
		check_array(c, s, v, path);
}

int t_schema_check(json_t *schema, json_t *instance, int strict, char *why, size_t size)
{
	struct t_check c = { schema, strict, 0, why, size };
	if (size)
		why[0] = '\0';
	check(&c, schema, instance, "");
	return c.problems;
}

/* A JSON Schema checker for the subset of draft 2020-12 that doc/metrics.schema.json uses. */
#ifndef MF_TEST_SCHEMA_H
#define MF_TEST_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* Checks INSTANCE against SCHEMA (the whole document, for $ref); returns the number of problems
 * and describes the first in WHY ("/stages/0/cpu/peak: not an integer").  STRICT: an object
 * member the schema does not describe (in properties or patternProperties) is a problem too. */
int t_schema_check(json_t *schema, json_t *instance, int strict, char *why, size_t size);

#endif

/* libFuzzer target: the MEMSHIM_STAGES parser never overruns and keeps its invariants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/stages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ms_spec spec;
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	ms_cfg.log_level = MS_LOG_QUIET;
	memset(&spec, 0, sizeof spec);
	ms_spec_parse(&spec, text);
	if (spec.nstages < 0 || spec.nstages > MS_SPEC_MAX_STAGES || spec.pool_used > MS_SPEC_POOL)
		abort();
	for (int i = 0; i < spec.nstages; i++) {
		if (!ms_stage_name_valid(spec.stage[i].name) || spec.stage[i].ntargets < 1 ||
		    spec.stage[i].ntargets > MS_SPEC_MAX_TARGETS)
			abort();
		for (int t = 0; t < spec.stage[i].ntargets; t++) {
			const char *target = spec.stage[i].targets[t];
			if (target < spec.pool || target >= spec.pool + spec.pool_used || !target[0] ||
			    strpbrk(target, ",|"))
				abort();
		}
	}
	free(text);
	return 0;
}

/* libFuzzer target: every environment-variable parser, fed one value per line of the input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/ms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = { "MEMSHIM_LOG", "MEMSHIM_DISABLE", "MEMSHIM_OUTPUT",
	"MEMSHIM_FOLLOW_CHILDREN", "MEMSHIM_SNAPSHOT_INTERVAL", "MEMSHIM_TIMELINE", "MEMSHIM_STAGES" };
#define NNAMES (sizeof names / sizeof *names)
static char *values[NNAMES];

static const char *fake_getenv(const char *name)
{
	for (size_t i = 0; i < NNAMES; i++)
		if (!strcmp(name, names[i]))
			return values[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ms_config cfg;
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	char *p = text;
	for (size_t i = 0; i < NNAMES; i++) { /* a line per setting; a missing line leaves it unset */
		values[i] = p;
		char *nl = p ? strchr(p, '\n') : NULL;
		if (nl)
			*nl = '\0';
		p = nl ? nl + 1 : NULL;
	}
	ms_cfg.log_level = MS_LOG_QUIET;
	ms_config_load(&cfg, fake_getenv);
	if (cfg.log_level < 0 || cfg.log_level > 2 || (cfg.disabled & ~1) || (cfg.follow_children & ~1) ||
	    (cfg.timeline & ~1) || !(cfg.snapshot_interval >= 0 || cfg.snapshot_interval == MS_SNAPSHOT_AUTO) ||
	    !isfinite(cfg.snapshot_interval) ||
	    (cfg.output[0] && cfg.output[0] != '/') || strlen(cfg.output) >= MS_PATH_MAX)
		abort();
	free(text);
	return 0;
}

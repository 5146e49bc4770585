/* Loads the settings with stderr captured: the unit suites count the shim's warnings. */
#ifndef MS_TEST_CAPTURE_H
#define MS_TEST_CAPTURE_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"

/* Runs ms_config_load(CFG, GET) with stderr going to OUT; returns the number of "memshim:" lines. */
static inline int load_capturing_into(struct ms_config *cfg, ms_getenv_fn get, char *out, size_t size)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	ms_config_load(cfg, get);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(out, 1, size - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	ms_cfg.log_level = MS_LOG_WARN; /* the next load starts from the default again */
	int lines = 0;
	for (char *p = out; (p = strstr(p, "memshim: ")); p++)
		lines++;
	return lines;
}

#endif

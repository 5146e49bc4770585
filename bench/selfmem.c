/* Prints this process's resident memory (kB) after some stage work: run bare and under the shim,
 * the difference is what the shim itself costs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int memshim_stage_begin(const char *name) __attribute__((weak));
int memshim_stage_end(const char *name) __attribute__((weak));

int main(void)
{
	char name[32];
	for (int i = 0; i < 200; i++) { /* 20 stages, 10 calls each, 1000 blocks per call */
		snprintf(name, sizeof name, "stage_%d", i % 20);
		if (memshim_stage_begin)
			memshim_stage_begin(name);
		void *p[1000];
		for (int k = 0; k < 1000; k++)
			p[k] = malloc(64 + k);
		for (int k = 0; k < 1000; k++)
			free(p[k]);
		if (memshim_stage_end)
			memshim_stage_end(name);
	}
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			printf("%s", line + 6);
	fclose(f);
	return 0;
}

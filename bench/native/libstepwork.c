/* Issue 26's library fixture: an exported function doing 128 malloc/free pairs per call. */
#include <stdlib.h>

void *volatile step_sink;
void step_work(int salt);

void step_work(int salt)
{
	for (int i = 0; i < 128; i++) {
		void *p = malloc((size_t)(16 + (i * 37 + salt) % 512));
		step_sink = p;
		free(p);
	}
}

/* stepcall N: calls libstepwork.so's step_work N times through the PLT. */
#include <stdlib.h>

void step_work(int salt);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3000;
	for (int i = 0; i < n; i++)
		step_work(i);
	return 0;
}

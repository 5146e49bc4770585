/* tokcall N: calls libtokens.so's tok_line N times through the PLT, on 16 lines of 20 to 52 words
 * made once before. */
#include <stdio.h>
#include <stdlib.h>

unsigned long tok_line(const char *line);
unsigned long volatile tok_sink;

int main(int argc, char **argv)
{
	static const char *const words[] = { "alpha", "be", "gamma", "delta", "epsilon", "zeta", "eta",
					     "theta", "iota", "kappa", "lambda", "mu", "nu", "xi" };
	static char lines[16][512];
	for (int i = 0; i < 16; i++)
		for (int w = 0, len = 0; w < 20 + i % 9 * 4; w++)
			len += snprintf(lines[i] + len, sizeof lines[i] - (size_t)len, "%s ", words[(i * 7 + w * 3) % 14]);
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	unsigned long sum = 0;
	for (int i = 0; i < n; i++)
		sum += tok_line(lines[i % 16]);
	tok_sink = sum;
	return 0;
}

/* Python's float repr (shortest round-trip digits, its fixed/exponent switch) and round(x, 4). */
#include "base/base.h"

#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Digits of X with PREC significant digits under rounding MODE; returns 1 when they read back as X. */
static int mf_try_digits(double x, int prec, int mode, char *buf, size_t len)
{
	int old = fegetround();
	fesetround(mode);
	snprintf(buf, len, "%.*e", prec - 1, x);
	fesetround(old);
	return strtod(buf, NULL) == x;
}

/* Shortest "d.ddde±N" that reads back as X; ties between candidates go to the nearest (as dtoa). */
static void mf_shortest(double x, char *buf, size_t len)
{
	static const int modes[] = { FE_TONEAREST, FE_UPWARD, FE_DOWNWARD };
	for (int prec = 1; prec <= 17; prec++)
		for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
			if (mf_try_digits(x, prec, modes[m], buf, len))
				return;
	snprintf(buf, len, "%.16e", x);
}

/* Splits "d.ddde±N" into bare digits (no trailing zeros) and Python's decpt (value = 0.DIGITS e decpt). */
static int mf_split(const char *sci, char *digits)
{
	size_t n = 0;
	const char *p = sci;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[n++] = *p;
	while (n > 1 && digits[n - 1] == '0')
		n--;
	digits[n] = '\0';
	return (*p == 'e' ? atoi(p + 1) : 0) + 1;
}

static void mf_fixed(char *o, const char *digits, int decpt)
{
	int nd = (int)strlen(digits);
	if (decpt <= 0) {
		o += sprintf(o, "0.");
		for (int i = 0; i < -decpt; i++)
			*o++ = '0';
		strcpy(o, digits);
	} else if (decpt >= nd) {
		o += sprintf(o, "%s", digits);
		for (int i = nd; i < decpt; i++)
			*o++ = '0';
		strcpy(o, ".0");
	} else {
		sprintf(o, "%.*s.%s", decpt, digits, digits + decpt);
	}
}

void mf_py_repr(double x, char out[MF_REPR_MAX])
{
	char sci[64], digits[32] = { 0 };
	if (isnan(x)) {
		strcpy(out, "nan");
		return;
	}
	if (isinf(x)) {
		strcpy(out, x < 0 ? "-inf" : "inf");
		return;
	}
	char *o = out;
	if (signbit(x))
		*o++ = '-';
	if (x == 0) {
		strcpy(o, "0.0");
		return;
	}
	mf_shortest(fabs(x), sci, sizeof sci);
	int decpt = mf_split(sci, digits);
	if (decpt > -4 && decpt <= 16) {
		mf_fixed(o, digits, decpt);
		return;
	}
	/* Python's exponent form: "1e-05", "1.5e+16": no ".0", at least two exponent digits. */
	int e = decpt - 1;
	if (digits[1])
		sprintf(o, "%c.%se%c%02d", digits[0], digits + 1, e < 0 ? '-' : '+', abs(e));
	else
		sprintf(o, "%ce%c%02d", digits[0], e < 0 ? '-' : '+', abs(e));
}

double mf_py_round4(double x)
{
	/* glibc's %.4f rounds the exact binary value half-to-even, as CPython's round() does. */
	char buf[400];
	if (!isfinite(x))
		return x;
	snprintf(buf, sizeof buf, "%.4f", x);
	return strtod(buf, NULL);
}

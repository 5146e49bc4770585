/* memshim-format: prints memshim metrics files; everything but main() lives in testable files. */
#include "mf.h"

int main(int argc, char **argv)
{
	return mf_main(argc, argv, stdout, stderr);
}

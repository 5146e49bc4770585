/* libFuzzer target: the formatter's metrics-file reader and everything that prints a loaded file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "input/input.h"
#include "modes/modes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static FILE *sink;
	char path[64];
	if (fd < 0) {
		fd = memfd_create("metrics", 0);
		sink = fopen("/dev/null", "w");
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	struct mf_file f;
	if (mf_load(path, &f, sink) == 0) {
		struct mf_opts o = { 0 };
		mf_dump_file(sink, &f, &o);
		o.calls = 1;
		mf_dump_file(sink, &f, &o);
		int keep = 1;
		struct mf_set one = { .f = &f, .n = 1, .keep = &keep, .how = MF_PICK_RANKS };
		mf_merge(sink, &one, &o);
		o.calls = 0;
		o.threshold_text = "5%,1MB";
		mf_parse_threshold(o.threshold_text, &o.threshold);
		mf_diff(sink, &f, &f, &o);
		mf_file_free(&f);
	}
	return 0;
}

/* The exported API (memshim.h): thin checks over the stage engine. */
#include <errno.h>
#include <string.h>
#include "memshim.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "output/labels.h"
#include "output/report.h"

static int warned_invalid, warned_full;

/* The stage called NAME, made when new; -1 with one warning per kind: a name that is not valid, or
 * the table full (each says which, and the limit). */
static int lookup(const char *name)
{
	int id = ms_stage_id(name);
	if (id != -1)
		return id;
	if (!ms_stage_name_valid(name)) {
		if (!__atomic_exchange_n(&warned_invalid, 1, __ATOMIC_RELAXED)) {
			char shown[68];
			size_t i = 0;
			for (; name && i < 64 && name[i]; i++)
				shown[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
			memcpy(shown + i, name && name[i] ? "..." : "", name && name[i] ? 4 : 1);
			ms_warn("stage name \"%s\" is not valid: a stage name is [A-Za-z0-9_]+, 1 to 63 characters, "
				"not \"process\"; this stage is not measured",
				name ? shown : "(null)");
		}
	} else if (!__atomic_exchange_n(&warned_full, 1, __ATOMIC_RELAXED)) {
		/* clang-format off */
		ms_warn("stage \"%s\" not opened: a process has at most " MS_STR(MS_MAX_STAGES) " stage names "
			"(MEMSHIM_STAGES's and the API's together), all taken; it and any further new name are not "
			"measured", name);
		/* clang-format on */
	}
	return -1;
}

EXPORT int memshim_stage_begin(const char *name)
{
	if (!ms_active)
		return 0;
	int saved = errno;
	int id = lookup(name);
	int rc = id < 0 ? -1 : ms_stage_enter(id, ms_elapsed());
	errno = saved;
	return rc;
}

EXPORT int memshim_stage_begin_labelled(const char *name, const char *label)
{
	if (!ms_active)
		return 0;
	int saved = errno;
	int id = lookup(name);
	int rc = id < 0 ? -1 : ms_stage_enter(id, ms_elapsed());
	if (rc == 0 && label && ms_stage_depth(id) == 1) /* this begin opened the call */
		ms_labels_open(id, label);
	errno = saved;
	return rc;
}

static int end(const char *name, int how, const char *exception)
{
	if (!ms_active)
		return 0;
	int saved = errno;
	int id = ms_stage_find(name);
	struct ms_span closed;
	uint64_t call;
	int rc = id < 0 ? -1 : ms_stage_leave_ended(id, ms_elapsed(), how, exception, &closed, &call);
	if (rc == 1)
		ms_labels_close(id, &closed, call);
	errno = saved;
	return rc < 0 ? -1 : 0;
}

EXPORT int memshim_stage_end(const char *name)
{
	return end(name, MS_END_RETURNED, NULL);
}

EXPORT int memshim_stage_end_raised(const char *name, const char *exception)
{
	return end(name, MS_END_RAISED, exception);
}

EXPORT int memshim_snapshot(void)
{
	if (!ms_active)
		return -1;
	return ms_report_write("snapshot", 0, 0);
}

static long metrics_json(char *buf, size_t size, int brief)
{
	if (!ms_active || (!buf && size))
		return -1;
	int saved = errno;
	long n = ms_report_to_buffer(buf, size, brief);
	errno = saved;
	return n;
}

EXPORT long memshim_metrics_json(char *buf, size_t size)
{
	return metrics_json(buf, size, 0);
}

EXPORT long memshim_metrics_json_brief(char *buf, size_t size)
{
	return metrics_json(buf, size, 1);
}

EXPORT int memshim_active(void)
{
	return ms_active != 0;
}

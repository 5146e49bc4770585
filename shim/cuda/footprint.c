/* The GPU's footprint, read, not counted (cuda/footprint.h).  A reading asks the driver the
 * program loaded for cuMemGetInfo on the calling thread's current context only: a thread without
 * one, or whose context is another device's, never gets one made or switched (the program would
 * see it), so a device is read where the program's own threads run on it; NVML (nvml.c) gives
 * this process's footprint on every device it used, current context or not.  Readings happen at
 * stage boundaries, at exit, at GPU timeline points at most every 100 ms, and at a failed
 * allocation: never inside a driver call (the driver's locks may be held) and never in a process
 * that has not used the driver; each in relaxed stream-capture mode (a graph the program captures
 * meanwhile stays valid).  Which stage calls are open, and when a stage's record starts over, is
 * the engine's (ms_stages_calls, copied at each reading): another thread's boundary may come
 * between the engine's and our observer's.  One try-lock serialises readings; a busy one skips. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/spin.h"
#include "core/stages.h"
#include "cuda/driver.h"
#include "cuda/footprint.h"

#define POINT_GAP 0.100 /* seconds between two readings at timeline points */
#define LOCK_SPINS 4096
#define OUT_OF_MEMORY 2 /* CUDA_ERROR_OUT_OF_MEMORY */

static struct ms_gpu_footprint fp MS_LARGE;
static struct ms_spin fp_lock;
static __thread int fp_mine MS_TLS;
static pid_t fp_pid;                  /* the process that read: a forked child's copy is its parent's */
static double last_point;             /* ms_elapsed() of the last reading at a timeline point */
static uint64_t held[MS_MAX_STAGES];  /* the begins of the call fp.stage[s] is the record of */
static uint64_t ended[MS_MAX_STAGES]; /* the begins of the last call read at its end */
/* The engine's open calls at the last reading, outermost first. */
static struct ms_stage_call open_calls[MS_MAX_STAGES] MS_LARGE;
static int nopen;
static void (*oom_observer)(int index);
uint32_t ms_gpufp_bursts; /* bit d: an out-of-memory burst is open on device d */
__thread int ms_gpufp_counting MS_TLS;

void ms_cuda_set_oom_observer(void (*fn)(int index))
{
	__atomic_store_n(&oom_observer, fn, __ATOMIC_RELEASE);
}

/* Only a process that used the driver reads, and only the one that read first (not a fork). */
static int may_read(void)
{
	if (!ms_gpu_used())
		return 0;
	pid_t self = (pid_t)syscall(SYS_getpid), none = 0;
	return __atomic_compare_exchange_n(&fp_pid, &none, self, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) || none == self;
}

void ms_gpufp_fork_child(int tracking)
{
	(void)tracking;
	ms_spin_reset(&fp_lock, &fp_mine); /* another thread of the parent may have held it */
	/* the parent's driver: its calls may hang or fail in the child */
	if (ms_gpu_used())
		__atomic_store_n(&fp_pid, (pid_t)-1, __ATOMIC_RELEASE);
}

static int lock(void)
{
	return ms_spin_trylock(&fp_lock, &fp_mine, LOCK_SPINS);
}

static void unlock(void)
{
	ms_spin_unlock(&fp_lock, &fp_mine);
}

/* ---- one reading ---- */

/* cuMemGetInfo of the current context's device into *FREE, *TOTAL: the device, or -1 when this
 * thread has no current context (none is made). */
static int current_mem(int64_t *free_b, int64_t *total_b)
{
	CUresult (*get_ctx)(void **) = (CUresult(*)(void **))ms_cuda_real_optional(H_cuCtxGetCurrent);
	CUresult (*get_dev)(CUdevice *) = (CUresult(*)(CUdevice *))ms_cuda_real(H_cuCtxGetDevice);
	CUresult (*info)(size_t *, size_t *) =
		(CUresult(*)(size_t *, size_t *))ms_cuda_real_optional(H_cuMemGetInfo_v2);
	void *ctx = NULL;
	CUdevice dev = -1;
	size_t f = 0, t = 0;
	if (!get_ctx || !get_dev || !info || get_ctx(&ctx) != CUDA_SUCCESS || !ctx || get_dev(&dev) != CUDA_SUCCESS ||
	    dev < 0 || dev >= MS_MAX_DEVICES || info(&f, &t) != CUDA_SUCCESS)
		return -1;
	*free_b = (int64_t)f;
	*total_b = (int64_t)t;
	return dev;
}

static void fold_mem(struct ms_fp_device *d, int64_t free_b, int64_t total_b)
{
	d->free = free_b;
	d->total = total_b;
	if (!d->have_mem || free_b < d->free_min)
		d->free_min = free_b;
	d->have_mem = 1;
}

static void fold_fp(struct ms_fp_device *d, int dev, int64_t mine)
{
	d->footprint = mine;
	if (!d->have_fp || mine > d->footprint_peak) {
		d->footprint_peak = mine;
		d->counted_at_peak = ms_live((enum ms_comp)(MS_DEV0 + dev));
	}
	d->have_fp = 1;
}

/* Every open stage's record, and CLOSED's (a call just ended, or -1), takes the devices read now
 * (MEM, FP: bits). */
static void fold_stages(uint32_t mem, uint32_t fpbits, int64_t sum, int closed)
{
	for (int i = 0; i < nopen + (closed >= 0); i++) {
		struct ms_fp_stage *r = &fp.stage[i < nopen ? open_calls[i].id : closed];
		for (int d = 0; d < MS_MAX_DEVICES; d++) {
			const struct ms_fp_device *v = &fp.dev[d];
			uint32_t bit = 1u << d;
			if ((mem & bit) && (!(r->have_mem & bit) || v->free < r->free_min[d]))
				r->free_min[d] = v->free;
			if (mem & bit)
				r->total[d] = v->total;
			if ((fpbits & bit) && (!(r->have_fp & bit) || v->footprint > r->footprint_peak[d]))
				r->footprint_peak[d] = v->footprint;
		}
		r->have_mem |= mem;
		r->have_fp |= fpbits;
		if (fpbits && sum > r->peak)
			r->peak = sum;
	}
}

/* A reading (the lock held, the calls synced): the current device's memory, NVML's footprint of
 * every device used when WITH_NVML; folded into the process, the open stages and CLOSED's. */
static void read_now(int with_nvml, int closed)
{
	int64_t free_b, total_b, sum = 0;
	uint32_t mem = 0, fpbits = 0, used = ms_gpu_devices_used();
	int dev = current_mem(&free_b, &total_b);
	if (dev >= 0) {
		fold_mem(&fp.dev[dev], free_b, total_b);
		mem = 1u << dev;
	}
	for (int d = 0; with_nvml && d < MS_MAX_DEVICES; d++) {
		int64_t mine;
		int n;
		if ((used & (1u << d)) && ms_nvml_usage(d, &mine, NULL, 0, &n) == 0 && mine >= 0) {
			fold_fp(&fp.dev[d], d, mine);
			fpbits |= 1u << d;
		}
	}
	for (int d = 0; d < MS_MAX_DEVICES; d++)
		sum += fp.dev[d].have_fp ? fp.dev[d].footprint : 0;
	if (fpbits && sum > fp.peak)
		fp.peak = sum;
	fp.read |= mem | fpbits;
	fold_stages(mem, fpbits, sum, closed);
}

/* ---- the engine's calls ---- */

/* Call C gets a fresh record unless it has one (1: it is new): its begin's count is its base, and
 * a stage begun after an out-of-memory burst says the program went on. */
static int adopt(const struct ms_stage_call *c)
{
	if (held[c->id] == c->begins)
		return 0;
	held[c->id] = c->begins;
	struct ms_fp_stage *r = &fp.stage[c->id];
	memset(r, 0, sizeof *r);
	memcpy(r->counted_begin, c->dev_begin, sizeof r->counted_begin);
	for (uint32_t i = 0; i < fp.noom && i < MS_FP_OOMS; i++)
		fp.oom[i].went_on = 1;
	__atomic_store_n(&ms_gpufp_bursts, 0, __ATOMIC_RELAXED);
	return 1;
}

/* The engine's open calls copied (the lock held), with stage ID's latest into *LATEST (or NULL),
 * and the new ones adopted: how many, or -1 when the engine refused (this thread is inside it). */
static int sync_calls(int id, struct ms_stage_call *latest)
{
	int n = ms_stages_calls(open_calls, id, latest), began = 0;
	nopen = n < 0 ? 0 : n;
	for (int i = 0; i < nopen; i++)
		began += adopt(&open_calls[i]);
	return n < 0 ? -1 : began;
}

/* At an end: the stage of call C when C is closed, loud and not read at its end yet (adopted if it
 * began unseen), else -1. */
static int closed_call(const struct ms_stage_call *c)
{
	if (c->id < 0 || c->open || c->unheard || !c->begins || ended[c->id] == c->begins)
		return -1;
	ended[c->id] = c->begins;
	adopt(c);
	return c->id;
}

/* A reading at a boundary or point (the lock held) with our allocations uncounted and errno kept;
 * skipped when the capture mode cannot be relaxed. */
static void reading(int closed)
{
	int saved = errno;
	ms_tls_guard++;
	int mode = ms_cuda_relax_capture();
	if (mode != MS_CAPTURE_FAILED) {
		read_now(1, closed);
		ms_cuda_restore_capture(mode);
	}
	ms_tls_guard--;
	errno = saved;
}

/* ---- stage boundaries, points, exit ---- */

/* A call's begin reads into its fresh record; its end (the stage's call closed) reads into it. */
void ms_gpufp_boundary(int stage, int end)
{
	if (stage < 0 || stage >= MS_MAX_STAGES || !may_read() || lock() < 0)
		return;
	struct ms_stage_call latest;
	int began = sync_calls(end ? stage : -1, end ? &latest : NULL);
	int closed = began >= 0 && end ? closed_call(&latest) : -1;
	if (began > 0 || closed >= 0)
		reading(closed);
	unlock();
}

void ms_gpufp_point(double now)
{
	double last;
	__atomic_load(&last_point, &last, __ATOMIC_RELAXED);
	if (!ms_gpufp_counting || now - last < POINT_GAP || !may_read())
		return;
	__atomic_store(&last_point, &now, __ATOMIC_RELAXED);
	if (lock() < 0)
		return;
	if (sync_calls(-1, NULL) >= 0)
		reading(-1);
	unlock();
}

/* ---- out of memory ---- */

/* A new burst's record (the lock held): the moment, the device as read now (when READ: the capture
 * mode is relaxed), the open stages, the other processes. */
static void record_oom(struct ms_fp_oom *o, int device, int64_t bytes, int result, int read)
{
	memset(o, 0, sizeof *o);
	o->time = ms_elapsed();
	o->device = device;
	o->result = result;
	o->asked = bytes;
	o->failures = 1;
	o->counted = ms_live((enum ms_comp)(MS_DEV0 + device));
	o->stage = nopen ? open_calls[nopen - 1].id : -1;
	int64_t free_b, total_b, mine = -1;
	if (read && current_mem(&free_b, &total_b) == device) {
		o->free = free_b;
		o->total = total_b;
		o->have_mem = 1;
	}
	o->others_known = read && ms_nvml_usage(device, &mine, o->others, MS_FP_OTHERS, &o->nothers) == 0;
	o->footprint = mine;
	o->have_fp = mine >= 0;
	for (int i = 0; i < nopen && o->nopen < MS_FP_OPEN; i++) {
		int s = open_calls[i].id;
		o->open[o->nopen] = s;
		o->open_added[o->nopen++] = o->counted - fp.stage[s].counted_begin[device];
	}
}

/* The latest record of DEVICE, or NULL. */
static struct ms_fp_oom *latest(int device)
{
	for (int i = (int)(fp.noom < MS_FP_OOMS ? fp.noom : MS_FP_OOMS) - 1; i >= 0; i--)
		if (fp.oom[i].device == device)
			return &fp.oom[i];
	return NULL;
}

/* Under the lock: the index of a new burst's record, or -1. */
static int note_oom(int device, int64_t bytes, int result)
{
	uint32_t bit = 1u << device;
	if (ms_gpufp_bursts & bit) {
		struct ms_fp_oom *o = latest(device);
		if (o)
			o->failures++;
		return -1;
	}
	__atomic_fetch_or(&ms_gpufp_bursts, bit, __ATOMIC_RELAXED);
	if (fp.noom >= MS_FP_OOMS) {
		fp.oom_dropped++;
		return -1;
	}
	int mode = ms_cuda_relax_capture(), read = mode != MS_CAPTURE_FAILED;
	if (read)
		read_now(1, -1);
	record_oom(&fp.oom[fp.noom], device, bytes, result, read);
	if (read)
		ms_cuda_restore_capture(mode);
	return (int)fp.noom++;
}

void ms_gpufp_failed(int device, int64_t bytes, int result)
{
	if (result != OUT_OF_MEMORY || device < 0 || device >= MS_MAX_DEVICES || !may_read() || lock() < 0)
		return;
	int saved = errno;
	ms_tls_guard++;
	sync_calls(-1, NULL); /* before the burst's bit: a stage begun since says the last burst went on */
	int index = note_oom(device, bytes, result);
	ms_tls_guard--;
	unlock();
	void (*fn)(int) = __atomic_load_n(&oom_observer, __ATOMIC_ACQUIRE);
	if (index >= 0 && fn)
		fn(index); /* the sites and the snapshot, outside our lock */
	errno = saved;
}

void ms_gpufp_succeeded(int device)
{
	uint32_t bit = device >= 0 && device < MS_MAX_DEVICES ? 1u << device : 0;
	if (!(__atomic_load_n(&ms_gpufp_bursts, __ATOMIC_RELAXED) & bit) || lock() < 0)
		return;
	__atomic_fetch_and(&ms_gpufp_bursts, ~bit, __ATOMIC_RELAXED);
	struct ms_fp_oom *o = latest(device);
	if (o)
		o->went_on = 1;
	unlock();
}

int ms_gpufp_copy(struct ms_gpu_footprint *out)
{
	pid_t pid = __atomic_load_n(&fp_pid, __ATOMIC_ACQUIRE);
	if (!pid || pid != (pid_t)syscall(SYS_getpid))
		return 0;
	memcpy(out, &fp, sizeof fp);
	out->nvml = ms_nvml_state(0);
	return 1;
}

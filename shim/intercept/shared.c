/* Shared memory segments (see shared.h): a MAP_SHARED mapping is memory when its object lives in
 * memory only (anonymous shared memory, /dev/zero, memfd, /dev/shm and other tmpfs, hugetlbfs and
 * ramfs files, SysV segments); a regular file on disk is its page cache, which the kernel may drop
 * and which belongs to the file, not to the program, and a device's memory is the device's: neither
 * is counted.  Each segment is named by its object's device and inode, the same in every process
 * that maps it, so a view of several processes can tell the same pages apart from others.  The
 * table is written under the mapping lock (mmap.c) and read by the report without it: each slot
 * has a sequence number, odd while it changes. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "core/ms.h"
#include "core/sandbox.h"
#include "intercept/shared.h"

#define TMPFS_MAGIC 0x01021994
#define HUGETLBFS_MAGIC 0x958458f6
#define RAMFS_MAGIC 0x858458f6

struct slot {
	uint32_t seq; /* odd while the writer changes the slot */
	uint32_t used;
	struct ms_shared_segment s;
};

static struct slot slots[MS_SHARED_SEGMENTS] MS_LARGE;
static uint32_t nslots;   /* slots ever used (the reader's bound) */
static uint64_t dropped;  /* segments without a slot, or whose retired slot was taken */
static uint64_t mappings; /* shared mappings made or inherited */

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int ms_shared_classify(int flags, int fd, struct ms_shared_id *id)
{
	memset(id, 0, sizeof *id);
	int type = flags & MAP_TYPE;
	if (type != MAP_SHARED && type != MAP_SHARED_VALIDATE)
		return MS_SHARED_NONE;
	if (flags & MAP_ANONYMOUS)
		return id->kind = MS_SHARED_ANONYMOUS;
	if (ms_sandboxed())
		return MS_SHARED_NONE; /* a file's mapping, not looked at: its fstat may be forbidden */
	struct stat st;
	if (fd < 0 || syscall(SYS_fstat, fd, &st) != 0)
		return MS_SHARED_NONE;
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 5)) /* /dev/zero: anonymous shared memory */
		return id->kind = MS_SHARED_ANONYMOUS;
	struct statfs sf;
	if (!S_ISREG(st.st_mode) || syscall(SYS_fstatfs, fd, &sf) != 0)
		return MS_SHARED_NONE;
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
		id->kind = MS_SHARED_TMPFS;
	else if (sf.f_type == (typeof(sf.f_type))HUGETLBFS_MAGIC)
		id->kind = MS_SHARED_HUGETLBFS;
	else
		return MS_SHARED_NONE;
	id->major = major(st.st_dev);
	id->minor = minor(st.st_dev);
	id->ino = st.st_ino;
	id->known = 1;
	char link[32];
	ms_format(link, sizeof link, "/proc/self/fd/%d", fd);
	long n = syscall(SYS_readlinkat, AT_FDCWD, link, id->name, sizeof id->name - 1);
	id->name[n > 0 ? n : 0] = '\0';
	if (starts_with(id->name, "/memfd:"))
		id->kind = MS_SHARED_MEMFD;
	else if (starts_with(id->name, "/dev/shm/") && id->kind == MS_SHARED_TMPFS)
		id->kind = MS_SHARED_SHM;
	return id->kind;
}

/* ---- /proc/self/maps: the object of a mapping that has no descriptor --------------------------- */

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads a hex number at *P (advanced past it). */
static uint64_t hex_at(const char **p)
{
	uint64_t v = 0;
	for (int d; (d = hex_digit(**p)) >= 0; (*p)++)
		v = v * 16 + (uint64_t)d;
	return v;
}

static const char *skip_field(const char *p)
{
	while (*p && *p != ' ')
		p++;
	while (*p == ' ')
		p++;
	return p;
}

/* A line's head ("start-end perms offset major:minor inode"): the identity when it maps ADDR. */
static int line_maps(const char *line, uintptr_t addr, struct ms_shared_id *id)
{
	const char *p = line;
	if (hex_at(&p) != addr || *p != '-')
		return 0;
	p = skip_field(skip_field(skip_field(p))); /* start-end, perms, offset */
	id->major = (uint32_t)hex_at(&p);
	if (*p++ != ':')
		return 0;
	id->minor = (uint32_t)hex_at(&p);
	while (*p == ' ')
		p++;
	uint64_t ino = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		ino = ino * 10 + (uint64_t)(*p - '0');
	id->ino = ino;
	id->known = 1;
	return 1;
}

int ms_shared_identify(uintptr_t addr, struct ms_shared_id *id)
{
	if (ms_sandboxed())
		return -1;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[512], line[96];
	size_t len = 0; /* of the current line's head in LINE */
	int found = 0;
	long n;
	while (!found && (n = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
		for (long i = 0; i < n && !found; i++) {
			if (buf[i] != '\n') {
				if (len < sizeof line - 1)
					line[len++] = buf[i];
				continue;
			}
			line[len] = '\0';
			found = line_maps(line, addr, id);
			len = 0;
		}
	}
	syscall(SYS_close, fd);
	return found ? 0 : -1;
}

/* ---- the table --------------------------------------------------------------------------------- */

static void write_begin(struct slot *s)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(struct slot *s)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static int same(const struct ms_shared_segment *s, const struct ms_shared_id *id)
{
	return s->kind == id->kind && s->ino == id->ino && s->major == id->major && s->minor == id->minor;
}

uint32_t ms_shared_segment(const struct ms_shared_id *id)
{
	mappings++;
	struct slot *free_slot = NULL, *retired = NULL;
	for (uint32_t i = 0; i < nslots; i++) {
		struct slot *s = &slots[i];
		if (s->used && id->known && same(&s->s, id))
			return i + 1;
		if (!s->used && !free_slot)
			free_slot = s;
		else if (s->used && s->s.mapped == 0 && (!retired || s->s.peak < retired->s.peak))
			retired = s;
	}
	if (!free_slot && nslots < MS_SHARED_SEGMENTS)
		free_slot = &slots[nslots];
	if (!free_slot && retired) { /* the retired segment that mattered least gives its slot */
		free_slot = retired;
		dropped++;
	}
	if (!free_slot) {
		dropped++;
		return 0;
	}
	write_begin(free_slot);
	free_slot->s =
		(struct ms_shared_segment){ .kind = id->kind, .major = id->major, .minor = id->minor, .ino = id->ino };
	ms_strlcpy(free_slot->s.name, id->name, sizeof free_slot->s.name);
	free_slot->used = 1;
	write_end(free_slot);
	uint32_t i = (uint32_t)(free_slot - slots);
	if (i >= nslots)
		__atomic_store_n(&nslots, i + 1, __ATOMIC_RELEASE);
	return i + 1;
}

static struct slot *slot_of(uint32_t tag)
{
	return tag >= 1 && tag <= nslots && slots[tag - 1].used ? &slots[tag - 1] : NULL;
}

void ms_shared_mapped(uint32_t tag, int64_t bytes)
{
	struct slot *s = slot_of(tag);
	if (!s)
		return;
	write_begin(s);
	s->s.mapped += bytes;
	if (s->s.mapped <= 0)
		s->s.mapped = s->s.resident = 0;
	if (s->s.mapped > s->s.mapped_peak)
		s->s.mapped_peak = s->s.mapped;
	write_end(s);
}

void ms_shared_resident_clear(void)
{
	for (uint32_t i = 0; i < nslots; i++) {
		if (slots[i].used && slots[i].s.resident) {
			write_begin(&slots[i]);
			slots[i].s.resident = 0;
			write_end(&slots[i]);
		}
	}
}

void ms_shared_resident_add(uint32_t tag, int64_t bytes)
{
	struct slot *s = slot_of(tag);
	if (!s || !bytes)
		return;
	write_begin(s);
	s->s.resident += bytes;
	if (s->s.resident < 0)
		s->s.resident = 0;
	if (s->s.resident > s->s.peak)
		s->s.peak = s->s.resident;
	write_end(s);
}

void ms_shared_fork_child(void)
{
	mappings = 0;
	dropped = 0;
	for (uint32_t i = 0; i < nslots; i++) {
		struct slot *s = &slots[i];
		if (!s->used)
			continue;
		if (s->s.mapped == 0) {
			s->used = 0;
			continue;
		}
		mappings++;
		s->s.mapped_peak = s->s.mapped;
		s->s.resident = s->s.peak = 0; /* the read that follows finds what the child holds */
	}
}

uint64_t ms_mmap_shared_mappings(void)
{
	return __atomic_load_n(&mappings, __ATOMIC_RELAXED);
}

int ms_mmap_shared_copy(struct ms_shared_segment *out, uint64_t *dropped_out)
{
	int n = 0;
	uint32_t end = __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < end && i < MS_SHARED_SEGMENTS; i++) {
		struct slot *s = &slots[i];
		for (int tries = 0; tries < 4; tries++) {
			uint32_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
			if (before & 1)
				continue;
			int used = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
			memcpy(&out[n], &s->s, sizeof out[n]);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != before)
				continue;
			if (used) {
				out[n].name[MS_SHARED_NAME - 1] = '\0';
				n++;
			}
			break;
		}
	}
	*dropped_out = __atomic_load_n(&dropped, __ATOMIC_RELAXED);
	return n;
}

/* Integration harness (see harness.h). */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "child.h"
#include "harness.h"

extern char **environ;

const char *in_path(const char *prog)
{
	static char found[PATH_MAX];
	const char *p = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
	while (*p) {
		size_t n = strcspn(p, ":");
		snprintf(found, sizeof found, "%.*s/%s", (int)n, p, prog);
		if (n && access(found, X_OK) == 0)
			return found;
		p += n + (p[n] == ':');
	}
	return NULL;
}

const char *built(const char *relative)
{
	static char paths[8][PATH_MAX];
	static int next;
	const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
	char joined[PATH_MAX];
	snprintf(joined, sizeof joined, "%s/%s", b, relative);
	char *out = paths[next++ % 8];
	if (!realpath(joined, out))
		snprintf(out, PATH_MAX, "%s", joined);
	return out;
}

char **shim_env(const char *dir, const char *const *env)
{
	static char *out[1024];
	static char preload[PATH_MAX + 16], output[PATH_MAX + 32], live[PATH_MAX + 32];
	int n = 0;
	for (char **e = environ; *e && n < 1000; e++)
		if (strncmp(*e, "MEMSHIM_", 8) && strncmp(*e, "LD_PRELOAD=", 11))
			out[n++] = *e;
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", built("libmemshim.so"));
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=%s/m.json", dir);
	snprintf(live, sizeof live, "MEMSHIM_LIVE_DIR=%s/live", dir); /* killed fixtures' records */
	out[n++] = preload;
	out[n++] = output;
	out[n++] = live;
	for (; env && *env && n < 1020; env++) {
		const char *eq = strchr(*env, '=');
		size_t klen = eq ? (size_t)(eq - *env) : strlen(*env);
		for (int i = 0; i < n; i++)
			if (!strncmp(out[i], *env, klen) && out[i][klen] == '=')
				out[i--] = out[--n];
		if (eq)
			out[n++] = (char *)*env;
	}
	out[n] = NULL;
	return out;
}

int harness_timeout;

static int wait_bounded(pid_t pid, int *status)
{
	if (harness_timeout <= 0)
		return waitpid(pid, status, 0) < 0 ? -1 : 0;
	for (long waited_ms = 0;; waited_ms += 10) {
		pid_t done = waitpid(pid, status, WNOHANG);
		if (done != 0)
			return done < 0 ? -1 : 0;
		if (waited_ms >= harness_timeout * 1000L) {
			kill(pid, SIGKILL);
			return waitpid(pid, status, 0) < 0 ? -1 : 0;
		}
		usleep(10000);
	}
}

int run_under_shim(struct run *r, const char *const *argv, const char *const *env)
{
	snprintf(r->dir, sizeof r->dir, "/tmp/memshim-test.XXXXXX");
	if (!mkdtemp(r->dir))
		return -1;
	char **envp = shim_env(r->dir, env);
	pid_t pid = spawn_redirected(r->dir, argv, envp, NULL);
	if (pid < 0 || wait_bounded(pid, &r->status) < 0)
		return -1;
	read_back(r->dir, r->out, sizeof r->out, r->err, sizeof r->err);
	return 0;
}

json_t *run_built(struct run *r, const char *program, const char *const *args, const char *const *env)
{
	const char *argv[16] = { built(program) };
	for (int i = 0; args && args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	ck_assert_int_eq(run_under_shim(r, argv, env), 0);
	return load_metrics(r, "m.json");
}

json_t *exited_with_file(const struct run *r, json_t *m, int status, const char *what)
{
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == status, "%s: wait status %d, stderr: %s", what,
		      r->status, r->err);
	return m;
}

json_t *load_metrics(const struct run *r, const char *name)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", r->dir, name);
	json_error_t err;
	return json_load_file(path, 0, &err);
}

int has_metric(json_t *root, const char *key)
{
	return json_object_get(json_object_get(root, "metrics"), key) != NULL;
}

int64_t metric(json_t *root, const char *key)
{
	json_t *v = json_object_get(json_object_get(root, "metrics"), key);
	ck_assert_msg(v != NULL, "metric %s missing", key);
	return json_integer_value(v);
}

json_t *stage_of(json_t *root, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(root, "stages"), i, s)
		if (!strcmp(json_string_value(json_object_get(s, "name")), name))
			return s;
	return NULL;
}

int64_t stage_call(json_t *root, const char *stage, int call, const char *key)
{
	json_t *h = json_array_get(json_object_get(stage_of(root, stage), "history"), (size_t)call);
	ck_assert_msg(h != NULL, "stage %s has no call %d in its history", stage, call);
	return json_integer_value(json_object_get(h, key));
}

int count_files(const char *dir, const char *prefix, char *first, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)) && n++ == 0 && first)
			snprintf(first, size, "%s", e->d_name);
	if (d)
		closedir(d);
	return n;
}

int load_files(const char *dir, const char *prefix, json_t **files, int n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int k = 0;
	while (d && (e = readdir(d))) {
		char path[PATH_MAX + 256];
		json_error_t je;
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (k < n) {
			files[k] = json_load_file(path, 0, &je);
			ck_assert_msg(files[k] != NULL, "%s: %s", path, je.text);
		}
		k++;
	}
	if (d)
		closedir(d);
	return k;
}

int64_t member(json_t *object, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(object, a), b));
}

void assert_between(int64_t v, int64_t lo, int64_t hi, const char *what)
{
	ck_assert_msg(v >= lo && v <= hi, "%s = %lld, expected %lld..%lld", what, (long long)v, (long long)lo,
		      (long long)hi);
}

int memshim_lines(const char *text)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, "memshim:")); p++)
		n++;
	return n;
}

const char *format_in_dir(const struct run *r, const char *args)
{
	static char out[1 << 15];
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "cd %s && MEMSHIM_LIVE_DIR=%s/live %s %s 2>&1", r->dir, r->dir,
		 built("memshim-format"), args);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	pclose(p);
	return out;
}

void make_dir(char *dir, size_t size, mode_t mode, uid_t owner)
{
	snprintf(dir, size, "/tmp/memshim-out.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, mode), 0);
	ck_assert_int_eq(chown(dir, owner, owner), 0);
}

void this_boot_id(char *out, size_t size)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(out, (int)size, f));
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

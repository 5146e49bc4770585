/* The rank a launcher gave a process, derived from its variables as each launcher defines it
 * (torchrun, Lightning's ddp, accelerate, MPI, Slurm): a table of environments. */
#include <check.h>
#include <string.h>
#include "suite.h"
#include "core/process.h"

/* "NAME=VALUE" entries, NULL-terminated. */
static const char *const *env_now;

static const char *table_getenv(const char *name)
{
	size_t n = strlen(name);
	for (const char *const *e = env_now; *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

struct rank_case {
	const char *what;
	const char *env[8];
	const char *source; /* NULL: no launcher */
	long rank, local_rank, world_size, node_rank;
	long restart; /* 0 in a row: -1 expected unless the row says (only torchrun's) */
};

static const struct rank_case cases[] = {
	{ "nothing set", { NULL }, NULL, -1, -1, -1, -1 },
	{ "torchrun", { "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", "GROUP_RANK=1", NULL },
	  "torchrun", 3, 1, 4, 1 },
	/* an elastic job's second attempt after a rank failed */
	{ "torchrun, restarted", { "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2", "TORCHELASTIC_RESTART_COUNT=1", NULL },
	  "torchrun", 0, 0, 2, -1, 1 },
	{ "Slurm ignores torchrun's restart count", { "SLURM_PROCID=1", "TORCHELASTIC_RESTART_COUNT=2", NULL },
	  "slurm", 1, -1, -1, -1 },
	/* accelerate launch runs torch's launcher: the same variables */
	{ "accelerate (torch's launcher)", { "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2",
	  "ACCELERATE_MIXED_PRECISION=no", NULL }, "torchrun", 1, 1, 2, -1 },
	/* Lightning ddp's children: LOCAL_RANK, NODE_RANK, WORLD_SIZE, never RANK */
	{ "Lightning ddp, node 0", { "LOCAL_RANK=1", "NODE_RANK=0", "WORLD_SIZE=2", NULL },
	  "lightning", 1, 1, 2, 0 },
	{ "Lightning, LOCAL_RANK alone", { "LOCAL_RANK=2", NULL }, "lightning", 2, 2, -1, 0 },
	{ "Lightning, node 1 with LOCAL_WORLD_SIZE", { "LOCAL_RANK=1", "NODE_RANK=1", "LOCAL_WORLD_SIZE=4",
	  "WORLD_SIZE=8", NULL }, "lightning", 5, 1, 8, 1 },
	{ "Lightning, GROUP_RANK as the node", { "LOCAL_RANK=0", "GROUP_RANK=2", "LOCAL_WORLD_SIZE=2",
	  NULL }, "lightning", 4, 0, -1, 2 },
	/* node 1 without the processes per node: node_rank * ? + local_rank cannot be known */
	{ "Lightning, node 1 alone", { "LOCAL_RANK=1", "NODE_RANK=1", "WORLD_SIZE=8", NULL },
	  "lightning", -1, 1, 8, 1 },
	{ "Lightning, a bad NODE_RANK", { "LOCAL_RANK=1", "NODE_RANK=x", NULL }, "lightning", -1, 1, -1, -1 },
	{ "Open MPI", { "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_SIZE=8",
	  "PMIX_RANK=5", NULL }, "openmpi", 5, 1, 8, -1 },
	{ "PMIx alone", { "PMIX_RANK=2", "PMI_SIZE=4", NULL }, "pmix", 2, -1, 4, -1 },
	{ "MPICH (Hydra's PMI)", { "PMI_RANK=3", "MPI_LOCALRANKID=1", "PMI_SIZE=4", NULL }, "pmi", 3, 1, 4, -1 },
	{ "MVAPICH2", { "MV2_COMM_WORLD_RANK=6", "MV2_COMM_WORLD_LOCAL_RANK=2", "MV2_COMM_WORLD_SIZE=8",
	  NULL }, "mvapich", 6, 2, 8, -1 },
	{ "Slurm", { "SLURM_PROCID=7", "SLURM_LOCALID=3", "SLURM_NTASKS=8", "SLURM_NODEID=1", NULL },
	  "slurm", 7, 3, 8, 1 },
	/* launchers inside others: the inner one's variables win */
	{ "torchrun in a Slurm task", { "SLURM_PROCID=0", "SLURM_NTASKS=1", "RANK=1", "LOCAL_RANK=1",
	  "WORLD_SIZE=2", NULL }, "torchrun", 1, 1, 2, -1 },
	{ "mpirun in a Slurm job", { "SLURM_PROCID=0", "OMPI_COMM_WORLD_RANK=3", NULL }, "openmpi", 3, -1, -1, -1 },
	{ "Lightning in a Slurm job", { "SLURM_PROCID=0", "LOCAL_RANK=1", "WORLD_SIZE=2", NULL },
	  "lightning", 1, 1, 2, 0 },
	/* what is not a whole number is not a rank */
	{ "a bad RANK", { "RANK=one", "SLURM_PROCID=2", NULL }, "slurm", 2, -1, -1, -1 },
	{ "an empty RANK", { "RANK=", NULL }, NULL, -1, -1, -1, -1 },
	{ "a negative LOCAL_RANK", { "LOCAL_RANK=-1", NULL }, NULL, -1, -1, -1, -1 },
};

START_TEST(launcher_variables)
{
	const struct rank_case *c = &cases[_i];
	struct ms_rank r;
	env_now = c->env;
	ms_rank_detect(&r, table_getenv);
	if (c->source)
		ck_assert_msg(r.source && !strcmp(r.source, c->source), "%s: source %s", c->what,
			      r.source ? r.source : "(none)");
	else
		ck_assert_msg(!r.source, "%s: source %s", c->what, r.source);
	ck_assert_msg(r.rank == c->rank && r.local_rank == c->local_rank && r.world_size == c->world_size &&
		      r.node_rank == c->node_rank, "%s: rank %ld local %ld world %ld node %ld", c->what,
		      r.rank, r.local_rank, r.world_size, r.node_rank);
	ck_assert_msg(r.restart == (c->restart ? c->restart : -1), "%s: restart %ld", c->what, r.restart);
	ck_assert_int_eq(r.own, 0); /* decided by the process, not the table */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rank");
	TCase *tc = tcase_create("launchers");
	tcase_add_loop_test(tc, launcher_variables, 0, (int)(sizeof cases / sizeof *cases));
	suite_add_tcase(s, tc);
	return run_suite(s);
}

/* LD_PRELOAD shim for leader_fail_test: the first MPI_Allreduce of SYNK_TEST_FAIL_COUNT elements
 * on world rank SYNK_TEST_FAIL_RANK fails with MPI_ERR_OTHER, without taking part; every other
 * call goes to MPI (PMPI). */
#include <mpi.h>
#include <stdlib.h>

static int failed_once;

static int fails_here(int count) {
  const char* rank = getenv("SYNK_TEST_FAIL_RANK");
  const char* want = getenv("SYNK_TEST_FAIL_COUNT");
  int me = -1;
  if (failed_once || rank == NULL || want == NULL || count != atoi(want)) return 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me != atoi(rank)) return 0;
  failed_once = 1;
  return 1;
}

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  if (fails_here(count)) return MPI_ERR_OTHER;
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}

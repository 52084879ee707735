/* LD_PRELOAD shim for check_leader_slow.sh: every MPI_Allreduce of SYNK_TEST_SLOW_COUNT
 * elements on world rank SYNK_TEST_SLOW_RANK first sleeps SYNK_TEST_SLOW_MS milliseconds, as a
 * slow network between the nodes would; then it goes to MPI (PMPI). */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static int slow_here(int count) {
  const char* rank = getenv("SYNK_TEST_SLOW_RANK");
  const char* want = getenv("SYNK_TEST_SLOW_COUNT");
  int me = -1;
  if (rank == NULL || want == NULL || count != atoi(want)) return 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &me);
  return me == atoi(rank);
}

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  if (slow_here(count)) {
    const char* ms = getenv("SYNK_TEST_SLOW_MS");
    const long wait_ms = ms ? atol(ms) : 0;
    struct timespec t = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
  }
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}

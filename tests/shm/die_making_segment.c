/* LD_PRELOAD shim for check_named_leak.sh: the rank whose OMPI_COMM_WORLD_RANK equals
 * DIE_MAKING_SEGMENT_RANK kills itself (SIGKILL) when it reserves a named synk segment, that is
 * after creating /dev/shm/synk-... and before any other rank has mapped it: the window in which
 * a dead creator leaves the name behind, hit every time instead of by timing. The segment's
 * path goes to the file DIE_MAKING_SEGMENT_NOTE first, where that is set. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_doomed_segment(int fd) {
  const char* want = getenv("DIE_MAKING_SEGMENT_RANK");
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  if (want == NULL || rank == NULL || strcmp(want, rank) != 0) return 0;
  char link[64], target[512];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  if (strncmp(target, "/dev/shm/synk-", 14) != 0) return 0;
  const char* note = getenv("DIE_MAKING_SEGMENT_NOTE");
  FILE* f = note != NULL ? fopen(note, "w") : NULL;
  if (f != NULL) {
    fprintf(f, "%s\n", target);
    fclose(f);
  }
  return 1;
}

typedef int (*fallocate_fn)(int, int, off_t, off_t);

int fallocate(int fd, int mode, off_t offset, off_t len) {
  if (is_doomed_segment(fd)) raise(SIGKILL);
  fallocate_fn real = (fallocate_fn)dlsym(RTLD_NEXT, "fallocate");
  return real(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off_t offset, off_t len) {
  if (is_doomed_segment(fd)) raise(SIGKILL);
  fallocate_fn real = (fallocate_fn)dlsym(RTLD_NEXT, "fallocate64");
  return real(fd, mode, offset, len);
}

/* What an fdatasync costs by the number of pages written before it: PAGES pages of 4 KiB
 * written at scattered offsets of a 2 MiB file (written whole first), then fdatasync,
 * REPS times. Prints the median and the 90th percentile in milliseconds. A redb commit
 * writes a dozen or more pages before its sync; a journal record one or two
 * (docs/benchmarks.md, "The commit journal").
 *
 *   cc -O2 -o fsync-pages bench/fsync-pages.c && ./fsync-pages PAGES REPS DIR
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_PAGES 512

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PAGES REPS DIR\n", argv[0]);
    return 2;
  }
  int pages = atoi(argv[1]), reps = atoi(argv[2]);
  char path[4096];
  snprintf(path, sizeof path, "%s/fsync-pages.dat", argv[3]);
  int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0 || pages < 1 || reps < 1) {
    perror(path);
    return 1;
  }
  char page[4096];
  memset(page, 'x', sizeof page);
  for (int i = 0; i < FILE_PAGES; i++) {
    if (pwrite(fd, page, sizeof page, (off_t)i * 4096) != (ssize_t)sizeof page) {
      perror("pwrite");
      return 1;
    }
  }
  fsync(fd);
  double *took = malloc(sizeof(double) * reps);
  for (int r = 0; r < reps; r++) {
    double start = now_ms();
    for (int p = 0; p < pages; p++) {
      off_t at = (off_t)((r * 7 + p * 37) % FILE_PAGES) * 4096;
      if (pwrite(fd, page, sizeof page, at) != (ssize_t)sizeof page) {
        perror("pwrite");
        return 1;
      }
    }
    if (fdatasync(fd) != 0) {
      perror("fdatasync");
      return 1;
    }
    took[r] = now_ms() - start;
  }
  qsort(took, reps, sizeof(double), by_value);
  printf("%.3f %.3f\n", took[reps / 2], took[(reps * 9) / 10]);
  unlink(path);
  return 0;
}

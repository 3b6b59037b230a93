/* The raw cost a durable orchestrator cannot avoid: S spawns of /bin/true (each waited
 * for, one after the other, as sequential steps run) and F fsyncs of a small write to a
 * file (one per durable commit), repeated K times. Prints the median and the 90th
 * percentile of one repetition, in milliseconds.
 *
 *   cc -O2 -o raw-cost bench/raw-cost.c && ./raw-cost S F K DIR
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void spawn_true(void) {
  char *argv[] = {"true", NULL};
  pid_t pid;
  int status;
  if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) != 0) {
    perror("posix_spawnp");
    exit(1);
  }
  waitpid(pid, &status, 0);
}

static void sync_write(int fd, off_t at) {
  char page[4096];
  memset(page, 'x', sizeof page);
  if (pwrite(fd, page, sizeof page, at) != (ssize_t)sizeof page || fdatasync(fd) != 0) {
    perror("write");
    exit(1);
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s SPAWNS FSYNCS REPETITIONS DIR\n", argv[0]);
    return 2;
  }
  int spawns = atoi(argv[1]), fsyncs = atoi(argv[2]), reps = atoi(argv[3]);
  char path[4096];
  snprintf(path, sizeof path, "%s/raw-cost.dat", argv[4]);
  int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0 || reps < 1) {
    perror(path);
    return 1;
  }
  double *took = calloc(reps, sizeof *took);
  for (int r = 0; r < reps; r++) {
    double start = now_ms();
    for (int i = 0; i < spawns || i < fsyncs; i++) {
      if (i < fsyncs) sync_write(fd, (off_t)i * 4096);
      if (i < spawns) spawn_true();
    }
    took[r] = now_ms() - start;
  }
  qsort(took, reps, sizeof *took, by_value);
  printf("%.3f %.3f\n", took[reps / 2], took[(reps * 9) / 10]);
  close(fd);
  unlink(path);
  return 0;
}

/* Baseline for the process scenario: posix_spawn a program N times, `conc` at once.
   cc -O2 -o spawn-true spawn-true.c && ./spawn-true /bin/true 2000 8   -> prints seconds */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: %s PROGRAM COUNT CONCURRENCY\n", argv[0]); return 2; }
  const char *prog = argv[1];
  long total = atol(argv[2]), conc = atol(argv[3]), started = 0, finished = 0, running = 0;
  char *args[] = { (char *)prog, NULL };
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  while (finished < total) {
    while (running < conc && started < total) {
      pid_t pid;
      if (posix_spawn(&pid, prog, NULL, NULL, args, environ) != 0) { perror("posix_spawn"); return 1; }
      started++; running++;
    }
    int status;
    if (waitpid(-1, &status, 0) > 0) { finished++; running--; }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
  return 0;
}

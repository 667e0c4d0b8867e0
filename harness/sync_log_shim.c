/* sync_log_shim.c — a test-only LD_PRELOAD library (cli_test, Cli.ASavedFileIsOnTheDiskBeforeItsName): logs every
 * fsync (with the path of the descriptor) and rename attncheck makes, one line each, to $ATTNCHECK_SYNC_LOG, then
 * does the real call. A crash cannot be staged in a test; the order of these calls is what makes a saved finding
 * survive one. Never shipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void log_line(const char* what, const char* a, const char* b) {
  const char* path = getenv("ATTNCHECK_SYNC_LOG");
  if (!path) return;
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  dprintf(fd, "%s %s%s%s\n", what, a, b ? " " : "", b ? b : "");
  close(fd);
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  target[n > 0 ? n : 0] = '\0';
  const int r = real(fd);
  log_line("fsync", target, NULL);
  return r;
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*) = NULL;
  if (!real) real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  const int r = real(from, to);
  log_line("rename", from, to);
  return r;
}

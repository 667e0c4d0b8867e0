/* thread_limit_shim.c — a test-only LD_PRELOAD library (cli_test, Cli.JobsThatCannotAllStartRunOnTheOnesThatDid):
 * with ATTNCHECK_THREAD_LIMIT=N, pthread_create succeeds N times in the process and then fails with EAGAIN, as it does
 * under a pids cgroup or an address-space limit (which cannot be staged so that it bites only thread creation).
 * Never shipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
static int created;

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  static create_fn real;
  if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  const char* limit = getenv("ATTNCHECK_THREAD_LIMIT");
  if (limit && __atomic_fetch_add(&created, 1, __ATOMIC_SEQ_CST) >= atoi(limit)) return EAGAIN;
  return real(thread, attr, start, arg);
}

/* faulty_plugin.c — a test plugin whose kernels misbehave on purpose, one way each, so that
 * plugin_loader_test can check that attncheck reports every fault as a finding and survives:
 *   crash        dereferences NULL (SIGSEGV)
 *   abort        calls abort() (SIGABRT)
 *   hang         never returns (sleeps forever)
 *   error        returns ATTNCHECK_ERR_INTERNAL with a message
 *   unsupported  declines every problem (ATTNCHECK_ERR_UNSUPPORTED: a skip, not a fault)
 *   oob_write    writes the element just past the end of O
 *   input_write  overwrites K[0]
 *   silent       returns OK without writing anything (its outputs must read back as NaN)
 *   packed       forward O = 0, LSE = 0 written as if packed (ignores strides: faults only when rows are
 *                padded); backward dQ = dK = dV = 1 (packed too) and leaves delta to attncheck
 *   unshared     not reentrant, as a kernel with one workspace is: a call that starts while another is in this
 *                process returns an error saying so; else O = 0, LSE = 0 after 20 ms (`check -j` runs a plugin's
 *                checks one at a time: with ATTNCHECK_PLUGIN_ISOLATION=0 calls share the process)
 *   flaky        crashes (SIGABRT) on its first call only, where $ATTNCHECK_FLAKY_MARKER names a file that does
 *                not exist yet (the call creates it); else O = 0, LSE = 0
 * Built as libattncheck_faulty_plugin.so by harness/plugin/CMakeLists.txt; never shipped.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attncheck_plugin.h"

static int64_t count(const attncheck_tensor* t) {
  int64_t n = 1;
  for (int k = 0; k < t->rank; ++k) n *= t->shape[k];
  return n;
}

/* Writes a well-formed result (O = 0 and LSE = 0 honouring strides), as a correct-looking kernel would. */
static void write_zeros(const attncheck_forward_args* a) {
  const attncheck_tensor* o = &a->o;
  for (int64_t b = 0; b < o->shape[0]; ++b)
    for (int64_t h = 0; h < o->shape[1]; ++h)
      for (int64_t i = 0; i < o->shape[2]; ++i) {
        for (int64_t c = 0; c < o->shape[3]; ++c)
          ((uint16_t*)o->data)[b * o->stride[0] + h * o->stride[1] + i * o->stride[2] + c * o->stride[3]] = 0;
        ((float*)a->lse.data)[b * a->lse.stride[0] + h * a->lse.stride[1] + i * a->lse.stride[2]] = 0.0f;
      }
}

static int crash_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)a, (void)msg, (void)n;
  volatile int* p = (volatile int*)self; /* self is NULL */
  *p = 42;
  return ATTNCHECK_OK;
}
static int abort_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  abort();
}
static int hang_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  for (;;) pause();
  return ATTNCHECK_OK; /* not reached */
}
static int error_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a;
  snprintf(msg, n, "workspace of %d bytes too small\x1b[2J\xff", 7); /* a control sequence, a byte not UTF-8 */
  return ATTNCHECK_ERR_INTERNAL;
}
static int unsupported_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a;
  snprintf(msg, n, "only head_dim 64 (got %d)", a->problem.head_dim);
  return ATTNCHECK_ERR_UNSUPPORTED;
}
static int oob_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)msg, (void)n;
  write_zeros(a);
  const attncheck_tensor* o = &a->o;
  int64_t last = 0;
  for (int k = 0; k < o->rank; ++k) last += (o->shape[k] - 1) * o->stride[k];
  ((uint16_t*)o->data)[last + 1] = 0x3f80; /* 1.0 in bf16, one element past the end */
  return ATTNCHECK_OK;
}
static int input_write_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)msg, (void)n;
  write_zeros(a);
  uint16_t* k = (uint16_t*)a->k.data;
  k[0] = (uint16_t)(k[0] ^ 0x8000u); /* flips the sign of K[0]: always a change, even for 0 */
  return ATTNCHECK_OK;
}
static int silent_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  return ATTNCHECK_OK;
}
static int packed_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)msg, (void)n;
  memset(a->o.data, 0, (size_t)count(&a->o) * 2);
  memset(a->lse.data, 0, (size_t)count(&a->lse) * 4);
  return ATTNCHECK_OK;
}
static int packed_bwd(void* self, const attncheck_backward_args* a, char* msg, size_t n) {
  (void)self, (void)msg, (void)n;
  const attncheck_tensor* outs[3] = {&a->dq, &a->dk, &a->dv};
  for (int t = 0; t < 3; ++t)
    for (int64_t i = 0; i < count(outs[t]); ++i) ((uint16_t*)outs[t]->data)[i] = 0x3f80; /* 1.0 */
  return ATTNCHECK_OK;
}

static volatile int unshared_busy; /* a call is in progress in this process */
static int unshared_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self;
  if (__atomic_exchange_n(&unshared_busy, 1, __ATOMIC_ACQ_REL)) {
    snprintf(msg, n, "called while another call was running");
    return ATTNCHECK_ERR_INTERNAL;
  }
  usleep(20000);
  write_zeros(a);
  __atomic_store_n(&unshared_busy, 0, __ATOMIC_RELEASE);
  return ATTNCHECK_OK;
}

/* Crashes on its first call only: where $ATTNCHECK_FLAKY_MARKER names a file that does not exist yet, the call
   creates it and crashes; later calls (each in a fresh isolated child) find it and write zeros. A fault a second
   run does not meet (the fuzz target's step 2 met such a crash and dropped it). */
static int flaky_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)msg, (void)n;
  const char* marker = getenv("ATTNCHECK_FLAKY_MARKER");
  if (marker && access(marker, F_OK) != 0) {
    FILE* f = fopen(marker, "w");
    if (f) fclose(f);
    abort();
  }
  write_zeros(a);
  return ATTNCHECK_OK;
}

#define KERNEL(NAME, FWD, BWD, CAPS)                                                              \
  {.struct_size = sizeof(attncheck_kernel_desc), .name = NAME, .summary = "faulty test kernel: " NAME, \
   .caps = (CAPS), .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16),                    \
   .output_format = ATTNCHECK_FORMAT_BF16, .forward = FWD, .backward = BWD}

static const attncheck_kernel_desc kKernels[] = {
    KERNEL("crash", crash_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("abort", abort_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("hang", hang_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("error", error_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("unsupported", unsupported_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("oob_write", oob_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("input_write", input_write_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("silent", silent_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("packed", packed_fwd, packed_bwd, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_NO_DELTA),
    KERNEL("unshared", unshared_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
    KERNEL("flaky", flaky_fwd, NULL, ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA),
};

static const attncheck_plugin kPlugin = {
    .struct_size = sizeof(attncheck_plugin),
    .abi_major = ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR,
    .abi_minor = ATTNCHECK_PLUGIN_ABI_VERSION_MINOR,
    .library_name = "faulty",
    .n_kernels = sizeof kKernels / sizeof kKernels[0],
    .kernels = kKernels,
};

ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }

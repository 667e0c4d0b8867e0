/* future_plugin.c — a plugin as a later minor of the ABI might build it: every kernel descriptor carries a field
 * appended after this header's last, so the array's stride (each entry's struct_size) is larger than this attncheck's
 * sizeof(attncheck_kernel_desc), and abi_minor is one this attncheck does not know. Kernels:
 *   first    forward writes nothing (the loader test only reads names and caps)
 *   device   ATTNCHECK_CAP_DEVICE_POINTERS: this build cannot provide them, so every call is a skip
 *   nodelta  ATTNCHECK_CAP_NO_DELTA: its backward writes dQ = dK = dV = 0 and fails unless delta.data is NULL
 * Its init writes a line to standard output, as a chatty library might (plugin_cli_test: `check --json -` keeps
 * it out of the report). plugin_loader_test checks all three kernels are read at the plugin's stride and behave
 * as declared. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attncheck_plugin.h"

typedef struct {
  attncheck_kernel_desc base;
  uint64_t appended; /* a field of a future minor */
} future_desc;

static int no_op_fwd(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  return ATTNCHECK_OK;
}

static int64_t count(const attncheck_tensor* t) {
  int64_t c = 1;
  for (int k = 0; k < t->rank; ++k) c *= t->shape[k];
  return c;
}

static int nodelta_bwd(void* self, const attncheck_backward_args* a, char* msg, size_t n) {
  (void)self;
  if (a->delta.data != NULL) {
    snprintf(msg, n, "delta.data is not NULL under ATTNCHECK_CAP_NO_DELTA");
    return ATTNCHECK_ERR_INVALID;
  }
  const attncheck_tensor* outs[3] = {&a->dq, &a->dk, &a->dv};
  for (int t = 0; t < 3; ++t) memset(outs[t]->data, 0, (size_t)count(outs[t]) * 4); /* FP32, packed (no pad) */
  return ATTNCHECK_OK;
}

#define DESC(NAME, CAPS, BWD)                                                                             \
  {.base = {.struct_size = sizeof(future_desc), .name = NAME, .caps = (CAPS),                              \
            .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16), .output_format = ATTNCHECK_FORMAT_FP32, \
            .forward = no_op_fwd, .backward = BWD},                                                        \
   .appended = 0xfeedfacecafebeefull}

static const future_desc kKernels[] = {DESC("first", ATTNCHECK_CAP_CAUSAL, NULL),
                                       DESC("device", ATTNCHECK_CAP_DEVICE_POINTERS, NULL),
                                       DESC("nodelta", ATTNCHECK_CAP_NO_DELTA, nodelta_bwd)};

static int chatty_init(const char* options, char* msg, size_t n) {
  (void)options, (void)msg, (void)n;
  printf("future plugin: hello from init\n");
  fflush(stdout);
  return ATTNCHECK_OK;
}

static const attncheck_plugin kPlugin = {.struct_size = sizeof(attncheck_plugin),
                                         .abi_major = ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR,
                                         .abi_minor = 99,
                                         .library_name = "future",
                                         .n_kernels = 3,
                                         .kernels = &kKernels[0].base,
                                         .init = chatty_init};

ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }

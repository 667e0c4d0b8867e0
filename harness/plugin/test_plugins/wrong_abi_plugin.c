/* wrong_abi_plugin.c — a plugin table claiming ABI major version 2 through the v1 entry point (as a plugin
 * built against a future header might); plugin_loader_test checks it is rejected with a clear message.
 * Built twice: WRONG_ABI_V2_SYMBOL=1 exports attncheck_plugin_v2 instead, as a real v2 plugin would. */
#include "attncheck_plugin.h"

static int never_called(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  return ATTNCHECK_ERR_INTERNAL;
}

static const attncheck_kernel_desc kKernels[] = {{.struct_size = sizeof(attncheck_kernel_desc),
                                                  .name = "future",
                                                  .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16),
                                                  .output_format = ATTNCHECK_FORMAT_BF16,
                                                  .forward = never_called}};

static const attncheck_plugin kPlugin = {.struct_size = sizeof(attncheck_plugin),
                                         .abi_major = 2,
                                         .abi_minor = 0,
                                         .library_name = "future",
                                         .n_kernels = 1,
                                         .kernels = kKernels};

#if WRONG_ABI_V2_SYMBOL
ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v2(void) { return &kPlugin; }
#else
ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }
#endif

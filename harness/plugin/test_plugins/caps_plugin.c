/* caps_plugin.c — a kernel declaring ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT (ABI 1.1); built a second time with
 * UNKNOWN_CAP=1, where it also sets a bit no header defines (as a plugin built against a newer header might).
 * plugin_loader_test checks the first is read into the kernel's caps and the second is refused at load. */
#include "attncheck_plugin.h"

static int never_called(void* self, const attncheck_forward_args* a, char* msg, size_t n) {
  (void)self, (void)a, (void)msg, (void)n;
  return ATTNCHECK_ERR_INTERNAL;
}

#if UNKNOWN_CAP
#define EXTRA_CAPS (1ull << 40)
#else
#define EXTRA_CAPS 0
#endif

static const attncheck_kernel_desc kKernels[] = {{.struct_size = sizeof(attncheck_kernel_desc),
                                                  .name = "seeded",
                                                  .caps = ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT | EXTRA_CAPS,
                                                  .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16),
                                                  .output_format = ATTNCHECK_FORMAT_BF16,
                                                  .forward = never_called}};

static const attncheck_plugin kPlugin = {.struct_size = sizeof(attncheck_plugin),
                                         .abi_major = ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR,
                                         .abi_minor = ATTNCHECK_PLUGIN_ABI_VERSION_MINOR,
                                         .library_name = "caps",
                                         .n_kernels = 1,
                                         .kernels = kKernels};

ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }

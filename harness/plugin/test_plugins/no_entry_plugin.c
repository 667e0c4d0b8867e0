/* no_entry_plugin.c — a shared library that is not an attncheck plugin (it lacks attncheck_plugin_v1);
 * plugin_loader_test checks that loading it fails with a message naming the missing symbol. */
#include "attncheck_plugin.h"

ATTNCHECK_PLUGIN_EXPORT int some_other_entry(void) { return 1; }

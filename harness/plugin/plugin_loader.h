// plugin_loader.h — load an external kernel library (harness/plugin/attncheck_plugin.h ABI) and register
// each kernel it exports as `plugin:<name>` in a Registry.
//
// Loading: dlopen(RTLD_NOW | RTLD_LOCAL), look up `attncheck_plugin_v1`, check abi_major (== 1) and every
// field of the table (names, formats, functions); any problem is an attncheck::Error naming the file and the
// fix. The library stays loaded for the life of the process (never dlclose'd: kernels may still point in).
// Calls: each forward/backward encodes the Instance into guarded shared buffers (guarded_arena.h), runs the
// plugin function isolated in a child process (isolated_call.h) unless isolation is off, checks the guards,
// and decodes the outputs. Crash, hang, error status and out-of-bounds writes throw PluginFault
// (plugin_fault.h); an ATTNCHECK_ERR_UNSUPPORTED answer throws a plain Error (properties skip).
//
// Environment (read by load_plugin(path, registry) and PluginOptions::from_env()):
//   ATTNCHECK_PLUGIN_ISOLATION=0   call in-process (faster; a crash kills the harness, no time limit)
//   ATTNCHECK_PLUGIN_TIMEOUT=S     per-call time limit in seconds (default 10)
//   ATTNCHECK_PLUGIN_PAD=N         pad every innermost row by N elements (checks that strides are honoured)
// The path may carry init options after a colon: `libx.so:defect=skip_rescale` passes "defect=skip_rescale"
// to the plugin's init (the split happens only when the part before the colon names an existing file).
#pragma once

#include <string>

#include "harness/kernel.h"
#include "harness/plugin/isolated_call.h"
#include "harness/plugin/plugin_fault.h"

namespace attncheck {

struct PluginOptions {
  CallLimits limits;          // isolation on, 10 s per call
  int pad = 0;                // row padding in elements (see ATTNCHECK_PLUGIN_PAD)
  std::string init_options;   // passed to the plugin's init; "" = none
  static PluginOptions from_env();  // defaults overridden by the environment variables above
};

// Loads the library at `path` (optionally `path:options`), registers its kernels as plugin:<name> in
// `registry`, and returns how many it registered. Throws Error on a missing file, a missing entry symbol,
// a wrong ABI major, a malformed table, a failing init, or a name already registered.
int load_plugin(const std::string& path, Registry& registry);
int load_plugin(const std::string& path, Registry& registry, const PluginOptions& options);

}  // namespace attncheck

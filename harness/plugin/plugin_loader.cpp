// plugin_loader.cpp — dlopen, ABI and table checks, and PluginKernel: an attncheck::Kernel that runs one
// kernel of a plugin through guarded, isolated calls. See plugin_loader.h.
#include "harness/plugin/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "harness/plugin/attncheck_plugin.h"
#include "harness/plugin/guarded_arena.h"
#include "harness/stdout_on_stderr.h"
#include "kernels/formats.h"

namespace attncheck {
namespace {

// The end of the fields ABI 1.0 defines, for struct_size checks.
constexpr std::size_t kPluginV10Size = offsetof(attncheck_plugin, init) + sizeof(void*);
constexpr std::size_t kDescV10Size = offsetof(attncheck_kernel_desc, backward) + sizeof(void*);

bool valid_name(const char* s) {
  if (!s || !*s) return false;
  for (const char* c = s; *c; ++c)
    if (!(std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '.' || *c == '-')) return false;
  return true;
}

std::string status_text(int st) {
  switch (st) {
    case ATTNCHECK_ERR_UNSUPPORTED: return "ATTNCHECK_ERR_UNSUPPORTED";
    case ATTNCHECK_ERR_INVALID: return "ATTNCHECK_ERR_INVALID";
    case ATTNCHECK_ERR_INTERNAL: return "ATTNCHECK_ERR_INTERNAL";
    case ATTNCHECK_ERR_DEVICE: return "ATTNCHECK_ERR_DEVICE";
    case ATTNCHECK_ERR_NO_MEMORY: return "ATTNCHECK_ERR_NO_MEMORY";
    default: return "unknown status " + std::to_string(st);
  }
}

class PluginKernel : public Kernel {
 public:
  PluginKernel(const attncheck_kernel_desc& d, std::string library, PluginOptions opts)
      : d_(d), library_(std::move(library)), opts_(std::move(opts)) {
    caps_.backward = d.backward != nullptr;
    caps_.causal = d.caps & ATTNCHECK_CAP_CAUSAL;
    caps_.mask = d.caps & ATTNCHECK_CAP_MASK;
    caps_.bias = d.caps & ATTNCHECK_CAP_BIAS;
    caps_.gqa = d.caps & ATTNCHECK_CAP_GQA;
    caps_.rounding_seeded_by_input = d.caps & ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT;
    caps_.input_formats.clear();
    for (int32_t f = ATTNCHECK_FORMAT_FP32; f <= ATTNCHECK_FORMAT_E5M2; ++f)
      if (d.input_formats & ATTNCHECK_FORMAT_BIT(f)) caps_.input_formats.push_back(from_abi_format(f));
    caps_.output_format = from_abi_format(d.output_format);
    caps_.device = "plugin";
    caps_.max_head_dim = d.max_head_dim;
    for (int32_t i = 0; i < d.n_head_dims; ++i) caps_.head_dims.push_back(d.head_dims[i]);
  }

  std::string name() const override { return std::string("plugin:") + d_.name; }
  std::string summary() const override {
    return (d_.summary ? std::string(d_.summary) : std::string("external kernel")) + " [" + library_ + "]";
  }
  KernelCaps caps() const override { return caps_; }

  ForwardOutput forward(const Instance& in) const override {
    const Problem& p = in.problem;
    check_supported(p, false);
    GuardedArena a(opts_.pad);
    const Inputs t = add_inputs(a, p);
    const int o = a.add("O", d_.output_format, q_shape(p), true);
    const int lse = a.add("LSE", ATTNCHECK_FORMAT_FP32, row_shape(p), true);
    a.allocate();
    write_inputs(a, t, in);

    attncheck_forward_args args{};
    common_args(args, a, t, p, o, lse, in.seed);
    call(a, [&](char* msg, std::size_t n) { return d_.forward(d_.self, &args, msg, n); }, p, false);
    return ForwardOutput{a.read(o), a.read(lse)};
  }

  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override {
    const Problem& p = in.problem;
    if (!d_.backward) throw Error(name() + " has no backward pass");
    check_supported(p, true);
    if (in.d_o.size() != p.q_size()) throw Error(name() + ": backward needs dO (the instance has none)");
    GuardedArena a(opts_.pad);
    const Inputs t = add_inputs(a, p);
    const int o = a.add("O", d_.output_format, q_shape(p), false);
    const int lse = a.add("LSE", ATTNCHECK_FORMAT_FP32, row_shape(p), false);
    const int d_o = a.add("dO", to_abi_format(p.input_format), q_shape(p), false);
    const int dq = a.add("dQ", d_.output_format, q_shape(p), true);
    const int dk = a.add("dK", d_.output_format, kv_shape(p), true);
    const int dv = a.add("dV", d_.output_format, kv_shape(p), true);
    // Under ATTNCHECK_CAP_NO_DELTA there is no delta buffer (args.delta is all zero, data NULL): a guarded input
    // there reported the kernel's write as "out of bounds in input delta".
    const bool writes_delta = !(d_.caps & ATTNCHECK_CAP_NO_DELTA);
    const int delta = writes_delta ? a.add("delta", ATTNCHECK_FORMAT_FP32, row_shape(p), true) : -1;
    a.allocate();
    write_inputs(a, t, in);
    a.write(o, fwd.o);
    a.write(lse, fwd.lse);
    a.write(d_o, in.d_o);

    attncheck_backward_args args{};
    common_args(args, a, t, p, o, lse, in.seed);
    args.d_o = a.tensor(d_o);
    args.dq = a.tensor(dq);
    args.dk = a.tensor(dk);
    args.dv = a.tensor(dv);
    if (writes_delta) args.delta = a.tensor(delta);
    call(a, [&](char* msg, std::size_t n) { return d_.backward(d_.self, &args, msg, n); }, p, true);

    BackwardOutput out{a.read(dq), a.read(dk), a.read(dv), {}};
    if (writes_delta) {
      out.delta = a.read(delta);
    } else {  // δ_i = Σ_c dO_ic O_ic from the kernel's own O, exact in fp64, rounded once to fp32
      out.delta.assign(p.rows(), 0.0);
      for (std::size_t r = 0; r < p.rows(); ++r) {
        double s = 0;
        for (int c = 0; c < p.head_dim; ++c) s += in.d_o[r * p.head_dim + c] * fwd.o[r * p.head_dim + c];
        out.delta[r] = round_to(s, Format::kF32);
      }
    }
    return out;
  }

 private:
  struct Inputs {
    int q, k, v, mask = -1, bias = -1;
  };
  static std::vector<std::int64_t> q_shape(const Problem& p) { return {p.batch, p.heads_q, p.n_q, p.head_dim}; }
  static std::vector<std::int64_t> kv_shape(const Problem& p) { return {p.batch, p.heads_kv, p.n_k, p.head_dim}; }
  static std::vector<std::int64_t> row_shape(const Problem& p) { return {p.batch, p.heads_q, p.n_q}; }
  static std::vector<std::int64_t> score_shape(const Problem& p) { return {p.batch, p.heads_q, p.n_q, p.n_k}; }

  Inputs add_inputs(GuardedArena& a, const Problem& p) const {
    const int32_t f = to_abi_format(p.input_format);
    Inputs t{a.add("Q", f, q_shape(p), false), a.add("K", f, kv_shape(p), false), a.add("V", f, kv_shape(p), false)};
    if (p.has_mask) t.mask = a.add("mask", ATTNCHECK_FORMAT_MASK_U8, score_shape(p), false);
    if (p.has_bias) t.bias = a.add("bias", ATTNCHECK_FORMAT_FP32, score_shape(p), false);
    return t;
  }
  static void write_inputs(GuardedArena& a, const Inputs& t, const Instance& in) {
    a.write(t.q, in.q);
    a.write(t.k, in.k);
    a.write(t.v, in.v);
    if (t.mask >= 0) a.write_mask(t.mask, in.mask);
    if (t.bias >= 0) a.write(t.bias, in.bias);
  }
  // The fields attncheck_forward_args and attncheck_backward_args share: size, problem, Q, K, V, mask, bias, O, LSE
  // (an output of the forward, an input of the backward) and the seed.
  template <class Args>
  void common_args(Args& args, const GuardedArena& a, const Inputs& t, const Problem& p, int o, int lse,
                   std::uint64_t seed) const {
    args.struct_size = sizeof args;
    args.problem = abi_problem(p);
    args.q = a.tensor(t.q);
    args.k = a.tensor(t.k);
    args.v = a.tensor(t.v);
    if (t.mask >= 0) args.mask = a.tensor(t.mask);
    if (t.bias >= 0) args.bias = a.tensor(t.bias);
    args.o = a.tensor(o);
    args.lse = a.tensor(lse);
    args.seed = seed;
  }
  attncheck_problem abi_problem(const Problem& p) const {
    attncheck_problem q{};
    q.struct_size = sizeof q;
    q.batch = p.batch;
    q.heads_q = p.heads_q;
    q.heads_kv = p.heads_kv;
    q.n_q = p.n_q;
    q.n_k = p.n_k;
    q.head_dim = p.head_dim;
    q.scale = static_cast<float>(p.scale);  // exact: Problem::validate requires an fp32 scale
    q.causal = p.causal;
    q.has_mask = p.has_mask;
    q.has_bias = p.has_bias;
    q.input_format = to_abi_format(p.input_format);
    q.output_format = d_.output_format;
    return q;
  }
  void check_supported(const Problem& p, bool backward) const {
    p.validate();
    const std::string why = caps_.unsupported_reason(p, backward);
    if (!why.empty()) throw Error(name() + ": unsupported: " + why);
    if (d_.caps & ATTNCHECK_CAP_DEVICE_POINTERS)  // a skip, as the header promises (a plain Error was a FAIL per check)
      throw Unsupported(name() + ": unsupported: the kernel wants device pointers, which this attncheck build does not "
                                 "provide to plugins yet (host pointers only)");
  }

  // Runs supports() then fn, isolated; maps every outcome to a return or an exception.
  template <class Fn>
  void call(GuardedArena& a, Fn fn, const Problem& p, bool backward) const {
    const attncheck_problem q = abi_problem(p);
    a.snapshot();
    std::string msg;
    const int st = run_plugin_call(
        [&](char* m, std::size_t n) {
          if (d_.supports) {
            const int s = d_.supports(d_.self, &q, backward ? 1 : 0, m, n);
            if (s != ATTNCHECK_OK) return s;
          }
          return fn(m, n);
        },
        opts_.limits, name(), &msg);
    // The guards are checked even when the call reports an error: a stray write is the bigger finding.
    const std::string oob = a.check();
    if (!oob.empty()) throw PluginFault(FaultKind::kOutOfBounds, name(), oob);
    if (st == ATTNCHECK_ERR_UNSUPPORTED)
      throw Unsupported(name() + ": unsupported: " + (msg.empty() ? "the kernel declined the problem" : msg));
    if (st != ATTNCHECK_OK)
      throw PluginFault(FaultKind::kError, name(), status_text(st) + (msg.empty() ? "" : ": " + msg));
  }

  attncheck_kernel_desc d_;
  std::string library_;
  PluginOptions opts_;
  KernelCaps caps_;
};

// Descriptor i of the table. The array's stride is the plugin's sizeof(attncheck_kernel_desc), its struct_size,
// which a later minor may grow: indexing t->kernels[i] stepped by this build's size and read a newer plugin's
// second descriptor from the middle of its first (a crash). The copy holds the fields this build knows; those the
// plugin's older header lacks are zero. check_table requires every entry's struct_size to be the first's.
attncheck_kernel_desc descriptor(const attncheck_plugin* t, int32_t i) {
  const auto* base = reinterpret_cast<const unsigned char*>(t->kernels);
  const std::size_t stride = t->kernels[0].struct_size;
  attncheck_kernel_desc d{};
  std::memcpy(&d, base + stride * std::size_t(i), std::min<std::size_t>(stride, sizeof d));
  return d;
}

// The table's descriptors, read once at the plugin's stride (descriptor()), each checked.
std::vector<attncheck_kernel_desc> check_table(const attncheck_plugin* t, const std::string& path) {
  const std::string where = path + ": ";
  if (!t) throw Error(where + "attncheck_plugin_v1() returned NULL");
  if (t->abi_major != ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR)
    throw Error(where + "plugin ABI major version " + std::to_string(t->abi_major) + ", this attncheck speaks " +
                std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR) + "." +
                std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MINOR) +
                ": rebuild the plugin against this attncheck's harness/plugin/attncheck_plugin.h");
  if (t->struct_size < kPluginV10Size)
    throw Error(where + "attncheck_plugin.struct_size " + std::to_string(t->struct_size) + " is smaller than ABI 1.0's " +
                std::to_string(kPluginV10Size) + ": set it to sizeof(attncheck_plugin)");
  if (t->n_kernels < 1 || t->n_kernels > 4096 || !t->kernels)
    throw Error(where + "the table lists " + std::to_string(t->n_kernels) + " kernels (needs 1..4096 and a non-NULL array)");
  // 64 KiB: about 700 times ABI 1.1's 88-byte descriptor, so no plausible minor; a garbage size is refused, not used as
  // the stride to read n_kernels entries with.
  if (t->kernels[0].struct_size < kDescV10Size || t->kernels[0].struct_size > (1u << 16))
    throw Error(where + "kernel #0: struct_size " + std::to_string(t->kernels[0].struct_size) + " is not from 1.0's " +
                std::to_string(kDescV10Size) + " to 65536: set it to sizeof(attncheck_kernel_desc)");
  std::set<std::string> seen;
  std::vector<attncheck_kernel_desc> descs;
  for (int32_t i = 0; i < t->n_kernels; ++i) {
    const attncheck_kernel_desc& d = descs.emplace_back(descriptor(t, i));
    const std::string which = where + "kernel #" + std::to_string(i) + (valid_name(d.name) ? " '" + std::string(d.name) + "'" : "") + ": ";
    if (d.struct_size != t->kernels[0].struct_size)
      throw Error(which + "struct_size " + std::to_string(d.struct_size) + " differs from kernel #0's " +
                  std::to_string(t->kernels[0].struct_size) + " (the array's stride): set each to sizeof(attncheck_kernel_desc)");
    if (!valid_name(d.name)) throw Error(which + "name must be non-empty [A-Za-z0-9_.-]+");
    if (!seen.insert(d.name).second) throw Error(which + "name appears twice in the library");
    if (!d.forward) throw Error(which + "forward is NULL");
    constexpr uint64_t kKnownCaps = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_MASK | ATTNCHECK_CAP_BIAS | ATTNCHECK_CAP_GQA |
                                    ATTNCHECK_CAP_DEVICE_POINTERS | ATTNCHECK_CAP_NO_DELTA |
                                    ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT;
    if (d.caps & ~kKnownCaps) {
      char bits[32];
      std::snprintf(bits, sizeof bits, "0x%llx", static_cast<unsigned long long>(d.caps & ~kKnownCaps));
      throw Error(which + "caps has bits this attncheck does not know (" + bits + "; it speaks ABI " +
                  std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR) + "." + std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MINOR) +
                  "): a newer header's capability would be ignored here");
    }
    const uint32_t known = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_FP32) | ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16) |
                           ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_FP16) | ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_E4M3) |
                           ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_E5M2);
    if (d.input_formats == 0 || (d.input_formats & ~known))
      throw Error(which + "input_formats must be a non-empty set of ATTNCHECK_FORMAT_BIT(FP32/BF16/FP16/E4M3/E5M2)");
    if (d.output_format != ATTNCHECK_FORMAT_BF16 && d.output_format != ATTNCHECK_FORMAT_FP16 &&
        d.output_format != ATTNCHECK_FORMAT_FP32)
      throw Error(which + "output_format must be ATTNCHECK_FORMAT_BF16, FP16 or FP32");
    if (d.max_head_dim < 0 || d.n_head_dims < 0 || (d.n_head_dims > 0 && !d.head_dims))
      throw Error(which + "max_head_dim and n_head_dims must be >= 0, and head_dims non-NULL when n_head_dims > 0");
  }
  return descs;
}

// "lib.so:opts" -> ("lib.so", "opts"). The path is the whole text when that exists, else the shortest text before a
// colon that names an existing file, so the options may hold colons ("lib.so:device=cuda:0": splitting at the last
// colon looked for a file "lib.so:device=cuda"). Neither: the whole text is the path (load_plugin: no such file).
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  struct stat st;
  if (stat(spec.c_str(), &st) == 0) return {spec, ""};
  for (auto colon = spec.find(':'); colon != std::string::npos; colon = spec.find(':', colon + 1))
    if (stat(spec.substr(0, colon).c_str(), &st) == 0 && S_ISREG(st.st_mode))
      return {spec.substr(0, colon), spec.substr(colon + 1)};
  return {spec, ""};
}

}  // namespace

PluginOptions PluginOptions::from_env() {
  PluginOptions o;
  // Set and empty is unset, as for ATTNCHECK_SHRINK_SECONDS (an empty timeout was an error, an empty shrink time not).
  const auto get = [](const char* name) -> const char* {
    const char* s = std::getenv(name);
    return s && *s ? s : nullptr;
  };
  if (const char* s = get("ATTNCHECK_PLUGIN_ISOLATION")) {
    const std::string v = s;
    if (v == "0" || v == "off" || v == "false") o.limits.isolate = false;
    else if (!(v == "1" || v == "on" || v == "true"))
      throw Error("ATTNCHECK_PLUGIN_ISOLATION='" + v + "': use 1, on or true (isolated), 0, off or false (in process)");
  }
  if (const char* s = get("ATTNCHECK_PLUGIN_TIMEOUT")) {
    char* end = nullptr;
    const double t = std::strtod(s, &end);
    // At most 30 days: the limit becomes a millisecond count, which overflowed near 1e16 s (every call then "timed
    // out" at once). At least 1 ms: each call forks first, and below the count's resolution every call timed out
    // (1e-300 was taken, and every check became a timeout finding blamed on the kernel).
    if (*end || !(t >= 0.001) || !(t <= 2592000))
      throw Error(std::string("ATTNCHECK_PLUGIN_TIMEOUT='") + s +
                  "': use a number of seconds from 0.001 to 2592000 (30 days)");
    o.limits.time_limit_s = t;
  }
  if (const char* s = get("ATTNCHECK_PLUGIN_PAD")) {
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);
    if (*end || n < 0 || n > 4096) throw Error(std::string("ATTNCHECK_PLUGIN_PAD='") + s + "': use 0..4096");
    o.pad = static_cast<int>(n);
  }
  return o;
}

int load_plugin(const std::string& path, Registry& registry) {
  PluginOptions o = PluginOptions::from_env();
  auto [file, init] = split_spec(path);
  o.init_options = init;
  return load_plugin(file, registry, o);
}

int load_plugin(const std::string& path, Registry& registry, const PluginOptions& options) {
  // Loading runs the plugin's code in attncheck's process (constructors, entry point, init): what it prints is not
  // attncheck's output (`check --json -` promises the report is all that reaches standard output).
  const StdoutOnStderr quiet_stdout;
  if (path.empty()) throw Error("an empty path (give the library's file)");  // "--plugin: an empty path", as elsewhere
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw Error("plugin '" + path + "': no such file");
  // A path without a slash would make dlopen search the library path instead of opening this file.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error("plugin '" + path + "': cannot load: " + dlerror());
  // Never dlclose: kernels registered below point into the library for the rest of the process.
  auto entry = reinterpret_cast<attncheck_plugin_entry_fn>(dlsym(handle, ATTNCHECK_PLUGIN_ENTRY_SYMBOL));
  if (!entry) {
    for (int major = 2; major <= 9; ++major)
      if (dlsym(handle, ("attncheck_plugin_v" + std::to_string(major)).c_str()))
        throw Error("plugin '" + path + "': built for plugin ABI major version " + std::to_string(major) +
                    " (exports attncheck_plugin_v" + std::to_string(major) + "); this attncheck speaks " +
                    std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR) + " and needs " + ATTNCHECK_PLUGIN_ENTRY_SYMBOL);
    throw Error("plugin '" + path + "': not an attncheck plugin: no symbol " + ATTNCHECK_PLUGIN_ENTRY_SYMBOL +
                " (export `const attncheck_plugin* attncheck_plugin_v1(void)` with C linkage, see "
                "harness/plugin/attncheck_plugin.h)");
  }
  const attncheck_plugin* table = entry();
  const std::vector<attncheck_kernel_desc> descs = check_table(table, path);
  const std::string library = (table->library_name ? std::string(table->library_name) + " " : "") + path;
  if (table->init) {
    char msg[1024] = {};
    const int s = table->init(options.init_options.c_str(), msg, sizeof msg - 1);
    if (s != ATTNCHECK_OK)
      throw Error("plugin '" + path + "': init(\"" + options.init_options + "\") failed: " + status_text(s) +
                  (msg[0] ? std::string(": ") + msg : ""));
  } else if (!options.init_options.empty()) {
    throw Error("plugin '" + path + "': options '" + options.init_options + "' given but the plugin has no init");
  }
  // Check every name first so that a clash registers nothing.
  for (const attncheck_kernel_desc& d : descs)
    if (registry.find(std::string("plugin:") + d.name))
      throw Error("plugin '" + path + "': kernel plugin:" + d.name + " is already registered");
  for (const attncheck_kernel_desc& d : descs) registry.add(std::make_unique<PluginKernel>(d, library, options));
  // Another plugin: name is not in the libraries loaded ("pass --plugin LIB" read as if none had been).
  std::string loaded;
  for (const Kernel* k : registry.all())
    if (k->name().rfind("plugin:", 0) == 0) loaded += (loaded.empty() ? "" : ", ") + k->name();
  registry.note_absent("plugin:", "the plugins loaded provide " + loaded + "; another comes from its own library: " +
                                      "pass that with --plugin LIB[:OPTIONS] too");
  return static_cast<int>(descs.size());
}

}  // namespace attncheck

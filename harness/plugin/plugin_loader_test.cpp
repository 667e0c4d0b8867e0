// plugin_loader_test.cpp — the plugin loader and its isolation: ABI checks with clear messages, kernels
// registered as plugin:<name>, and every fault of a misbehaving plugin (crash, abort, hang, error status,
// write past an output, write into an input, row padding) reported as a PluginFault of the right kind while
// this test process carries on. Plugins are built by harness/plugin/CMakeLists.txt; their paths come in as
// ATTNCHECK_*_PLUGIN definitions. Run: ctest -R plugin_loader_test
#include "harness/plugin/plugin_loader.h"

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "harness/plugin/test_instances.h"

namespace attncheck {
namespace {

using plugin_test::make_problem;
using plugin_test::random_instance;

// The message of the Error that f throws (fails the test when it throws nothing).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const PluginFault& e) {
    ADD_FAILURE() << "expected a plain Error, got a PluginFault: " << e.what();
    return e.what();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

template <class F>
PluginFault fault_of(F f) {
  try {
    f();
  } catch (const PluginFault& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a PluginFault, got: " << e.what();
  }
  ADD_FAILURE() << "no PluginFault thrown";
  return PluginFault(FaultKind::kError, "none", "none");
}

PluginOptions isolated(double time_limit_s = 10.0) {
  PluginOptions o;
  o.limits.isolate = true;
  o.limits.time_limit_s = time_limit_s;
  return o;
}

PluginOptions in_process() {
  PluginOptions o;
  o.limits.isolate = false;
  return o;
}

const Instance& small_instance() {
  static const Instance in = random_instance(make_problem(1, 2, 1, 3, 5, 4), 7);
  return in;
}

// The environment's limits are read strictly: a time limit past 30 days overflowed the millisecond count (1e16 s
// made every call "time out" at once), so it is refused with the variable's name, as junk and negatives are.
TEST(PluginLoader, EnvironmentLimitsAreReadStrictly) {
  for (const char* bad : {"1e16", "2592001", "0", "-1", "nan", "inf", "10s", "1e-300", "0.0009"}) {
    ::setenv("ATTNCHECK_PLUGIN_TIMEOUT", bad, 1);
    try {
      (void)PluginOptions::from_env();
      ADD_FAILURE() << "ATTNCHECK_PLUGIN_TIMEOUT=" << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNCHECK_PLUGIN_TIMEOUT"), std::string::npos) << e.what();
    }
  }
  ::setenv("ATTNCHECK_PLUGIN_TIMEOUT", "2592000", 1);
  EXPECT_EQ(PluginOptions::from_env().limits.time_limit_s, 2592000.0);
  ::setenv("ATTNCHECK_PLUGIN_TIMEOUT", "0.001", 1);
  EXPECT_EQ(PluginOptions::from_env().limits.time_limit_s, 0.001);
  ::setenv("ATTNCHECK_PLUGIN_TIMEOUT", "", 1);  // set and empty: the default
  EXPECT_EQ(PluginOptions::from_env().limits.time_limit_s, PluginOptions().limits.time_limit_s);
  ::unsetenv("ATTNCHECK_PLUGIN_TIMEOUT");
}

TEST(PluginLoader, RegistersTheExampleAsPluginExample) {
  Registry r;
  EXPECT_EQ(load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated()), 2);
  ASSERT_NE(r.find("plugin:example_bwd"), nullptr);
  EXPECT_TRUE(r.find("plugin:example_bwd")->caps().backward);
  const Kernel* k = r.find("plugin:example");
  ASSERT_NE(k, nullptr);
  const KernelCaps c = k->caps();
  EXPECT_FALSE(c.backward);
  EXPECT_TRUE(c.causal && c.mask && c.bias && c.gqa);
  EXPECT_EQ(c.device, "plugin");
  EXPECT_EQ(c.output_format, Format::kBF16);
  ASSERT_EQ(c.input_formats.size(), 1u);
  EXPECT_EQ(c.input_formats[0], Format::kBF16);
  EXPECT_NE(k->summary().find("flash-attention"), std::string::npos) << k->summary();
}

TEST(PluginLoader, RejectsALibraryWithoutTheEntrySymbol) {
  Registry r;
  const std::string m = error_of([&] { load_plugin(ATTNCHECK_NO_ENTRY_PLUGIN, r, isolated()); });
  EXPECT_NE(m.find("not an attncheck plugin"), std::string::npos) << m;
  EXPECT_NE(m.find("attncheck_plugin_v1"), std::string::npos) << m;
  EXPECT_TRUE(r.all().empty());
}

TEST(PluginLoader, RejectsAWrongAbiMajorVersion) {
  Registry r;
  const std::string m = error_of([&] { load_plugin(ATTNCHECK_WRONG_ABI_PLUGIN, r, isolated()); });
  EXPECT_NE(m.find("ABI major version 2"), std::string::npos) << m;
  EXPECT_NE(m.find("rebuild the plugin"), std::string::npos) << m;
  const std::string m2 = error_of([&] { load_plugin(ATTNCHECK_ABI_V2_PLUGIN, r, isolated()); });
  EXPECT_NE(m2.find("built for plugin ABI major version 2"), std::string::npos) << m2;
  EXPECT_TRUE(r.all().empty());
}

// ABI 1.1's ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT reaches the kernel's caps (masked_value and causal_prefix then
// allow one rounding, as for the built-in stochastic); a cap bit no header defines is refused, not ignored.
TEST(PluginLoader, ReadsTheSeededRoundingCapAndRefusesUnknownCaps) {
  Registry r;
  EXPECT_EQ(load_plugin(ATTNCHECK_CAPS_PLUGIN, r, isolated()), 1);
  ASSERT_NE(r.find("plugin:seeded"), nullptr);
  EXPECT_TRUE(r.find("plugin:seeded")->caps().rounding_seeded_by_input);
  EXPECT_NE(r.find("plugin:seeded")->caps().describe().find("input-seeded-rounding"), std::string::npos);
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated());
  EXPECT_FALSE(r.find("plugin:example")->caps().rounding_seeded_by_input);
  Registry r2;
  const std::string m = error_of([&] { load_plugin(ATTNCHECK_UNKNOWN_CAP_PLUGIN, r2, isolated()); });
  EXPECT_NE(m.find("kernel #0 'seeded': caps has bits this attncheck does not know (0x10000000000"), std::string::npos) << m;
  EXPECT_TRUE(r2.all().empty());
}

// A later minor may append fields to attncheck_kernel_desc: the array is read at the plugin's stride (its
// struct_size), not this build's. Indexed by this build's size, a newer plugin's second descriptor was read from the
// middle of its first (a crash in `attncheck list`). The same library declares device pointers (every call a skip,
// as the header promises: it was a FAIL per check) and no delta (args.delta is all zero: a guarded input there
// called the kernel's write "out of bounds in input delta").
TEST(PluginLoader, ReadsDescriptorsAtThePluginsStrideAndHonoursTheirCaps) {
  Registry r;
  ASSERT_EQ(load_plugin(ATTNCHECK_FUTURE_PLUGIN, r, isolated()), 3);
  for (const char* name : {"plugin:first", "plugin:device", "plugin:nodelta"}) ASSERT_NE(r.find(name), nullptr) << name;
  EXPECT_TRUE(r.find("plugin:first")->caps().causal);
  EXPECT_FALSE(r.find("plugin:device")->caps().causal);
  const Instance in = random_instance(make_problem(1, 1, 1, 3, 5, 4), 11);
  EXPECT_THROW(r.find("plugin:device")->forward(in), Unsupported);
  const Kernel& nd = *r.find("plugin:nodelta");
  const BackwardOutput b = nd.backward(in, nd.forward(in));  // throws PluginFault unless delta.data was NULL
  EXPECT_EQ(b.dq, std::vector<double>(in.q.size(), 0.0));
  ASSERT_EQ(b.delta.size(), in.problem.rows());  // derived by attncheck from dO and the kernel's O
}

// PATH:OPTIONS splits before the first colon whose prefix is a file, so the options may hold colons ("device=cuda:0").
TEST(PluginLoader, InitOptionsMayHoldColons) {
  Registry r;
  const std::string m = error_of([&] { load_plugin(std::string(ATTNCHECK_EXAMPLE_PLUGIN) + ":tile_k=0:x", r); });
  EXPECT_NE(m.find("init(\"tile_k=0:x\") failed"), std::string::npos) << m;  // was "no such file"
}

TEST(PluginLoader, RejectsMissingAndNonLibraryFiles) {
  Registry r;
  EXPECT_NE(error_of([&] { load_plugin("/nonexistent/libnothing.so", r); }).find("no such file"), std::string::npos);
  EXPECT_NE(error_of([&] { load_plugin("", r); }).find("an empty path"), std::string::npos);  // "'': no such file"
  const std::string text = testing::TempDir() + "not_a_library.so";
  std::ofstream(text) << "hello\n";
  EXPECT_NE(error_of([&] { load_plugin(text, r); }).find("cannot load"), std::string::npos);
}

TEST(PluginLoader, RejectsADuplicateNameAndBadInitOptions) {
  Registry r;
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated());
  EXPECT_NE(error_of([&] { load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated()); }).find("already registered"),
            std::string::npos);
  Registry r2;
  // path:options splits at the colon because the part before it is a file; init rejects the option.
  const std::string m = error_of([&] { load_plugin(std::string(ATTNCHECK_EXAMPLE_PLUGIN) + ":tile_k=0", r2); });
  EXPECT_NE(m.find("init(\"tile_k=0\") failed"), std::string::npos) << m;
  EXPECT_TRUE(r2.all().empty());
  // The faulty library has no init, so options are an error rather than silently ignored.
  PluginOptions o = isolated();
  o.init_options = "x=1";
  EXPECT_NE(error_of([&] { load_plugin(ATTNCHECK_FAULTY_PLUGIN, r2, o); }).find("has no init"), std::string::npos);
}

TEST(PluginIsolation, EveryFaultIsReportedAndTheHarnessSurvives) {
  Registry r;
  // 0.5 s: the hang must be cut short; every other call here takes a few milliseconds.
  ASSERT_EQ(load_plugin(ATTNCHECK_FAULTY_PLUGIN, r, isolated(0.5)), 11);
  const Instance& in = small_instance();
  auto run = [&](const char* name) { return fault_of([&] { r.get(name).forward(in); }); };

  PluginFault crash = run("plugin:crash");
  EXPECT_EQ(crash.kind(), FaultKind::kCrash);
  EXPECT_NE(crash.detail().find("SIGSEGV"), std::string::npos) << crash.what();
  EXPECT_EQ(crash.kernel(), "plugin:crash");

  PluginFault abrt = run("plugin:abort");
  EXPECT_EQ(abrt.kind(), FaultKind::kCrash);
  EXPECT_NE(abrt.detail().find("SIGABRT"), std::string::npos) << abrt.what();

  const auto t0 = std::chrono::steady_clock::now();
  PluginFault hang = run("plugin:hang");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(hang.kind(), FaultKind::kTimeout) << hang.what();
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 5.0);  // killed near the limit, not left running

  PluginFault err = run("plugin:error");
  EXPECT_EQ(err.kind(), FaultKind::kError);
  EXPECT_NE(err.detail().find("ATTNCHECK_ERR_INTERNAL: workspace of 7 bytes too small\\x1b[2J\\xff"), std::string::npos) << err.what();

  PluginFault oob = run("plugin:oob_write");
  EXPECT_EQ(oob.kind(), FaultKind::kOutOfBounds);
  EXPECT_NE(oob.detail().find("after the end of O"), std::string::npos) << oob.what();

  PluginFault input = run("plugin:input_write");
  EXPECT_EQ(input.kind(), FaultKind::kOutOfBounds);
  EXPECT_NE(input.detail().find("in input K at element 0"), std::string::npos) << input.what();

  // Declining a problem is a skip, not a finding: the loader says so with the Unsupported error type.
  EXPECT_NE(error_of([&] { r.get("plugin:unsupported").forward(in); }).find("unsupported: only head_dim 64 (got 4)"),
            std::string::npos);
  EXPECT_THROW(r.get("plugin:unsupported").forward(in), Unsupported);

  // Still alive: the example gives finite results after all of the above.
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated());
  const ForwardOutput out = r.get("plugin:example").forward(in);
  ASSERT_EQ(out.o.size(), in.problem.q_size());
  for (double x : out.o) EXPECT_TRUE(std::isfinite(x));
}

TEST(PluginIsolation, InProcessCallsStillCatchErrorsAndStrayWrites) {
  Registry r;
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r, in_process());
  const Instance& in = small_instance();
  EXPECT_EQ(fault_of([&] { r.get("plugin:error").forward(in); }).kind(), FaultKind::kError);
  EXPECT_EQ(fault_of([&] { r.get("plugin:oob_write").forward(in); }).kind(), FaultKind::kOutOfBounds);
  EXPECT_EQ(fault_of([&] { r.get("plugin:input_write").forward(in); }).kind(), FaultKind::kOutOfBounds);
}

TEST(PluginIsolation, UnwrittenOutputsReadBackAsNaN) {
  Registry r;
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r, isolated());
  const ForwardOutput out = r.get("plugin:silent").forward(small_instance());
  ASSERT_EQ(out.o.size(), small_instance().problem.q_size());
  for (double x : out.o) EXPECT_TRUE(std::isnan(x));
  for (double x : out.lse) EXPECT_TRUE(std::isnan(x));
}

TEST(PluginIsolation, IsolatedAndInProcessResultsAreBitwiseEqual) {
  Registry a, b;
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, a, isolated());
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, b, in_process());
  const Instance in = random_instance(make_problem(2, 4, 2, 9, 13, 8, true, true, true), 3);
  const ForwardOutput x = a.get("plugin:example").forward(in), y = b.get("plugin:example").forward(in);
  ASSERT_EQ(x.o.size(), y.o.size());
  for (std::size_t i = 0; i < x.o.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint64_t>(x.o[i]), std::bit_cast<std::uint64_t>(y.o[i])) << i;
  for (std::size_t i = 0; i < x.lse.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint64_t>(x.lse[i]), std::bit_cast<std::uint64_t>(y.lse[i])) << i;
}

TEST(PluginBuffers, PaddedRowsCatchAKernelThatIgnoresStrides) {
  const Instance in = random_instance(make_problem(1, 2, 2, 4, 6, 8, true), 5);
  PluginOptions packed = isolated(), padded = isolated();
  padded.pad = 3;
  Registry r0, r3;
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r0, packed);
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r0, packed);
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r3, padded);
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r3, padded);
  // The example honours strides: padding changes nothing.
  EXPECT_EQ(r0.get("plugin:example").forward(in).o, r3.get("plugin:example").forward(in).o);
  // `packed` writes as if rows were packed: fine without padding, a stray write into the padding with it.
  EXPECT_NO_THROW(r0.get("plugin:packed").forward(in));
  const PluginFault f = fault_of([&] { r3.get("plugin:packed").forward(in); });
  EXPECT_EQ(f.kind(), FaultKind::kOutOfBounds);
  EXPECT_NE(f.detail().find("row padding of output O"), std::string::npos) << f.what();
}

TEST(PluginKernel, BackwardRoundTripAndDerivedDelta) {
  Registry r;
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r, isolated());
  load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, isolated());
  const Instance in = random_instance(make_problem(1, 2, 1, 3, 4, 4), 11);
  const Kernel& k = r.get("plugin:packed");
  ASSERT_TRUE(k.caps().backward);
  ForwardOutput fwd = k.forward(in);
  // Give it a non-zero O so the derived δ = fp32(Σ dO·O) is not trivially zero.
  for (std::size_t i = 0; i < fwd.o.size(); ++i) fwd.o[i] = (i % 3) - 1.0;
  const BackwardOutput g = k.backward(in, fwd);
  ASSERT_EQ(g.dq.size(), in.problem.q_size());
  ASSERT_EQ(g.dk.size(), in.problem.kv_size());
  for (double x : g.dq) EXPECT_EQ(x, 1.0);
  for (double x : g.dv) EXPECT_EQ(x, 1.0);
  ASSERT_EQ(g.delta.size(), in.problem.rows());
  for (std::size_t row = 0; row < in.problem.rows(); ++row) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += in.d_o[row * 4 + c] * fwd.o[row * 4 + c];
    EXPECT_EQ(g.delta[row], double(float(s))) << row;
  }
  EXPECT_NE(error_of([&] { r.get("plugin:example").backward(in, fwd); }).find("no backward pass"), std::string::npos);
}

TEST(PluginKernel, CapabilitiesAreCheckedBeforeTheCall) {
  Registry r;
  load_plugin(ATTNCHECK_FAULTY_PLUGIN, r, isolated());
  Instance in = random_instance(make_problem(1, 2, 1, 3, 4, 4, false, true), 2);
  // crash declares no mask: the call never happens, so no crash, just "unsupported".
  EXPECT_NE(error_of([&] { r.get("plugin:crash").forward(in); }).find("unsupported: no keep-mask"), std::string::npos);
}

TEST(PluginFaultNames, AreStable) {
  EXPECT_STREQ(fault_kind_name(FaultKind::kCrash), "crash");
  EXPECT_STREQ(fault_kind_name(FaultKind::kTimeout), "timeout");
  EXPECT_STREQ(fault_kind_name(FaultKind::kError), "error");
  EXPECT_STREQ(fault_kind_name(FaultKind::kOutOfBounds), "out_of_bounds");
}

}  // namespace
}  // namespace attncheck

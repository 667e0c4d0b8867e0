// cmd_list.cpp — `attncheck list`: kernels (with capabilities), properties (with their sentences),
// generators (with their parameters and defaults) and suites (which property runs on which generator).
#include <iostream>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/plugin/plugin_cli.h"
#include "harness/kernel.h"
#include "properties/family.h"
#include "properties/family_internal.h"  // param_domain, describe_domain
#include "properties/property.h"

namespace attncheck::cli {

namespace {

int run_list(const std::string& what) {
  std::ostream& o = std::cout;
  const bool all = what.empty();
  if (all || what == "kernels") {
    o << "kernels (a name may carry parameters, e.g. paper-fixed[beta=4,tol=0.002]):\n";
    for (const Kernel* k : default_registry().all())
      // A plugin's summary and library name are its own bytes: escapes and newlines are shown, not obeyed.
      o << "  " << k->name() << "\n      " << printable(k->summary()) << "\n      caps: " << k->caps().describe() << "\n";
  }
  if (all || what == "properties") {
    o << "properties:\n";
    for (const Property& p : all_properties())
      o << "  " << p.name << (p.across_instances ? "  [across instances]" : "") << (p.needs_backward ? "  [backward]" : "")
        << "\n      " << p.sentence << "\n";
  }
  if (all || what == "generators") {
    o << "generators (families; parameters with defaults):\n";
    for (const GeneratorInfo& g : generators()) {
      o << "  " << g.name << "\n      " << g.summary << "\n";
      if (!g.defaults.empty()) {
        o << "      params:";
        for (const auto& [k, v] : g.defaults) o << " " << k << "=" << v;
        o << "\n";
        // A family with ties also reads these two, whose defaults are in the code, not in its params (listing them
        // there would rename every tie family's checks, which --baseline matches by name).
        // ties_min only where two or more keys tie (sink's one lead key refuses it).
        if (const auto t = g.defaults.find("ties"); t != g.defaults.end() && t->second >= 1)
          o << "      also: " << (t->second >= 2 ? "ties_min=2 " : "") << "tie_rows=1 (parameters, below)\n";
      }
    }
    // Every parameter with its domain: parameters compose (normal[ties=3] makes ties), and some no generator lists
    // (ties_min, tie_rows) were set nowhere a user could read (a UX review, session 34).
    o << "parameters (--family 'G[key=value]' sets any of them where it changes what G makes; bf16 domains):\n";
    for (const std::string& name : family_param_names())
      if (const auto d = param_domain(name, Format::kBF16)) o << "  " << name << ": " << describe_domain(*d) << "\n";
  }
  if (all || what == "suites") {
    o << "suites:\n";
    for (const std::string& s : suite_names()) {
      const auto entries = suite(s);
      o << "  " << s << " (" << entries.size() << " checks per kernel): " << suite_purpose(s) << "\n";
      for (const SuiteEntry& e : entries) o << "      " << e.property << " on " << e.family.describe() << "\n";
    }
  }
  return kExitPass;
}

}  // namespace

void add_list(CLI::App& app, Runner& run) {
  auto what = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("list", "List kernels, properties, generators and suites");
  sub->add_option("what", *what, "Only one section")->check(CLI::IsMember({"kernels", "properties", "generators", "suites"}));
  add_plugin_option(*sub);  // list a plugin's kernels with their capabilities
  sub->footer("Exit status: 0 listed, 2 usage error (a plugin that does not load) or a closed standard output.");
  sub->callback([&run, what] { run = [what] { return run_list(*what); }; });
}

}  // namespace attncheck::cli

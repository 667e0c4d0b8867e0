// make_seeds.cpp — writes the committed fuzz seeds (corpus/seeds/kernel, corpus/seeds/parser) from code, so
// they can be regenerated when the input layout or the generator catalogue changes.
// Run:  build/harness/fuzz/attncheck_fuzz_make_seeds corpus/seeds     (overwrites the seed files)
// Kernel seeds: every generator's default family clipped to the first layout's limits (n <= 32, d <= 32,
// heads <= 4: bytes 18-20 stay 0), the bias flag on for the tie-producing generators, plus a few inputs with value
// edits (specials, a duplicated key row, a scaled query row), tied_max with 1 row in 8 tied (byte 21) and two long
// inputs (fuzz_input.h, bytes 18-20) that
// cross the CUDA kernels' 64-key tiles at real head dims. Parser seeds: a valid case as JSON (mode 0) and as a file
// (mode 1), truncated and mistyped variants, and CLI argument lists (mode 2).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/corpus.h"
#include "harness/fuzz/fuzz_input.h"

namespace fs = std::filesystem;
using namespace attncheck;
using namespace attncheck::fuzz;

namespace {

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s (%zu bytes)\n", p.string().c_str(), bytes.size());
}
void write(const fs::path& p, const std::vector<std::uint8_t>& b) { write(p, std::string(b.begin(), b.end())); }

bool biased_generator(const std::string& g) { return g.rfind("tied_max", 0) == 0 || g == "max_zero" || g == "near_tie"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <seeds dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  fs::create_directories(root / "kernel");
  fs::create_directories(root / "parser");
  for (const GeneratorInfo& g : generators()) {
    FuzzInput in;
    in.family = default_family(g.name);
    Problem& p = in.family.problem;
    p.n_q = std::min(p.n_q, kShortN);
    p.n_k = std::min(p.n_k, kShortN);
    p.head_dim = std::min(p.head_dim, kShortD);
    p.heads_q = std::min(p.heads_q, kMaxHeads);
    if (p.heads_q % p.heads_kv) p.heads_kv = p.heads_q;
    p.batch = std::min(p.batch, 2);
    p.scale = Problem::default_scale(p.head_dim);
    in.family.tile_q = std::min(in.family.tile_q, p.n_q);
    in.family.tile_k = std::min(in.family.tile_k, p.n_k);
    in.run_bias = biased_generator(g.name);
    write(root / "kernel" / (g.name + ".bin"), encode_input(in));
  }
  {  // 1 row in 8 tied (byte 21), as the bias suite's unbiased_at_ties entry has it: tied and untied rows in one tile
    FuzzInput in;
    in.family = default_family("tied_max");
    in.family.params["tie_rows"] = 0.125;
    in.family.tile_q = in.family.tile_k = 0;
    in.run_bias = true;
    write(root / "kernel" / "tied_max_rows8.bin", encode_input(in));
  }
  {  // value edits on the control generator: specials, a tie by a duplicated key row, a scaled query row
    FuzzInput in;
    in.family = default_family("normal");
    in.family.problem.n_q = 8;
    in.family.problem.n_k = 12;
    in.family.problem.head_dim = 8;
    in.family.problem.scale = Problem::default_scale(8);
    in.edits = {{EditOp::kCopyRow, 1, 5, 0, 2}, {EditOp::kScaleRow, 0, 1, 0, 20}};
    write(root / "kernel" / "edits_tie_scale.bin", encode_input(in));
    in.edits = {{EditOp::kSetSpecial, 1, 0, 0, 1}, {EditOp::kSetSpecial, 2, 3, 2, 3}, {EditOp::kSetSpecial, 0, 2, 1, 2}};
    write(root / "kernel" / "edits_specials.bin", encode_input(in));
  }
  {  // long inputs, so that a campaign starts with multi-tile shapes (as --suite long has them)
    FuzzInput in;
    in.family = default_family("tied_max");  // ties land in different 64-key tiles; tails of 2 queries and 8 keys
    in.family.problem = Problem::of_shape(1, 2, 2, 130, 200, 64);
    in.family.tile_q = in.family.tile_k = 0;
    write(root / "kernel" / "long_tied_max.bin", encode_input(in));
    in.family = default_family("first_tile_masked");  // the first 64-key tile wholly masked, d 128, tails 1 and 1
    in.family.params["first_masked"] = 64;
    in.family.problem = Problem::of_shape(1, 1, 1, 129, 193, 128);
    in.family.problem.has_mask = true;
    in.family.tile_q = in.family.tile_k = 0;
    write(root / "kernel" / "long_first_tile_masked.bin", encode_input(in));
  }
  // Parser seeds: a small valid case.
  Family f = default_family("tied_max");
  f.problem.n_q = 2;
  f.problem.n_k = 3;
  f.problem.head_dim = 2;
  f.problem.heads_q = f.problem.heads_kv = 1;
  Case c;
  c.kernel = "paper";
  c.property = all_properties().front().name;
  c.family = f;
  c.instance = make_instance(f, 0);
  c.found_by = "manual";
  c.found_at = "2026-11-29T00:00:00Z";
  c.note = "parser seed";
  const std::string text = case_to_json(c).dump(1);
  write(root / "parser" / "json_case", std::string(1, '\0') + text);
  write(root / "parser" / "file_case", std::string(1, '\1') + text);
  write(root / "parser" / "json_truncated", std::string(1, '\0') + text.substr(0, text.size() / 2));
  std::string mistyped = text;
  const auto at = mistyped.find("\"n_q\": 2");
  if (at != std::string::npos) mistyped.replace(at, 8, "\"n_q\": \"2\"");
  write(root / "parser" / "json_mistyped", std::string(1, '\0') + mistyped);
  write(root / "parser" / "file_empty", std::string(1, '\1'));
  using namespace std::string_literals;  // "..."s keeps the embedded NULs that separate arguments
  const std::string cli[] = {
      "list"s,
      "check\0--kernel\0paper\0--instances\0" "8"s,
      "check\0--kernel\0paper-fixed[beta=4,tol=0.002]\0--family\0tied_max\0--seed\0" "7"s,
      "replay\0--quiet\0corpus/regression/none.json"s,
      "check\0--seconds\0-1\0--json\0/dev/null"s,
      "--help"s,
  };
  for (std::size_t i = 0; i < sizeof cli / sizeof cli[0]; ++i)
    write(root / "parser" / ("cli_" + std::to_string(i)), std::string(1, '\2') + cli[i]);
  return 0;
}

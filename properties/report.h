// report.h — the human-readable minimal case of a failure (Outcome::report).
//
// Prints: kernel, property (and its sentence), verdict, family parameters and tile config, the statistic
// (bias: per tensor mean ulp, z, T, away-from-zero mean, the adjusted z_crit), the minimal instance's inputs of
// the first (b, h) slice in decimal and bf16 hex, the exact score matrix with tied maxima marked '*' and
// near-tied (within 2^-9 of the row maximum) marked '~', kernel vs exact O with the signed error in ulps.
// Large tensors are cut to the first rows/columns (said so). The replay line is NOT printed here: the CLI
// prints `replay: attncheck replay <file>` after it has saved the finding (write_finding).
#pragma once

#include <string>

#include "properties/property.h"

namespace attncheck {

// `replay`: the case's family was run as saved (attncheck replay), so the time is this run's, not the search's: the
// report says "failed in T s (this replay)" where a check says "found in T s".
std::string failure_report(const Property& p, const Kernel& k, const Outcome& o, bool replay = false);

}  // namespace attncheck

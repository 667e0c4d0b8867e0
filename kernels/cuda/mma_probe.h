// mma_probe.h — runs single mma.sync m16n8k16 bf16->fp32 instructions on given inputs (mma_probe.cu), so
// tests can compare the tensor cores with the model in mma_model.h; and the forward's row top-two in both forms.
// Layout per probe: a [16][16] (m, k), b [16][8] (k, n), c and d [16][8] (m, n); values as floats holding bf16
// (a, b) or fp32 (c). Throws Error on a CUDA failure.
#pragma once

#include <vector>

namespace attncheck::cuda {

// count probes; returns d (count*128 floats).
std::vector<float> run_mma_probes(const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& c, int count);

// The forward's per-row top two (quad_top2_rows*, mma_ops.cuh) and the paper baseline's row max (quad_max_rows_bf16) of
// `rows` rows of 64 scores (floats holding bf16; rows a multiple of 16, laid out as one warp's m16 tile per 16 rows).
// Returns [rows][kTop2Outputs]: (m1, m2) of the fp32 form, (m1, m2) of the packed form with prmt words, (m1, m2) of the
// packed form with from-cvt words, then the packed max with prmt words and with from-cvt words.
constexpr int kTop2Outputs = 8;
std::vector<float> run_top2_probes(const std::vector<float>& scores, int rows);

}  // namespace attncheck::cuda

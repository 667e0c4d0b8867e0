/* example_plugin.c — a small, readable flash-attention forward pass in plain C, exported through the
 * attncheck plugin ABI (../attncheck_plugin.h) as kernel `example` (registered as plugin:example), and as
 * `example_bwd`: the same forward plus a FlashAttention-2 backward pass (see example_backward below).
 *
 * Algorithm (FlashAttention-2 forward, one query row at a time, keys streamed in tiles of TILE_K):
 *   inputs bf16, arithmetic in fp32 (sequential sums, no fma contraction: built with -ffp-contract=off),
 *   running max m, running row sum l, running accumulator acc[d]; when a tile raises the max, l and acc are
 *   rescaled by exp(m_old - m_new). As in FlashAttention-2 on tensor cores, p = exp(s - m) enters the row sum
 *   in fp32 but the P·V product as p̄ = bf16(p) (round to nearest even). At the end O = acc / l (fp32)
 *   rounded once to bf16 (nearest even) and LSE = m + log(l) in fp32. A row that sees no key gets O = 0 and
 *   LSE = -inf.
 * Supports causal (bottom-right), keep-mask, additive bias, GQA, any head_dim; bf16 in, bf16 out; honours
 * every stride the harness passes.
 *
 * Deliberate defects, for showing that attncheck catches them (default: none):
 *   skip_rescale  forgets to rescale l and acc when the running max grows (a classic online-softmax bug:
 *                 large errors on any row whose max is not in the first tile);
 *   truncate_p    rounds p̄ = bf16(p) toward zero instead of to nearest (a biased rounding: small per element,
 *                 but every weight of P·V shrinks while the row sum does not, so O leans toward zero).
 * Switch one on with the init option `defect=NAME` (attncheck --plugin libattncheck_example_plugin.so:defect=NAME)
 * or the environment variable ATTNCHECK_EXAMPLE_DEFECT=NAME (read at every call, an unknown name refused at init;
 * the init option wins).
 * `tile_k=N` (init option) sets the key tile, default 4: small so the defect shows on small, readable cases.
 *
 * Build (CMake target attncheck_example_plugin, or by hand):
 *   cc -std=c99 -O2 -ffp-contract=off -fPIC -shared -I harness/plugin example_plugin.c -o libattncheck_example_plugin.so -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck_plugin.h"

enum { DEFECT_NONE = 0, DEFECT_SKIP_RESCALE = 1, DEFECT_TRUNCATE_P = 2, DEFECT_FROM_ENV = -1 };

static int g_defect = DEFECT_FROM_ENV; /* set by init; DEFECT_FROM_ENV = read ATTNCHECK_EXAMPLE_DEFECT per call */
static int g_tile_k = 4;

/* ---- bf16 <-> fp32 ------------------------------------------------------------------------------------- */
static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Round to nearest, ties to even; NaN stays a (quiet) NaN; overflow carries into the exponent (-> inf). */
static uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The defect truncate_p: keep 8 significant bits, rounding toward zero (biased low). Done with exact float
 * arithmetic (q is a power of two, so f / q, truncf and * q are exact), not by masking the low 16 bits:
 * gcc 12.2 at -O1/-O2 was seen to drop such a mask (memcpy or union pun) when it sits in a branch. */
static float truncate_to_bf16(float f) {
  if (f == 0.0f || !isfinite(f)) return f;
  const float q = ldexpf(1.0f, ilogbf(f) - 7); /* spacing of bf16 numbers in f's binade (f normal here) */
  return truncf(f / q) * q;
}

/* ---- options ------------------------------------------------------------------------------------------- */
static int parse_defect(const char* s) {
  if (!s || !*s || strcmp(s, "none") == 0) return DEFECT_NONE;
  if (strcmp(s, "skip_rescale") == 0) return DEFECT_SKIP_RESCALE;
  if (strcmp(s, "truncate_p") == 0) return DEFECT_TRUNCATE_P;
  return -2; /* unknown */
}

static int example_init(const char* options, char* msg, size_t msg_size) {
  /* options: comma-separated key=value, keys defect and tile_k. Each init starts from the defaults and changes the
     globals only when every option is good: a second load in one process (a test, a host) kept the first one's
     options, and a failed init kept the options it had read before the bad one. */
  int defect = DEFECT_FROM_ENV, tile_k = 4;
  char buf[256];
  if (strlen(options) >= sizeof buf) {
    snprintf(msg, msg_size, "options too long");
    return ATTNCHECK_ERR_INVALID;
  }
  strcpy(buf, options);
  for (char* item = strtok(buf, ","); item; item = strtok(NULL, ",")) {
    char* eq = strchr(item, '=');
    if (!eq) {
      snprintf(msg, msg_size, "option '%s' is not key=value (keys: defect, tile_k)", item);
      return ATTNCHECK_ERR_INVALID;
    }
    *eq = '\0';
    const char* value = eq + 1;
    if (strcmp(item, "defect") == 0) {
      const int d = parse_defect(value);
      if (d == -2) {
        snprintf(msg, msg_size, "unknown defect '%s' (none, skip_rescale, truncate_p)", value);
        return ATTNCHECK_ERR_INVALID;
      }
      defect = d;
    } else if (strcmp(item, "tile_k") == 0) {
      const int t = atoi(value);
      if (t < 1 || t > 4096) {
        snprintf(msg, msg_size, "tile_k=%s: use 1..4096", value);
        return ATTNCHECK_ERR_INVALID;
      }
      tile_k = t;
    } else {
      snprintf(msg, msg_size, "unknown option '%s' (keys: defect, tile_k)", item);
      return ATTNCHECK_ERR_INVALID;
    }
  }
  /* The environment's defect is read per call, but a name it cannot be is refused here, once: per call it made every
     check a kernel fault, saved as findings, and the run read as "a property failed" (exit 1, not 2). */
  const char* env_defect = getenv("ATTNCHECK_EXAMPLE_DEFECT");
  if (defect == DEFECT_FROM_ENV && parse_defect(env_defect) == -2) {
    snprintf(msg, msg_size, "ATTNCHECK_EXAMPLE_DEFECT='%s': unknown defect (none, skip_rescale, truncate_p)",
             env_defect);
    return ATTNCHECK_ERR_INVALID;
  }
  g_defect = defect;
  g_tile_k = tile_k;
  return ATTNCHECK_OK;
}

/* ---- the kernel ---------------------------------------------------------------------------------------- */
static int example_forward(void* self, const attncheck_forward_args* a, char* msg, size_t msg_size) {
  (void)self;
  const attncheck_problem* p = &a->problem;
  if (a->struct_size < sizeof *a || p->input_format != ATTNCHECK_FORMAT_BF16 || p->output_format != ATTNCHECK_FORMAT_BF16) {
    snprintf(msg, msg_size, "expects ABI 1.0 arguments, bf16 inputs and bf16 output");
    return ATTNCHECK_ERR_INVALID;
  }
  int defect = g_defect;
  if (defect == DEFECT_FROM_ENV) {
    defect = parse_defect(getenv("ATTNCHECK_EXAMPLE_DEFECT"));
    if (defect == -2) {
      snprintf(msg, msg_size, "ATTNCHECK_EXAMPLE_DEFECT: unknown defect (none, skip_rescale, truncate_p)");
      return ATTNCHECK_ERR_INVALID;
    }
  }
  const int d = p->head_dim, group = p->heads_q / p->heads_kv, tile = g_tile_k;
  float* acc = malloc(sizeof(float) * (size_t)d);
  float* s = malloc(sizeof(float) * (size_t)tile);
  if (!acc || !s) {
    free(acc);
    free(s);
    snprintf(msg, msg_size, "out of memory");
    return ATTNCHECK_ERR_NO_MEMORY;
  }
  const uint16_t* Q = a->q.data;
  const uint16_t* K = a->k.data;
  const uint16_t* V = a->v.data;
  const uint8_t* M = a->mask.data;
  const float* B = a->bias.data;
  uint16_t* O = a->o.data;
  float* L = a->lse.data;
  const int64_t* qs = a->q.stride; /* strides in elements, outermost first */
  const int64_t* ks = a->k.stride;
  const int64_t* vs = a->v.stride;
  const int64_t* ms = a->mask.stride;
  const int64_t* bs = a->bias.stride;
  const int64_t* os = a->o.stride;
  const int64_t* ls = a->lse.stride;

  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads_q; ++h)
      for (int i = 0; i < p->n_q; ++i) {
        const int hk = h / group; /* GQA: query head h reads kv head h / group */
        const uint16_t* q = Q + b * qs[0] + h * qs[1] + i * qs[2];
        float m = -INFINITY, l = 0.0f;
        for (int c = 0; c < d; ++c) acc[c] = 0.0f;

        for (int j0 = 0; j0 < p->n_k; j0 += tile) {
          const int jn = (p->n_k - j0 < tile) ? p->n_k - j0 : tile;
          /* step 1: scores of this tile, s_j = scale * (q . k_j) + bias_ij; hidden keys get -inf */
          float m_tile = -INFINITY;
          for (int t = 0; t < jn; ++t) {
            const int j = j0 + t;
            const int hidden = (p->causal && j > i + p->n_k - p->n_q) ||
                               (p->has_mask && !M[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]]);
            if (hidden) {
              s[t] = -INFINITY;
              continue;
            }
            const uint16_t* k = K + b * ks[0] + hk * ks[1] + j * ks[2];
            float dot = 0.0f;
            for (int c = 0; c < d; ++c) dot += bf16_to_float(q[c * qs[3]]) * bf16_to_float(k[c * ks[3]]);
            s[t] = p->scale * dot;
            if (p->has_bias) s[t] += B[b * bs[0] + h * bs[1] + i * bs[2] + j * bs[3]];
            if (s[t] > m_tile) m_tile = s[t];
          }
          /* step 2: the new running max */
          const float m_new = (m_tile > m) ? m_tile : m;
          if (m_new == -INFINITY) continue; /* nothing visible yet */
          /* step 3: rescale what was accumulated under the old max (exp(-inf) = 0 on the first tile) */
          if (defect != DEFECT_SKIP_RESCALE) {
            const float r = expf(m - m_new);
            l *= r;
            for (int c = 0; c < d; ++c) acc[c] *= r;
          }
          m = m_new;
          /* step 4: p_j = exp(s_j - m) into the row sum (fp32); p̄_j = bf16(p_j) into the accumulator */
          for (int t = 0; t < jn; ++t) {
            if (s[t] == -INFINITY) continue;
            const float pj = expf(s[t] - m);
            l += pj;
            const float pbar = (defect == DEFECT_TRUNCATE_P) ? truncate_to_bf16(pj) : bf16_to_float(float_to_bf16(pj));
            const uint16_t* v = V + b * vs[0] + hk * vs[1] + (j0 + t) * vs[2];
            for (int c = 0; c < d; ++c) acc[c] += pbar * bf16_to_float(v[c * vs[3]]);
          }
        }
        /* step 5: normalise once, round once to bf16; a row that saw no key is O = 0, LSE = -inf */
        uint16_t* o = O + b * os[0] + h * os[1] + i * os[2];
        float* lse = L + b * ls[0] + h * ls[1] + i * ls[2];
        if (m == -INFINITY) {
          for (int c = 0; c < d; ++c) o[c * os[3]] = 0;
          *lse = -INFINITY;
        } else {
          for (int c = 0; c < d; ++c) o[c * os[3]] = float_to_bf16(acc[c] / l);
          *lse = m + logf(l);
        }
      }
  free(acc);
  free(s);
  return ATTNCHECK_OK;
}

/* Backward (kernel `example_bwd`: the same forward plus this), FlashAttention-2 style: P is recomputed from
 * the forward's LSE rather than stored. All sums in fp32, in index order; each gradient is rounded once to
 * bf16 at the end (dK, dV after summing the query heads of a GQA group in fp32).
 *   step 6: delta_i = sum_c dO_ic O_ic
 *   step 7: p_ij = exp(s_ij - LSE_i); dV_j += p_ij dO_i; dP_ij = dO_i . v_j; dS_ij = p_ij (dP_ij - delta_i)
 *   step 8: dQ_i = scale sum_j dS_ij k_j;  dK_j = scale sum_i dS_ij q_i  */
static int example_backward(void* self, const attncheck_backward_args* a, char* msg, size_t msg_size) {
  (void)self;
  const attncheck_problem* p = &a->problem;
  if (a->struct_size < sizeof *a || p->input_format != ATTNCHECK_FORMAT_BF16 || p->output_format != ATTNCHECK_FORMAT_BF16) {
    snprintf(msg, msg_size, "expects ABI 1.0 arguments, bf16 inputs and bf16 output");
    return ATTNCHECK_ERR_INVALID;
  }
  const int d = p->head_dim, nk = p->n_k, group = p->heads_q / p->heads_kv;
  float* dq = malloc(sizeof(float) * (size_t)d);
  float* dk = malloc(sizeof(float) * (size_t)nk * (size_t)d);
  float* dv = malloc(sizeof(float) * (size_t)nk * (size_t)d);
  if (!dq || !dk || !dv) {
    free(dq), free(dk), free(dv);
    snprintf(msg, msg_size, "out of memory");
    return ATTNCHECK_ERR_NO_MEMORY;
  }
#define AT4(t, T, i0, i1, i2, i3) (((T*)(t).data)[(i0) * (t).stride[0] + (i1) * (t).stride[1] + (i2) * (t).stride[2] + (i3) * (t).stride[3]])
#define AT3(t, T, i0, i1, i2) (((T*)(t).data)[(i0) * (t).stride[0] + (i1) * (t).stride[1] + (i2) * (t).stride[2]])
  for (int b = 0; b < p->batch; ++b)
    for (int hk = 0; hk < p->heads_kv; ++hk) {
      for (int x = 0; x < nk * d; ++x) dk[x] = dv[x] = 0.0f;
      for (int h = hk * group; h < (hk + 1) * group; ++h)
        for (int i = 0; i < p->n_q; ++i) {
          /* step 6 */
          float delta = 0.0f;
          for (int c = 0; c < d; ++c)
            delta += bf16_to_float(AT4(a->d_o, uint16_t, b, h, i, c)) * bf16_to_float(AT4(a->o, uint16_t, b, h, i, c));
          AT3(a->delta, float, b, h, i) = delta;
          const float lse = AT3(a->lse, float, b, h, i);
          for (int c = 0; c < d; ++c) dq[c] = 0.0f;
          for (int j = 0; j < nk && lse != -INFINITY; ++j) {
            if ((p->causal && j > i + nk - p->n_q) || (p->has_mask && !AT4(a->mask, uint8_t, b, h, i, j))) continue;
            /* step 7 */
            float dot = 0.0f, dp = 0.0f;
            for (int c = 0; c < d; ++c) dot += bf16_to_float(AT4(a->q, uint16_t, b, h, i, c)) * bf16_to_float(AT4(a->k, uint16_t, b, hk, j, c));
            float s = p->scale * dot;
            if (p->has_bias) s += AT4(a->bias, float, b, h, i, j);
            const float pij = expf(s - lse);
            for (int c = 0; c < d; ++c) {
              const float d_o = bf16_to_float(AT4(a->d_o, uint16_t, b, h, i, c));
              dv[j * d + c] += pij * d_o;
              dp += d_o * bf16_to_float(AT4(a->v, uint16_t, b, hk, j, c));
            }
            const float ds = pij * (dp - delta);
            /* step 8 (sums; the scale comes at the end) */
            for (int c = 0; c < d; ++c) {
              dq[c] += ds * bf16_to_float(AT4(a->k, uint16_t, b, hk, j, c));
              dk[j * d + c] += ds * bf16_to_float(AT4(a->q, uint16_t, b, h, i, c));
            }
          }
          for (int c = 0; c < d; ++c) AT4(a->dq, uint16_t, b, h, i, c) = float_to_bf16(p->scale * dq[c]);
        }
      for (int j = 0; j < nk; ++j)
        for (int c = 0; c < d; ++c) {
          AT4(a->dk, uint16_t, b, hk, j, c) = float_to_bf16(p->scale * dk[j * d + c]);
          AT4(a->dv, uint16_t, b, hk, j, c) = float_to_bf16(dv[j * d + c]);
        }
    }
#undef AT4
#undef AT3
  free(dq), free(dk), free(dv);
  return ATTNCHECK_OK;
}

/* ---- the table attncheck reads ------------------------------------------------------------------------- */
static const attncheck_kernel_desc kKernels[] = {
    {
        .struct_size = sizeof(attncheck_kernel_desc),
        .name = "example",
        .summary = "plain-C flash-attention forward (fp32 online softmax, bf16 p-bar into PV, bf16 in/out); "
                   "defects via ATTNCHECK_EXAMPLE_DEFECT",
        .caps = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_MASK | ATTNCHECK_CAP_BIAS | ATTNCHECK_CAP_GQA,
        .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16),
        .output_format = ATTNCHECK_FORMAT_BF16,
        .forward = example_forward,
    },
    {
        /* One library may export several kernels: the same forward with a backward pass. */
        .struct_size = sizeof(attncheck_kernel_desc),
        .name = "example_bwd",
        .summary = "the example forward plus a plain-C FlashAttention-2 backward (fp32 sums, P from LSE)",
        .caps = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_MASK | ATTNCHECK_CAP_BIAS | ATTNCHECK_CAP_GQA,
        .input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16),
        .output_format = ATTNCHECK_FORMAT_BF16,
        .forward = example_forward,
        .backward = example_backward,
    },
};

static const attncheck_plugin kPlugin = {
    .struct_size = sizeof(attncheck_plugin),
    .abi_major = ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR,
    .abi_minor = ATTNCHECK_PLUGIN_ABI_VERSION_MINOR,
    .library_name = "example",
    .n_kernels = sizeof kKernels / sizeof kKernels[0],
    .kernels = kKernels,
    .init = example_init,
};

ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }

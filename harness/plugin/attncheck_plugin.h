/* attncheck_plugin.h — the C ABI through which attncheck tests an external attention kernel.
 *
 * This is the one public header of attncheck. Plain C99 (also valid C++), no attncheck or C++ types cross
 * the boundary. A plugin is a shared library (.so) that exports one symbol:
 *
 *     const attncheck_plugin* attncheck_plugin_v1(void);
 *
 * returning a table that lives as long as the library (static storage). The table lists one or more
 * kernels; attncheck registers each as `plugin:<name>` and runs its properties on it:
 *
 *     attncheck check --plugin ./libmykernel.so -k plugin:mykernel
 *
 * Versioning: ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR changes only when a struct below changes incompatibly
 * (the symbol name carries the major: a v2 ABI would export attncheck_plugin_v2). MINOR grows when fields
 * are appended to the end of a struct; every struct that can grow starts with `struct_size`, which the
 * writer of the struct sets to sizeof(struct) as it was compiled, so either side can tell which fields exist.
 * attncheck rejects a table whose abi_major differs from its own and accepts any abi_minor. A minor may also
 * define new ATTNCHECK_CAP_* bits (1.1 added ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT); a build refuses a kernel that
 * sets a cap bit it does not know, since ignoring it would run the kernel under rules it asked not to be held to.
 *
 * Data layout. Every tensor is passed as an attncheck_tensor: a pointer, a storage format, a shape and
 * strides counted in ELEMENTS (not bytes). Shapes:
 *     Q, O, dO, dQ     [batch][heads_q ][n_q][head_dim]
 *     K, V, dK, dV     [batch][heads_kv][n_k][head_dim]
 *     LSE, delta       [batch][heads_q ][n_q]            (fp32)
 *     keep-mask        [batch][heads_q ][n_q][n_k]       (uint8: 1 = keep)
 *     bias             [batch][heads_q ][n_q][n_k]       (fp32, added to the scaled scores)
 * Element (b, h, i, c) of a rank-4 tensor t sits at ((T*)t.data)[b*t.stride[0] + h*t.stride[1] +
 * i*t.stride[2] + c*t.stride[3]]. attncheck may pad rows (strides larger than the packed ones) to check that
 * a kernel honours strides; it never makes strides negative or overlapping.
 *
 * Semantics (the reference attncheck compares with, computed in fp64 on the inputs exactly as stored):
 *     s_ij = scale * (q_i . k_j) + bias_ij        (bias only when has_bias)
 *     key j is visible to query i iff mask_ij != 0 (when has_mask) and, when causal, j <= i + n_k - n_q
 *       (causal is BOTTOM-RIGHT aligned as in FlashAttention: the last query sees every key)
 *     P = softmax over visible keys, O = P V, LSE_i = log(sum_j exp(s_ij)) (natural log)
 *     query head h reads kv head h / (heads_q / heads_kv) (GQA / MQA)
 *     a row with no visible key has O = 0 and LSE = -inf (and zero gradients)
 *     backward: delta_i = sum_c dO_ic O_ic; dS = P o (dO V^T - delta); dQ = scale dS K; dK = scale dS^T Q and
 *       dV = P^T dO, each summed over the query heads of a GQA group.
 *
 * Threading and isolation: attncheck calls a kernel from one thread at a time. By default each call runs in
 * a forked child process with the buffers in shared memory, so a crash, a hang (per-call time limit) or a
 * write outside the outputs is reported as a finding about the kernel rather than killing the harness.
 * Consequences for plugin authors: do not rely on state written during a call surviving to the next call;
 * `init` runs once in the harness process itself (keep it small: it is not isolated).
 *
 * Build a plugin:  cc -O2 -fPIC -shared -I<attncheck>/harness/plugin my_kernel.c -o libmykernel.so
 * Example:         harness/plugin/example/example_plugin.c (a plain-C flash-attention forward).
 */
#ifndef ATTNCHECK_PLUGIN_H
#define ATTNCHECK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR 1
#define ATTNCHECK_PLUGIN_ABI_VERSION_MINOR 1
#define ATTNCHECK_PLUGIN_ENTRY_SYMBOL "attncheck_plugin_v1"

#if defined(_WIN32)
#define ATTNCHECK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTNCHECK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status codes: what every plugin function returns --------------------------------------------------- */
typedef enum attncheck_status {
  ATTNCHECK_OK = 0,
  ATTNCHECK_ERR_UNSUPPORTED = 1, /* this problem is outside what the kernel does: attncheck SKIPS it (no finding) */
  ATTNCHECK_ERR_INVALID = 2,     /* the kernel judged the arguments invalid: reported as a finding */
  ATTNCHECK_ERR_INTERNAL = 3,    /* anything else that went wrong inside the kernel: reported as a finding */
  ATTNCHECK_ERR_DEVICE = 4,      /* a device (CUDA, ...) call failed: reported as a finding */
  ATTNCHECK_ERR_NO_MEMORY = 5    /* allocation failed: reported as a finding */
} attncheck_status;

/* Every call receives a message buffer (msg, msg_size >= 256); on a non-OK status the plugin should write a
 * NUL-terminated one-line reason into it (attncheck truncates and terminates it regardless). */

/* ---- storage formats ------------------------------------------------------------------------------------ *
 * Values are IEEE-style bit patterns, round-to-nearest-even when attncheck produces them:
 *   BF16 (uint16: 1-8-7), FP16 (uint16: 1-5-10), FP32 (float), E4M3 (uint8, OCP FP8: no infinity, 0x7F/0xFF
 *   are NaN, max 448), E5M2 (uint8, OCP FP8 with infinities, max 57344). MASK is uint8 (keep = nonzero).
 * Inputs Q, K, V, dO come in the problem's input_format; outputs O, dQ, dK, dV are written in the kernel's
 * declared output_format; LSE, delta and bias are always FP32. BF16 is the format attncheck tests first;
 * FP16 and the two FP8 formats are declared so that plugins can announce them. */
typedef enum attncheck_format {
  ATTNCHECK_FORMAT_FP32 = 1,
  ATTNCHECK_FORMAT_BF16 = 2,
  ATTNCHECK_FORMAT_FP16 = 3,
  ATTNCHECK_FORMAT_E4M3 = 4,
  ATTNCHECK_FORMAT_E5M2 = 5,
  ATTNCHECK_FORMAT_MASK_U8 = 6
} attncheck_format;

/* Bit for a format in attncheck_kernel_desc.input_formats. */
#define ATTNCHECK_FORMAT_BIT(f) (1u << (unsigned)(f))

/* ---- tensors -------------------------------------------------------------------------------------------- */
typedef struct attncheck_tensor {
  void* data;         /* NULL when the tensor is absent (no mask / no bias); host or device memory (see caps) */
  int32_t format;     /* an attncheck_format */
  int32_t rank;       /* 4 for Q K V O dO dQ dK dV mask bias; 3 for LSE and delta */
  int64_t shape[4];   /* sizes, outermost first; unused trailing entries are 0 */
  int64_t stride[4];  /* in elements, outermost first; stride[rank-1] is 1 */
} attncheck_tensor;

/* ---- the problem ------------------------------------------------------------------------------------------ */
typedef struct attncheck_problem {
  uint32_t struct_size;  /* sizeof(attncheck_problem) as compiled into attncheck */
  int32_t batch;         /* >= 1 */
  int32_t heads_q;       /* query heads, >= 1 */
  int32_t heads_kv;      /* key/value heads, divides heads_q (heads_q / heads_kv query heads share one) */
  int32_t n_q;           /* query rows per head, >= 1 */
  int32_t n_k;           /* key/value rows per head, >= 1 (n_k < n_q happens; causal rows may then be empty) */
  int32_t head_dim;      /* >= 1 */
  float scale;           /* multiplies q.k (usually fp32(1/sqrt(head_dim)), but any positive finite fp32) */
  int32_t causal;        /* nonzero: bottom-right causal mask (see above) */
  int32_t has_mask;      /* nonzero: the keep-mask tensor is present and applies in addition to causal */
  int32_t has_bias;      /* nonzero: the bias tensor is present */
  int32_t input_format;  /* format of Q, K, V, dO */
  int32_t output_format; /* format attncheck expects O, dQ, dK, dV in: the kernel's declared output_format */
} attncheck_problem;

/* ---- call arguments --------------------------------------------------------------------------------------- */
typedef struct attncheck_forward_args {
  uint32_t struct_size;       /* sizeof(attncheck_forward_args) as compiled into attncheck */
  attncheck_problem problem;
  attncheck_tensor q, k, v;   /* inputs, read only */
  attncheck_tensor mask;      /* input, data NULL unless problem.has_mask */
  attncheck_tensor bias;      /* input, data NULL unless problem.has_bias */
  attncheck_tensor o;         /* output, output_format; every element must be written */
  attncheck_tensor lse;       /* output, FP32, natural log; -inf for a row with no visible key */
  void* stream;               /* device kernels: the cudaStream_t to use (NULL = default stream); host: NULL */
  uint64_t seed;              /* per-instance seed: a kernel that needs randomness derives it from this */
} attncheck_forward_args;

typedef struct attncheck_backward_args {
  uint32_t struct_size;       /* sizeof(attncheck_backward_args) as compiled into attncheck */
  attncheck_problem problem;
  attncheck_tensor q, k, v, mask, bias;  /* inputs as in forward */
  attncheck_tensor o, lse;    /* inputs: this kernel's own forward outputs for the same instance */
  attncheck_tensor d_o;       /* input, input_format */
  attncheck_tensor dq, dk, dv;/* outputs, output_format; dK and dV summed over each GQA group */
  attncheck_tensor delta;     /* output, FP32: delta_i = sum_c dO_ic O_ic as the kernel computed it; under
                                 ATTNCHECK_CAP_NO_DELTA not passed (descriptor zeroed, data NULL) */
  void* stream;
  uint64_t seed;
} attncheck_backward_args;

/* ---- capabilities ----------------------------------------------------------------------------------------- */
#define ATTNCHECK_CAP_CAUSAL          (1ull << 0)  /* handles problem.causal */
#define ATTNCHECK_CAP_MASK            (1ull << 1)  /* handles an explicit keep-mask */
#define ATTNCHECK_CAP_BIAS            (1ull << 2)  /* handles an additive bias */
#define ATTNCHECK_CAP_GQA             (1ull << 3)  /* handles heads_kv < heads_q */
#define ATTNCHECK_CAP_DEVICE_POINTERS (1ull << 4)  /* wants device (CUDA) pointers instead of host pointers */
#define ATTNCHECK_CAP_NO_DELTA        (1ull << 5)  /* backward leaves delta unwritten; attncheck derives it */
/* ABI 1.1: the kernel rounds stochastically from a stream seeded by the whole input (as the built-in `stochastic`
 * does), so changing a masked key's values may move other rows by one rounding. masked_value and causal_prefix then
 * allow that one rounding; without this bit they require those rows' bits unchanged. */
#define ATTNCHECK_CAP_ROUNDING_SEEDED_BY_INPUT (1ull << 6)
/* Any other bit is refused when the library loads: it would come from a newer header and ask for something this
 * attncheck does not do. */

typedef struct attncheck_kernel_desc {
  uint32_t struct_size;       /* sizeof(attncheck_kernel_desc) as compiled into the plugin */
  const char* name;           /* [A-Za-z0-9_.-]+, unique within the library; registered as plugin:<name> */
  const char* summary;        /* one line for `attncheck list` (may be NULL) */
  uint64_t caps;              /* ATTNCHECK_CAP_* bits */
  uint32_t input_formats;     /* ATTNCHECK_FORMAT_BIT(...) of every accepted input format */
  int32_t output_format;      /* format the kernel writes O (and dQ, dK, dV) in: BF16, FP16 or FP32 */
  int32_t max_head_dim;       /* 0 = any */
  int32_t n_head_dims;        /* 0 = any head_dim up to max_head_dim; else only head_dims[0..n-1] */
  const int32_t* head_dims;
  void* self;                 /* passed back unchanged as the first argument of the functions below */

  /* Optional (may be NULL): finer capability query. Return ATTNCHECK_OK when the kernel can run the problem,
   * ATTNCHECK_ERR_UNSUPPORTED (and a reason in msg) when not. Called before each call, isolated like it. */
  int (*supports)(void* self, const attncheck_problem* problem, int backward, char* msg, size_t msg_size);
  /* Required: forward pass. Writes every element of o and lse. */
  int (*forward)(void* self, const attncheck_forward_args* args, char* msg, size_t msg_size);
  /* Optional (NULL = forward only): backward pass. Writes every element of dq, dk, dv (and delta unless
   * ATTNCHECK_CAP_NO_DELTA). */
  int (*backward)(void* self, const attncheck_backward_args* args, char* msg, size_t msg_size);
} attncheck_kernel_desc;

/* ---- the library table ------------------------------------------------------------------------------------ */
typedef struct attncheck_plugin {
  uint32_t struct_size;       /* sizeof(attncheck_plugin) as compiled into the plugin */
  uint32_t abi_major;         /* ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR the plugin was compiled with */
  uint32_t abi_minor;         /* ATTNCHECK_PLUGIN_ABI_VERSION_MINOR the plugin was compiled with */
  const char* library_name;   /* for messages, e.g. "example" */
  int32_t n_kernels;          /* >= 1 */
  const attncheck_kernel_desc* kernels;  /* n_kernels entries, each the first's struct_size bytes apart (the
                                          * stride is the plugin's sizeof, so a later minor's larger entries load) */

  /* Optional (may be NULL): called once after loading, in the harness process, with the option string the
   * user gave (--plugin PATH:OPTIONS, or "" when none). Returns ATTNCHECK_OK or an error with a message. */
  int (*init)(const char* options, char* msg, size_t msg_size);
} attncheck_plugin;

/* The entry point every plugin exports (C linkage, default visibility). */
typedef const attncheck_plugin* (*attncheck_plugin_entry_fn)(void);
ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTNCHECK_PLUGIN_H */

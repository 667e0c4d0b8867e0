// cudnn_backend.cpp — run-time loading of libcudnn, checked descriptors, the operation-graph builder and the
// heuristics → execution-plan search (see cudnn_backend.h). Every step can be traced (trace_stream()).
#include "kernels/cuda/cudnn_backend.h"

#include <dlfcn.h>

#include <cstdarg>
#include <mutex>

#include "harness/problem.h"

#ifndef ATTNCHECK_CUDNN_LIBRARY
#define ATTNCHECK_CUDNN_LIBRARY "libcudnn.so.9"
#endif

namespace attncheck::cuda::cudnn {

const Api* load_api(std::string* why) {
  static std::once_flag once;
  static Api table;
  static const Api* loaded = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    // The plain soname first (LD_LIBRARY_PATH, the system's copy), then the library found at configure time.
    void* lib = nullptr;
    for (const char* name : {"libcudnn.so.9", ATTNCHECK_CUDNN_LIBRARY})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (!lib) {
      const char* e = dlerror();
      failure = std::string("cannot load libcudnn.so.9 (") + (e ? e : "?") + "); set LD_LIBRARY_PATH to cuDNN 9's lib";
      return;
    }
    auto sym = [&](const char* n) -> void* {
      void* p = dlsym(lib, n);
      if (!p && failure.empty()) failure = std::string("libcudnn has no symbol ") + n;
      return p;
    };
#define ATTN_RESOLVE(field, name) table.field = reinterpret_cast<decltype(table.field)>(sym(name))
    ATTN_RESOLVE(get_version, "cudnnGetVersion");
    ATTN_RESOLVE(get_error_string, "cudnnGetErrorString");
    ATTN_RESOLVE(get_last_error_string, "cudnnGetLastErrorString");
    ATTN_RESOLVE(create, "cudnnCreate");
    ATTN_RESOLVE(destroy, "cudnnDestroy");
    ATTN_RESOLVE(set_stream, "cudnnSetStream");
    ATTN_RESOLVE(create_descriptor, "cudnnBackendCreateDescriptor");
    ATTN_RESOLVE(destroy_descriptor, "cudnnBackendDestroyDescriptor");
    ATTN_RESOLVE(finalize, "cudnnBackendFinalize");
    ATTN_RESOLVE(set_attribute, "cudnnBackendSetAttribute");
    ATTN_RESOLVE(get_attribute, "cudnnBackendGetAttribute");
    ATTN_RESOLVE(execute, "cudnnBackendExecute");
#undef ATTN_RESOLVE
    if (failure.empty()) loaded = &table;
  });
  if (!loaded && why) *why = failure;
  return loaded;
}

const Api& api() {
  std::string why;
  const Api* a = load_api(&why);
  if (!a) throw Error("cuDNN: " + why);
  return *a;
}

std::FILE*& trace_stream() {
  static std::FILE* out = nullptr;
  return out;
}

void trace(const char* fmt, ...) {
  std::FILE* out = trace_stream();
  if (!out) return;
  std::fputs("[cudnn] ", out);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(out, fmt, ap);
  va_end(ap);
  std::fputc('\n', out);
  std::fflush(out);
}

void check(cudnnStatus_t st, const std::string& what, bool may_decline) {
  if (st == CUDNN_STATUS_SUCCESS) {
    trace("ok   %s", what.c_str());
    return;
  }
  const Api& a = api();
  char last[1024] = {0};
  a.get_last_error_string(last, sizeof last);
  const std::string msg = "cuDNN " + what + " failed: " + a.get_error_string(st) + " (" + std::to_string(int(st)) +
                          ")" + (last[0] ? std::string("; last error: ") + last : std::string());
  trace("FAIL %s", msg.c_str());
  if (may_decline && CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) throw Unsupported(msg);
  throw Error(msg);
}

Desc::Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
  check(api().create_descriptor(type, &d_), "cudnnBackendCreateDescriptor(" + name_ + ")");
}

Desc::~Desc() {
  if (d_) api().destroy_descriptor(d_);
}

void Desc::set(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type, int64_t n,
               const void* values) {
  check(api().set_attribute(d_, attr, type, n, values), "SetAttribute(" + name_ + ", " + attr_name + ")");
}

void Desc::finalize(bool may_decline) { check(api().finalize(d_), "Finalize(" + name_ + ")", may_decline); }

Dims packed_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

namespace {

std::string list(const Dims& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

const char* type_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "fp32";
    case CUDNN_DATA_BFLOAT16: return "bf16";
    case CUDNN_DATA_INT32: return "int32";
    case CUDNN_DATA_BOOLEAN: return "bool";
    default: return "other";
  }
}

}  // namespace

const std::string& GraphBuilder::name_of(cudnnBackendDescriptor_t d) const {
  for (const auto& k : keep_)
    if (k->get() == d) return k->name();
  static const std::string unknown = "?";
  return unknown;
}

cudnnBackendDescriptor_t GraphBuilder::tensor(const std::string& name, int64_t uid, cudnnDataType_t type,
                                              const Dims& dims, const Dims& strides, bool is_virtual, bool by_value) {
  trace("tensor %s uid=%lld %s dims=%s strides=%s%s%s", name.c_str(), (long long)uid, type_name(type),
        list(dims).c_str(), list(strides).c_str(), is_virtual ? " virtual" : "", by_value ? " by-value" : "");
  auto d = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
  const int64_t alignment = 16;  // cudaMalloc'd buffers are 256-byte aligned; by-value scalars are host values
  const bool v = is_virtual, bv = by_value;
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()), dims.data());
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()), strides.data());
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  ATTN_SET(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  if (by_value) ATTN_SET(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
  d->finalize();
  keep_.push_back(std::move(d));
  return keep_.back()->get();
}

cudnnBackendDescriptor_t GraphBuilder::virt(const std::string& name, cudnnDataType_t type, const Dims& dims,
                                            const Dims& strides) {
  return tensor(name, next_uid_++, type, dims, strides.empty() ? packed_strides(dims) : strides, true);
}

void GraphBuilder::add_op(std::unique_ptr<Desc> op, std::unique_ptr<Desc> desc) {
  op->finalize();
  ops_.push_back(op->get());
  if (desc) keep_.push_back(std::move(desc));
  keep_.push_back(std::move(op));
}

cudnnBackendDescriptor_t GraphBuilder::scalar(const std::string& name, int64_t uid, cudnnDataType_t type) {
  return tensor(name, uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
}

void GraphBuilder::matmul(const std::string& name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                          cudnnBackendDescriptor_t c) {
  trace("op matmul %s: %s x %s -> %s", name.c_str(), name_of(a).c_str(), name_of(b).c_str(), name_of(c).c_str());
  auto desc = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul desc " + name);
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;  // fp32 accumulation, as every flash kernel
  ATTN_SET(*desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  desc->finalize();
  auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op " + name);
  cudnnBackendDescriptor_t md = desc->get();
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md);
  add_op(std::move(op), std::move(desc));
}

void GraphBuilder::pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                             cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                             cudnnBackendDescriptor_t t, int64_t axis) {
  trace("op pointwise %s mode=%d prec=%s: x=%s b=%s t=%s -> %s", name.c_str(), int(mode), type_name(prec),
        name_of(x).c_str(), b ? name_of(b).c_str() : "-", t ? name_of(t).c_str() : "-", name_of(y).c_str());
  auto desc = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise desc " + name);
  ATTN_SET(*desc, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  ATTN_SET(*desc, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (axis >= 0) ATTN_SET(*desc, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  desc->finalize();
  auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op " + name);
  cudnnBackendDescriptor_t pd = desc->get();
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pd);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  if (b) ATTN_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
  if (t) ATTN_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  add_op(std::move(op), std::move(desc));
}

void GraphBuilder::reduction(const std::string& name, cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x,
                             cudnnBackendDescriptor_t y) {
  trace("op reduction %s op=%d: %s -> %s", name.c_str(), int(red), name_of(x).c_str(), name_of(y).c_str());
  auto desc = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction desc " + name);
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  ATTN_SET(*desc, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red);
  ATTN_SET(*desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  desc->finalize();
  auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op " + name);
  cudnnBackendDescriptor_t rd = desc->get();
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
  add_op(std::move(op), std::move(desc));
}

void GraphBuilder::reshape(const std::string& name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  trace("op reshape %s: %s -> %s", name.c_str(), name_of(x).c_str(), name_of(y).c_str());
  auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape op " + name);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  ATTN_SET(*op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  add_op(std::move(op), nullptr);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the HANDLE attributes are deprecated, still honoured
Plan GraphBuilder::build(cudnnHandle_t handle) {
  Plan p;
  auto graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph " + name_);
  ATTN_SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()), ops_.data());
  ATTN_SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  graph->finalize(true);
  const Api& a = api();
  int64_t engines = 0, got = 0;
  if (a.get_attribute(graph->get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &got,
                      &engines) == CUDNN_STATUS_SUCCESS)
    trace("graph %s: %zu operations, %lld engines in cuDNN", name_.c_str(), ops_.size(), (long long)engines);
  cudnnBackendDescriptor_t gd = graph->get();
  std::string declined;  // why each configuration was refused, for the Unsupported message
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK";
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, std::string("heuristics mode ") + mode_name);
    ATTN_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd);
    ATTN_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    try {
      heur.finalize(true);
    } catch (const Unsupported& e) {
      declined += std::string("; heuristics ") + mode_name + ": " + e.what();
      continue;
    }
    int64_t count = 0;
    check(a.get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
          std::string("GetAttribute(heuristics ") + mode_name + ", CUDNN_ATTR_ENGINEHEUR_RESULTS count)");
    trace("heuristics %s: %lld engine configurations", mode_name, (long long)count);
    std::vector<std::unique_ptr<Desc>> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config " + std::to_string(i)));
      raw.push_back(cfgs.back()->get());
    }
    int64_t returned = 0;
    if (count > 0)
      check(a.get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                            raw.data()),
            std::string("GetAttribute(heuristics ") + mode_name + ", CUDNN_ATTR_ENGINEHEUR_RESULTS)");
    for (int64_t i = 0; i < returned; ++i) {
      int64_t index = -1;
      {
        Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine of config " + std::to_string(i));
        cudnnBackendDescriptor_t ed = engine.get();
        int64_t n = 0;
        if (a.get_attribute(raw[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &ed) ==
            CUDNN_STATUS_SUCCESS)
          a.get_attribute(ed, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
      }
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                         "execution plan (engine " + std::to_string(index) + ")");
      ATTN_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      ATTN_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      try {
        plan->finalize(true);
      } catch (const Error& e) {  // any engine may refuse; the next one is tried
        declined += "; engine " + std::to_string(index) + ": " + e.what();
        continue;
      }
      int64_t n = 0;
      check(a.get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                            &p.workspace_bytes),
            "GetAttribute(" + plan->name() + ", CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
      p.engine_index = index;
      trace("plan: heuristics %s config %lld, engine %lld, workspace %lld bytes", mode_name, (long long)i,
            (long long)index, (long long)p.workspace_bytes);
      if (trace_stream()) {
        char json[4096] = {0};
        if (a.get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                            sizeof json - 1, &n, json) == CUDNN_STATUS_SUCCESS)
          trace("plan json: %.600s", json);
      }
      p.plan = std::move(plan);
      for (auto& c : cfgs) p.keep.push_back(std::move(c));
      for (auto& k : keep_) p.keep.push_back(std::move(k));
      p.keep.push_back(std::move(graph));
      return p;
    }
  }
  throw Unsupported("cuDNN: no engine runs graph " + name_ + declined);
}
#pragma GCC diagnostic pop

void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
             void* workspace) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  ATTN_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data());
  ATTN_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data());
  ATTN_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  check(api().execute(handle, plan.plan->get(), pack.get()), "cudnnBackendExecute(" + plan.plan->name() + ")");
}

}  // namespace attncheck::cuda::cudnn

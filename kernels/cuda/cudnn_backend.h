// cudnn_backend.h — the thin, checked layer over cuDNN's backend API that cudnn_sdpa.cpp builds graphs with:
// the run-time loaded library (dlopen, so no program needs libcudnn to start), an owning descriptor type, and
// an operation-graph builder that names every tensor and operation so that every failure message says which
// descriptor and which attribute cuDNN refused, with its status and cudnnGetLastErrorString.
//
// Invariants: every descriptor a graph or plan refers to is owned by the same GraphBuilder (or Plan) and
// outlives it; statuses of cuDNN's NOT_SUPPORTED class (3000–3999) at heuristics or plan finalisation throw
// attncheck::Unsupported (an engine declining a shape is not a bug), every other failure attncheck::Error.
// Internal to kernels/cuda (cudnn_sdpa.cpp and its test); host code only.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace attncheck::cuda::cudnn {

// The entry points attncheck uses, resolved from the loaded library.
struct Api {
  size_t (*get_version)();
  const char* (*get_error_string)(cudnnStatus_t);
  void (*get_last_error_string)(char*, size_t);
  cudnnStatus_t (*create)(cudnnHandle_t*);
  cudnnStatus_t (*destroy)(cudnnHandle_t);
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
  cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t*);
  cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                 int64_t, const void*);
  cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                 int64_t, int64_t*, void*);
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
};

// The loaded API, or nullptr with *why set (library or a symbol missing). Loads once.
const Api* load_api(std::string* why);
const Api& api();  // throws Error when not loadable

std::FILE*& trace_stream();  // where steps are printed (nullptr: quiet)
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Throws (Error, or Unsupported when `may_decline` and the status is of the NOT_SUPPORTED class) unless ok.
void check(cudnnStatus_t st, const std::string& what, bool may_decline = false);

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, std::string name);
  ~Desc();
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& name() const { return name_; }
  // Checked SetAttribute; `attr_name` is the enum's spelling (ATTN_SET passes it).
  void set(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type, int64_t n,
           const void* values);
  void finalize(bool may_decline = false);

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string name_;
};
#define ATTN_SET(desc, attr, type, n, values) (desc).set(attr, #attr, type, n, values)

using Dims = std::vector<int64_t>;
Dims packed_strides(const Dims& dims);  // row-major strides of dims

// A plan ready to execute, with everything it refers to.
struct Plan {
  std::vector<std::unique_ptr<Desc>> keep;  // tensors, operations, graph, engine config
  std::unique_ptr<Desc> plan;
  int64_t workspace_bytes = 0;
  int64_t engine_index = -1;  // cuDNN's global engine index (for the trace and reports)
};

// Builds one operation graph, then a plan for it. Tensor descriptors are referred to by their returned
// raw handles; names are for messages only.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) : name_(std::move(name)) {}
  cudnnBackendDescriptor_t tensor(const std::string& name, int64_t uid, cudnnDataType_t type, const Dims& dims,
                                  const Dims& strides, bool is_virtual = false, bool by_value = false);
  // A virtual intermediate with an automatic uid (>= 1000) and packed strides unless given.
  cudnnBackendDescriptor_t virt(const std::string& name, cudnnDataType_t type, const Dims& dims,
                                const Dims& strides = {});
  // A by-value scalar ([1,1,1,1]); its value is a host pointer in the variant pack.
  cudnnBackendDescriptor_t scalar(const std::string& name, int64_t uid, cudnnDataType_t type);
  void matmul(const std::string& name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c);
  // y = mode(x[, b][, t]); math precision `prec`; axis (GEN_INDEX, the causal offsets) or -1 for none.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t = nullptr,
                 int64_t axis = -1);
  void reduction(const std::string& name, cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y);
  void reshape(const std::string& name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // Finalises the graph, asks heuristics (mode A, then the fallback list) and returns the first engine
  // configuration whose plan finalises. Throws Unsupported when no engine takes the graph.
  Plan build(cudnnHandle_t handle);

 private:
  const std::string& name_of(cudnnBackendDescriptor_t d) const;
  std::string name_;
  // Finalises an operation, appends it to the graph and keeps it (and its op descriptor, if any) alive.
  void add_op(std::unique_ptr<Desc> op, std::unique_ptr<Desc> desc);
  std::vector<std::unique_ptr<Desc>> keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_uid_ = 1000;
};

// Runs a plan: uids[i] is bound to ptrs[i] (device pointers, or host pointers for by-value scalars).
void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& ptrs, void* workspace);

}  // namespace attncheck::cuda::cudnn

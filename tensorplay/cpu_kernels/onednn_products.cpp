// Host products through oneDNN (onednn_products.h).
//
// Which oneDNN entry point runs is chosen per shape class by measurement (bench_gemm_shapes, one
// thread, AVX-512): dnnl_sgemm is fastest on plain and transposed-A products (the input and weight
// gradients of a linear layer: 16x1024x1024 NN at 100 GFLOP/s against 80 for the matmul
// primitive), while the matmul primitive is twice as fast on A B^T (a linear layer's forward:
// 79 against 35) and runs a batch (attention) as one call. Matmul primitives are created once per
// shape and kept in a small per-thread cache, so threads never share or lock one. Creating one
// goes through oneDNN's process-wide primitive cache, whose hand-offs between threads run in
// code built without ThreadSanitizer: creations are serialised by one mutex of ours (they happen
// once per shape and thread, never on the step's path), so that the order between them is one
// every tool can see.
//
// Threads: oneDNN runs on OpenMP here; omp_set_num_threads is per calling thread, so each stage's
// thread sets its own count (cpu_threads.h) before each call and stages never serialise.
#include "tensorplay/cpu_kernels/onednn_products.h"

#include <omp.h>

#include <dnnl.hpp>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/cpu_kernels/vector_kernels.h"

namespace tensorplay::cpu_kernels {
namespace {

using dnnl::memory;

void apply_thread_count() {
  vec::active();  // the first call chooses the dispatch target and oneDNN's ISA ceiling
  int n = get_num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

// What identifies a matmul primitive: shapes, strides, dtype, and the beta post-op.
struct MatmulKey {
  bool ta, tb, bf16, accumulate, bias;
  float alpha;
  int64_t batch, m, n, k, lda, ldb, ldc, sa, sb, sc;
  bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& key) const {
    size_t h = (key.ta ? 1 : 0) | (key.tb ? 2 : 0) | (key.bf16 ? 4 : 0) | (key.accumulate ? 8 : 0) |
               (key.bias ? 16 : 0);
    h = h * 31u ^ std::hash<float>()(key.alpha);
    for (int64_t v :
         {key.batch, key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.sa, key.sb, key.sc})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

struct Matmul {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias;  // bias: a row [1, 1, n] added to every row of C, when keyed
  bool native = true;          // false: oneDNN offers only its reference kernel for this product
  std::string impl;
};

// Per-thread engine, stream and least-recently-used cache of matmul primitives.
class ThreadMatmuls {
 public:
  static ThreadMatmuls& get() {
    thread_local ThreadMatmuls instance;
    return instance;
  }

  const Matmul& lookup(const MatmulKey& key) {
    auto found = index_.find(key);
    if (found != index_.end()) {
      entries_.splice(entries_.begin(), entries_, found->second);
      return found->second->second;
    }
    {
      static std::mutex creating;  // see the comment at the top
      std::lock_guard lock(creating);
      entries_.emplace_front(key, create(key));
    }
    index_[key] = entries_.begin();
    if (entries_.size() > kCapacity) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return entries_.front().second;
  }

  void run(const Matmul& mm, const void* a, const void* b, void* c, const void* bias = nullptr) {
    memory am(mm.a, engine_, const_cast<void*>(a)), bm(mm.b, engine_, const_cast<void*>(b));
    memory cm(mm.c, engine_, c);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(mm.bias, engine_, const_cast<void*>(bias)));
    mm.primitive.execute(stream_, args);
    stream_.wait();
  }

 private:
  static constexpr size_t kCapacity = 256;

  Matmul create(const MatmulKey& key) const {
    auto dt = key.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    // A broadcast operand (stride 0) is a batch of one; oneDNN broadcasts it over the batch.
    auto desc = [&](int64_t rows, int64_t cols, bool trans, int64_t ld, int64_t stride) {
      memory::dims strides = trans ? memory::dims{stride, 1, ld} : memory::dims{stride, ld, 1};
      int64_t b = stride == 0 ? 1 : key.batch;
      if (b == 1) strides[0] = rows * cols;
      return memory::desc({b, rows, cols}, dt, strides);
    };
    Matmul mm;
    mm.a = desc(key.m, key.k, key.ta, key.lda, key.sa);
    mm.b = desc(key.k, key.n, key.tb, key.ldb, key.sb);
    mm.c = desc(key.m, key.n, false, key.ldc, key.sc);
    dnnl::primitive_attr attr;
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});  // before the sum post-op
    if (key.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    if (key.bias) mm.bias = memory::desc({1, 1, key.n}, dt, {key.n, key.n, 1});
    dnnl::matmul::primitive_desc pd;
    try {
      auto desc = key.bias ? dnnl::matmul::desc(mm.a, mm.b, mm.bias, mm.c)
                           : dnnl::matmul::desc(mm.a, mm.b, mm.c);
      pd = dnnl::matmul::primitive_desc(desc, attr, engine_);
    } catch (const dnnl::error&) {
      if (!key.bf16) throw;
      mm.native = false;  // no bfloat16 kernel below AVX-512 (or under an AVX2 ceiling)
      return mm;
    }
    mm.impl = pd.impl_info_str();
    mm.native = mm.impl.find("ref") == std::string::npos;
    mm.primitive = dnnl::matmul(pd);
    return mm;
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::list<std::pair<MatmulKey, Matmul>> entries_;
  std::unordered_map<MatmulKey, std::list<std::pair<MatmulKey, Matmul>>::iterator, MatmulKeyHash>
      index_;
};

// The matmul primitive takes the products dnnl_sgemm is slow on: A B^T, and batches.
bool use_matmul_primitive(bool ta, bool tb, int64_t batch) { return batch > 1 || (tb && !ta); }

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string("oneDNN ") + what + " failed with status " +
                             std::to_string(static_cast<int>(status)));
}

}  // namespace

void gemm_f32(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb,
              float beta, float* c, int64_t ldc, int64_t sc) {
  apply_thread_count();
  if (use_matmul_primitive(ta, tb, batch) && (beta == 0.0f || beta == 1.0f)) {
    auto& cache = ThreadMatmuls::get();
    MatmulKey key{ta, tb, false, beta == 1.0f, false, alpha, batch, m,
                  n,  k,  lda,   ldb,          ldc,   sa,    sb,    sc};
    cache.run(cache.lookup(key), a, b, c);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    check(dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a + i * sa, lda, b + i * sb,
                     ldb, beta, c + i * sc, ldc),
          "dnnl_sgemm");
  }
}

bool gemm_bf16(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, float alpha,
               const uint16_t* a, int64_t lda, int64_t sa, const uint16_t* b, int64_t ldb,
               int64_t sb, float beta, uint16_t* c, int64_t ldc, int64_t sc) {
  if (beta != 0.0f && beta != 1.0f) return false;
  apply_thread_count();
  auto& cache = ThreadMatmuls::get();
  MatmulKey key{ta, tb, true, beta == 1.0f, false, alpha, batch, m,
                n,  k,  lda,  ldb,          ldc,   sa,    sb,    sc};
  const Matmul& mm = cache.lookup(key);
  if (!mm.native) return false;
  cache.run(mm, a, b, c);
  return true;
}

void linear_f32(int64_t rows, int64_t out, int64_t in, const float* x, const float* weight,
                const float* bias, float* y) {
  apply_thread_count();
  auto& cache = ThreadMatmuls::get();
  MatmulKey key{false, true, false, false, true, 1.0f, 1, rows, out, in, in, in, out, 0, 0, 0};
  cache.run(cache.lookup(key), x, weight, y, bias);
}

const char* gemm_f32_path(bool ta, bool tb, int64_t batch) {
  return use_matmul_primitive(ta, tb, batch) ? "matmul" : "sgemm";
}

}  // namespace tensorplay::cpu_kernels

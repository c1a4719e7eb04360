// Every kernel of the table (tensorplay/core/backend.h) run on CUDA against the CPU kernel on the
// same random data, ggml-style: one case list per kernel group, tolerances stated per check.
// Without a GPU each case WARNs "no CUDA device: skipped" and returns.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

using namespace cuda_test;  // NOLINT(google-build-using-namespace): test helpers

TEST_CASE("cuda: unary kernels and derivatives match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t n = 10007;
  for (tp::UnaryOp op :
       {tp::UnaryOp::Relu, tp::UnaryOp::Gelu, tp::UnaryOp::Tanh, tp::UnaryOp::Exp, tp::UnaryOp::Log,
        tp::UnaryOp::Neg, tp::UnaryOp::Sqrt, tp::UnaryOp::Square, tp::UnaryOp::Sigmoid}) {
    bool positive = op == tp::UnaryOp::Log || op == tp::UnaryOp::Sqrt;
    Pair x = Pair::of(random_values(n, positive ? 0.1f : -4.0f, 4.0f, 2));
    Pair gy = Pair::of(random_values(n, -1, 1, 3));
    Pair y = Pair::zeros(n), gx = Pair::zeros(n);
    cpu_kernels().unary(op, x.h(), y.h(), n);
    gpu_kernels().unary(op, x.d(), y.d(), n);
    std::string name = "unary op " + std::to_string(static_cast<int>(op));
    check_close(y.device, y.host, 1e-5f, 1e-6f, name);
    cpu_kernels().unary_backward(op, x.h(), y.h(), gy.h(), gx.h(), n);
    gpu_kernels().unary_backward(op, x.d(), y.d(), gy.d(), gx.d(), n);
    // GELU': the CPU's fast tanh and the GPU's tanhf differ by a few ulp, and the derivative
    // multiplies an error in tanh by about 10 where gx itself is tiny (|x| near 4).
    check_close(gx.device, gx.host, 1e-5f, op == tp::UnaryOp::Gelu ? 1e-5f : 1e-6f,
                name + " backward");
  }
}

TEST_CASE("cuda: binary kernels broadcast like the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  struct Case {
    tp::Shape a, b;
  };
  std::vector<Case> cases = {
      {{64, 33}, {64, 33}},
      {{64, 33}, {33}},
      {{64, 33}, {64, 1}},
      {{5, 1, 7}, {1, 6, 1}},
      {{3, 4, 5, 6}, {}},
      {{}, {3, 4, 5, 6}},
      {{2, 1, 3, 1, 2, 1, 2, 2}, {3, 2, 2, 3, 1, 2}}};  // rank 8, both sides broadcast
  for (const Case& c : cases) {
    tp::Tensor a = tp::randn(c.a), b = tp::rand_uniform(c.b, 0.5f, 2.0f);
    for (auto [op, f] :
         std::vector<std::pair<const char*, tp::Tensor (*)(const tp::Tensor&, const tp::Tensor&)>>{
             {"add", tp::add}, {"sub", tp::sub}, {"mul", tp::mul}, {"div", tp::div}}) {
      tp::Tensor want = f(a, b);
      tp::Tensor got = f(a.to("cuda:0"), b.to("cuda:0"));
      CHECK(got.shape() == want.shape());
      check_close(got, want, 1e-6f, 0.0f,
                  std::string(op) + " " + tp::to_string(c.a) + " with " + tp::to_string(c.b));
    }
  }
  Pair x = Pair::of(random_values(999, -2, 2, 4));
  Pair out = Pair::zeros(999);
  cpu_kernels().affine(x.h(), out.h(), 999, 1.5f, -0.25f);
  gpu_kernels().affine(x.d(), out.d(), 999, 1.5f, -0.25f);
  check_close(out.device, out.host, 1e-6f, 1e-6f, "affine");  // FMA may round once
}

TEST_CASE("cuda: sum_dim matches the CPU on every layout", "[cuda]") {
  if (skip_without_gpu()) return;
  struct Case {
    int64_t outer, reduce, inner;
  };
  for (Case c : std::vector<Case>{{1, 100000, 1},
                                  {300, 513, 1},
                                  {7, 3, 1},
                                  {4, 200, 129},
                                  {1, 1000, 64},
                                  {64, 1, 33},
                                  {2, 0, 5}}) {
    int64_t n = c.outer * c.reduce * c.inner;
    Pair x = Pair::of(random_values(n, -1, 1, 5));
    Pair out = Pair::zeros(c.outer * c.inner);
    cpu_kernels().sum_dim(x.h(), out.h(), c.outer, c.reduce, c.inner);
    gpu_kernels().sum_dim(x.d(), out.d(), c.outer, c.reduce, c.inner);
    check_close(out.device, out.host, 1e-4f, 1e-5f + 1e-6f * c.reduce,  // order differs
                "sum_dim " + std::to_string(c.outer) + "x" + std::to_string(c.reduce) + "x" +
                    std::to_string(c.inner));
  }
}

TEST_CASE("cuda: gemm and gemm_batched through cuBLAS match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t m = 37, n = 53, k = 29, pad = 3, batch = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
      Pair a = Pair::of(random_values(batch * rows_a * lda, -1, 1, 6));
      Pair b = Pair::of(random_values(rows_b * ldb, -1, 1, 7));  // one B broadcast (stride 0)
      Pair c = Pair::of(random_values(batch * m * ldc, -1, 1, 8));
      std::string name = std::string("gemm ta=") + (ta ? "T" : "N") + " tb=" + (tb ? "T" : "N");
      cpu_kernels().gemm(ta, tb, m, n, k, 0.5f, a.h(), lda, b.h(), ldb, 2.0f, c.h(), ldc);
      gpu_kernels().gemm(ta, tb, m, n, k, 0.5f, a.d(), lda, b.d(), ldb, 2.0f, c.d(), ldc);
      check_close(c.device, c.host, 1e-4f, 1e-4f, name);
      cpu_kernels().gemm_batched(ta, tb, batch, m, n, k, 1.0f, a.h(), lda, rows_a * lda, b.h(), ldb,
                                 0, 0.0f, c.h(), ldc, m * ldc);
      gpu_kernels().gemm_batched(ta, tb, batch, m, n, k, 1.0f, a.d(), lda, rows_a * lda, b.d(), ldb,
                                 0, 0.0f, c.d(), ldc, m * ldc);
      check_close(c.device, c.host, 1e-4f, 1e-4f, name + " batched");
    }
  }
  // k == 0: C = beta * C, and beta == 0 clears C even where it held NaN.
  Pair c = Pair::of(std::vector<float>(6, NAN));
  gpu_kernels().gemm(false, false, 2, 3, 0, 1.0f, c.d(), 1, c.d(), 3, 0.0f, c.d(), 3);
  CHECK(c.device.cpu().to_vector() == std::vector<float>(6, 0.0f));
}

TEST_CASE("cuda: strided_copy permutes like the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  // [5, 7, 9] read as its permutation (2, 0, 1): shape [9, 5, 7], strides (1, 63, 9).
  Pair x = Pair::of(random_values(5 * 7 * 9, -1, 1, 20));
  Pair y = Pair::zeros(5 * 7 * 9);
  int64_t shape[] = {9, 5, 7}, strides[] = {1, 63, 9};
  cpu_kernels().strided_copy(x.h(), strides, y.h(), shape, 3);
  gpu_kernels().strided_copy(x.d(), strides, y.d(), shape, 3);
  check_close(y.device, y.host, 0.0f, 0.0f, "strided_copy");
}

TEST_CASE("cuda: softmax, log_softmax and their backward match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  struct Case {
    int64_t outer, n, inner;
  };
  for (Case c : std::vector<Case>{{33, 1000, 1}, {64, 7, 1}, {3, 17, 5}, {2, 300, 33}}) {
    for (bool log : {false, true}) {
      int64_t total = c.outer * c.n * c.inner;
      std::string name = std::string(log ? "log_softmax " : "softmax ") + std::to_string(c.outer) +
                         "x" + std::to_string(c.n) + "x" + std::to_string(c.inner);
      Pair x = Pair::of(random_values(total, -8, 8, 21));
      Pair gy = Pair::of(random_values(total, -1, 1, 22));
      Pair y = Pair::zeros(total), gx = Pair::zeros(total);
      cpu_kernels().softmax(x.h(), y.h(), c.outer, c.n, c.inner, log);
      gpu_kernels().softmax(x.d(), y.d(), c.outer, c.n, c.inner, log);
      check_close(y.device, y.host, 1e-5f, 1e-6f, name);
      cpu_kernels().softmax_backward(y.h(), gy.h(), gx.h(), c.outer, c.n, c.inner, log);
      gpu_kernels().softmax_backward(y.d(), gy.d(), gx.d(), c.outer, c.n, c.inner, log);
      check_close(gx.device, gx.host, 1e-4f, 1e-6f, name + " backward");
    }
  }
  struct Causal {
    int64_t batch, t_q, t_k;
  };
  for (Causal c : std::vector<Causal>{{3, 9, 12}, {2, 12, 9}, {4, 300, 300}}) {
    int64_t total = c.batch * c.t_q * c.t_k;
    Pair x = Pair::of(random_values(total, -4, 4, 23));
    Pair y = Pair::zeros(total);
    cpu_kernels().causal_softmax(x.h(), y.h(), c.batch, c.t_q, c.t_k);
    gpu_kernels().causal_softmax(x.d(), y.d(), c.batch, c.t_q, c.t_k);
    check_close(y.device, y.host, 1e-5f, 1e-7f,
                "causal_softmax " + std::to_string(c.t_q) + "x" + std::to_string(c.t_k));
  }
}

TEST_CASE("cuda: layer norm and its split backward match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  for (int64_t cols : {7, 768, 1500}) {
    const int64_t rows = 37, n = rows * cols;
    Pair x = Pair::of(random_values(n, -3, 5, 24));
    Pair w = Pair::of(random_values(cols, 0.5f, 1.5f, 25));
    Pair b = Pair::of(random_values(cols, -1, 1, 26));
    Pair gy = Pair::of(random_values(n, -1, 1, 27));
    for (bool affine : {true, false}) {
      std::string name = "layer_norm cols=" + std::to_string(cols) + (affine ? " affine" : "");
      const float* wh = affine ? w.h() : nullptr;
      const float* wd = affine ? w.d() : nullptr;
      Pair y = Pair::zeros(n), mean = Pair::zeros(rows), rstd = Pair::zeros(rows);
      cpu_kernels().layer_norm(x.h(), wh, affine ? b.h() : nullptr, y.h(), mean.h(), rstd.h(), rows,
                               cols, 1e-5f);
      gpu_kernels().layer_norm(x.d(), wd, affine ? b.d() : nullptr, y.d(), mean.d(), rstd.d(), rows,
                               cols, 1e-5f);
      check_close(y.device, y.host, 1e-4f, 1e-5f, name);
      check_close(mean.device, mean.host, 1e-5f, 1e-6f, name + " mean");
      check_close(rstd.device, rstd.host, 1e-4f, 1e-6f, name + " rstd");
      Pair gx = Pair::zeros(n);
      cpu_kernels().layer_norm_backward_input(x.h(), wh, mean.h(), rstd.h(), gy.h(), gx.h(), rows,
                                              cols);
      gpu_kernels().layer_norm_backward_input(x.d(), wd, mean.d(), rstd.d(), gy.d(), gx.d(), rows,
                                              cols);
      check_close(gx.device, gx.host, 1e-3f, 1e-5f, name + " backward input");
    }
    Pair mean = Pair::zeros(rows), rstd = Pair::zeros(rows), y = Pair::zeros(n);
    cpu_kernels().layer_norm(x.h(), nullptr, nullptr, y.h(), mean.h(), rstd.h(), rows, cols, 1e-5f);
    gpu_kernels().layer_norm(x.d(), nullptr, nullptr, y.d(), mean.d(), rstd.d(), rows, cols, 1e-5f);
    Pair gw = Pair::zeros(cols), gb = Pair::zeros(cols);
    cpu_kernels().layer_norm_backward_params(x.h(), mean.h(), rstd.h(), gy.h(), gw.h(), gb.h(),
                                             rows, cols);
    gpu_kernels().layer_norm_backward_params(x.d(), mean.d(), rstd.d(), gy.d(), gw.d(), gb.d(),
                                             rows, cols);
    check_close(gw.device, gw.host, 1e-4f, 1e-4f, "layer_norm gweight");
    check_close(gb.device, gb.host, 1e-4f, 1e-4f, "layer_norm gbias");
    Pair gb_only = Pair::zeros(cols);  // gweight not requested
    gpu_kernels().layer_norm_backward_params(x.d(), mean.d(), rstd.d(), gy.d(), nullptr,
                                             gb_only.d(), rows, cols);
    check_close(gb_only.device, gb.host, 1e-4f, 1e-4f, "layer_norm gbias alone");
  }
}

TEST_CASE("cuda: embedding and cross entropy kernels match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t vocab = 50, dim = 33, n = 400;
  std::vector<float> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<float>((i * 7 + i / 3) % vocab);
  Pair id = Pair::of(ids);
  Pair weight = Pair::of(random_values(vocab * dim, -1, 1, 30));
  Pair out = Pair::zeros(n * dim), gy = Pair::of(random_values(n * dim, -1, 1, 31));
  cpu_kernels().embedding(id.h(), weight.h(), out.h(), n, dim);
  gpu_kernels().embedding(id.d(), weight.d(), out.d(), n, dim);
  check_close(out.device, out.host, 0.0f, 0.0f, "embedding");
  Pair gw = Pair::of(std::vector<float>(vocab * dim, 123.0f));  // overwritten, not accumulated
  cpu_kernels().embedding_backward(id.h(), gy.h(), gw.h(), n, dim, vocab);
  gpu_kernels().embedding_backward(id.d(), gy.d(), gw.d(), n, dim, vocab);
  check_close(gw.device, gw.host, 0.0f, 0.0f, "embedding backward (same summation order)");

  const int64_t rows = 129, classes = 1000, ignore = -100;
  Pair logits = Pair::of(random_values(rows * classes, -5, 5, 32));
  Pair logp = Pair::zeros(rows * classes);
  cpu_kernels().softmax(logits.h(), logp.h(), rows, classes, 1, true);
  gpu_kernels().softmax(logits.d(), logp.d(), rows, classes, 1, true);
  std::vector<float> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 10 == 3 ? ignore : (r * 37) % classes;
  Pair target = Pair::of(targets);
  Pair loss = Pair::zeros(rows), grad_rows = Pair::of(random_values(rows, 0.5f, 1, 33));
  cpu_kernels().nll_rows(logp.h(), target.h(), loss.h(), rows, classes, ignore);
  gpu_kernels().nll_rows(logp.d(), target.d(), loss.d(), rows, classes, ignore);
  check_close(loss.device, loss.host, 1e-5f, 1e-6f, "nll_rows");
  Pair gx = Pair::zeros(rows * classes);
  cpu_kernels().cross_entropy_backward(logp.h(), target.h(), grad_rows.h(), gx.h(), rows, classes,
                                       ignore);
  gpu_kernels().cross_entropy_backward(logp.d(), target.d(), grad_rows.d(), gx.d(), rows, classes,
                                       ignore);
  check_close(gx.device, gx.host, 1e-5f, 1e-7f, "cross_entropy_backward");
}

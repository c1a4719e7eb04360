// The op table: every op of tensors/ops checked against an independent float64 reference, its
// gradients against central differences, its split backward against the full one, and (when a
// GPU is present) CUDA against CPU. Harness in op_table.h.
#include <catch2/catch.hpp>

#include "tensors/op_table.h"
#include "tensors/op_table_attention.h"

namespace {

using namespace optest;
using tp::Shape;
using TV = std::vector<tp::Tensor>;
using VV = std::vector<Values>;

// -- case builders ------------------------------------------------------------------------------

OpCase binary(const std::string& name, Shape a, Shape b, Shape out, Fill b_fill,
              std::function<tp::Tensor(const tp::Tensor&, const tp::Tensor&)> op,
              std::function<double(double, double)> f) {
  OpCase c;
  c.name = name + " " + tp::to_string(a) + " " + tp::to_string(b);
  c.inputs = {{a}, {b, b_fill}};
  c.run = [op](const TV& in) { return TV{op(in[0], in[1])}; };
  c.reference = [=](const VV& x) { return VV{broadcast2(x[0], a, x[1], b, out, f)}; };
  c.out_shapes = {out};
  return c;
}

OpCase unary(const std::string& name, Shape s, Fill fill,
             std::function<tp::Tensor(const tp::Tensor&)> op, std::function<double(double)> f) {
  OpCase c;
  c.name = name + " " + tp::to_string(s);
  c.inputs = {{s, fill}};
  c.run = [op](const TV& in) { return TV{op(in[0])}; };
  c.reference = [f](const VV& x) { return VV{map1(x[0], f)}; };
  c.out_shapes = {s};
  return c;
}

// a [..., m, k] x b: batch matrices of b when bb, else one [k, n].
OpCase matmul_case(const std::string& name, Shape a, Shape b, Shape out, int64_t batch, int64_t m,
                   int64_t k, int64_t n, bool bb,
                   std::function<tp::Tensor(const tp::Tensor&, const tp::Tensor&)> op) {
  OpCase c;
  c.name = name + " " + tp::to_string(a) + " x " + tp::to_string(b);
  c.inputs = {{a}, {b}};
  c.run = [op](const TV& in) { return TV{op(in[0], in[1])}; };
  c.reference = [=](const VV& x) { return VV{ref_matmul(x[0], x[1], batch, m, k, n, bb)}; };
  c.out_shapes = {out};
  return c;
}

OpCase linear_case(Shape x, int64_t out_features, bool bias) {
  int64_t in = x.back(), rows = count(x) / in;
  Shape out = x;
  out.back() = out_features;
  OpCase c;
  c.name = "linear " + tp::to_string(x) + " -> " + std::to_string(out_features) +
           (bias ? " with bias" : "");
  c.inputs = {{x}, {{out_features, in}}};
  if (bias) c.inputs.push_back({{out_features}});
  c.run = [bias](const TV& t) { return TV{tp::linear(t[0], t[1], bias ? t[2] : tp::Tensor())}; };
  c.reference = [=](const VV& v) {
    Values y(rows * out_features);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out_features; ++o) {
        double s = bias ? v[2][o] : 0.0;
        for (int64_t i = 0; i < in; ++i) s += v[0][r * in + i] * v[1][o * in + i];
        y[r * out_features + o] = s;
      }
    return VV{y};
  };
  c.out_shapes = {out};
  return c;
}

// [outer, n, inner] around dim d.
struct Around {
  int64_t outer, n, inner;
};
Around around(const Shape& s, int64_t d) {
  Around a{1, s[d], 1};
  for (int64_t i = 0; i < d; ++i) a.outer *= s[i];
  for (size_t i = d + 1; i < s.size(); ++i) a.inner *= s[i];
  return a;
}

OpCase softmax_case(Shape s, int64_t dim, bool log) {
  int64_t d = dim < 0 ? dim + static_cast<int64_t>(s.size()) : dim;
  Around a = around(s, d);
  OpCase c;
  c.name = std::string(log ? "log_softmax " : "softmax ") + tp::to_string(s) + " dim " +
           std::to_string(dim);
  c.inputs = {{s}};
  c.run = [dim, log](const TV& in) {
    return TV{log ? tp::log_softmax(in[0], dim) : tp::softmax(in[0], dim)};
  };
  c.reference = [a, log](const VV& x) { return VV{ref_softmax(x[0], a.outer, a.n, a.inner, log)}; };
  c.out_shapes = {s};
  return c;
}

OpCase layer_norm_case(Shape s, bool weight, bool bias) {
  int64_t cols = s.back(), rows = count(s) / cols;
  OpCase c;
  c.name = "layer_norm " + tp::to_string(s) + (weight ? " weight" : "") + (bias ? " bias" : "");
  c.inputs = {{s}};
  if (weight) c.inputs.push_back({{cols}});
  if (bias) c.inputs.push_back({{cols}});
  c.run = [=](const TV& in) {
    tp::Tensor w = weight ? in[1] : tp::Tensor();
    tp::Tensor b = bias ? in[weight ? 2 : 1] : tp::Tensor();
    return TV{tp::layer_norm(in[0], cols, w, b)};
  };
  c.reference = [=](const VV& x) {
    Values y(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j) m += x[0][r * cols + j];
      m /= cols;
      for (int64_t j = 0; j < cols; ++j) v += (x[0][r * cols + j] - m) * (x[0][r * cols + j] - m);
      v /= cols;
      for (int64_t j = 0; j < cols; ++j) {
        double h = (x[0][r * cols + j] - m) / std::sqrt(v + 1e-5);
        if (weight) h *= x[1][j];
        if (bias) h += x[weight ? 2 : 1][j];
        y[r * cols + j] = h;
      }
    }
    return VV{y};
  };
  c.out_shapes = {s};
  return c;
}

OpCase embedding_case(Shape ids, int64_t vocab, int64_t dim) {
  Shape out = ids;
  out.push_back(dim);
  OpCase c;
  c.name = "embedding " + tp::to_string(ids) + " vocab " + std::to_string(vocab);
  c.inputs = {{ids, Fill::Ids, false, vocab}, {{vocab, dim}}};
  c.run = [](const TV& in) { return TV{tp::embedding(in[0], in[1])}; };
  c.reference = [dim](const VV& x) {
    Values y;
    for (double id : x[0])
      for (int64_t j = 0; j < dim; ++j) y.push_back(x[1][static_cast<int64_t>(id) * dim + j]);
    return VV{y};
  };
  c.out_shapes = {out};
  c.activations = 0;  // the weight is the only gradient: all of it comes from backward_weight
  return c;
}

OpCase dropout_case(Shape s, float p, bool training) {
  const uint64_t seed = 99;
  OpCase c;
  c.name = "dropout " + tp::to_string(s) + " p " + std::to_string(p) +
           (training ? " training" : " eval");
  c.inputs = {{s}};
  c.run = [=](const TV& in) {
    tp::Generator g(seed);  // same mask on every run
    return TV{tp::dropout(in[0], p, training, &g)};
  };
  c.reference = [=](const VV& x) {
    // The documented contract: element i kept (scaled by 1/(1-p)) iff the i-th uniform() >= p.
    // Dropped elements are multiplied by 0, as in PyTorch, so a dropped NaN or Inf gives NaN.
    tp::Generator g(seed);
    Values y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i) {
      if (!training || p == 0.0f) {
        y[i] = x[0][i];
      } else {
        y[i] = x[0][i] * (g.uniform() >= p ? 1.0 / (1.0 - p) : 0.0);
      }
    }
    return VV{y};
  };
  c.out_shapes = {s};
  return c;
}

OpCase permute_case(Shape s, std::vector<int64_t> perm) {
  Shape out(s.size());
  for (size_t d = 0; d < s.size(); ++d) out[d] = s[perm[d]];
  OpCase c;
  c.name = "permute " + tp::to_string(s) + " " + tp::to_string(perm);
  c.inputs = {{s}};
  c.run = [perm](const TV& in) { return TV{tp::permute(in[0], perm)}; };
  c.reference = [=](const VV& x) { return VV{ref_permute(x[0], s, perm)}; };
  c.out_shapes = {out};
  return c;
}

OpCase transpose_case(Shape s, int64_t d0, int64_t d1) {
  int64_t r = s.size();
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = i;
  std::swap(perm[(d0 + r) % r], perm[(d1 + r) % r]);
  OpCase c = permute_case(s, perm);
  c.name = "transpose " + tp::to_string(s) + " " + std::to_string(d0) + " " + std::to_string(d1);
  c.run = [d0, d1](const TV& in) { return TV{tp::transpose(in[0], d0, d1)}; };
  return c;
}

Values ref_narrow(const Values& x, const Shape& s, int64_t dim, int64_t start, int64_t len) {
  Around a = around(s, dim);
  Values y;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t r = start; r < start + len; ++r)
      for (int64_t i = 0; i < a.inner; ++i) y.push_back(x[(o * a.n + r) * a.inner + i]);
  return y;
}

// A case for an op returning pieces along `dim` whose sizes are `sizes`.
OpCase pieces_case(const std::string& name, Shape s, int64_t dim, std::vector<int64_t> sizes,
                   std::function<TV(const tp::Tensor&)> op) {
  OpCase c;
  c.name = name + " " + tp::to_string(s);
  c.inputs = {{s}};
  c.run = [op](const TV& in) { return op(in[0]); };
  c.reference = [=](const VV& x) {
    VV out;
    int64_t start = 0;
    for (int64_t len : sizes) {
      out.push_back(ref_narrow(x[0], s, dim, start, len));
      start += len;
    }
    return out;
  };
  for (int64_t len : sizes) {
    Shape p = s;
    p[dim] = len;
    c.out_shapes.push_back(p);
  }
  return c;
}

OpCase reduce_case(Shape s, int64_t dim, bool keepdim, bool all, bool mean) {
  OpCase c;
  c.name = std::string(mean ? "mean " : "sum ") + tp::to_string(s) +
           (all ? " all" : " dim " + std::to_string(dim) + (keepdim ? " keepdim" : ""));
  c.inputs = {{s}};
  Shape out;
  Around a{1, count(s), 1};
  if (!all) {
    a = around(s, dim);
    out = s;
    if (keepdim)
      out[dim] = 1;
    else
      out.erase(out.begin() + dim);
  }
  c.run = [=](const TV& in) {
    if (all) return TV{mean ? tp::mean(in[0]) : tp::sum(in[0])};
    return TV{mean ? tp::mean(in[0], dim, keepdim) : tp::sum(in[0], dim, keepdim)};
  };
  c.reference = [=](const VV& x) {
    Values y(a.outer * a.inner, 0.0);
    for (int64_t o = 0; o < a.outer; ++o)
      for (int64_t r = 0; r < a.n; ++r)
        for (int64_t i = 0; i < a.inner; ++i)
          y[o * a.inner + i] += x[0][(o * a.n + r) * a.inner + i];
    if (mean)
      for (double& v : y) v /= a.n;
    return VV{y};
  };
  c.out_shapes = {out};
  return c;
}

OpCase mse_case(Shape s, tp::Reduction red) {
  OpCase c;
  c.name = "mse_loss " + tp::to_string(s) + " reduction " + std::to_string(int(red));
  c.inputs = {{s}, {s, Fill::Normal, false}};
  c.run = [red](const TV& in) { return TV{tp::mse_loss(in[0], in[1], red)}; };
  c.reference = [red](const VV& x) {
    Values sq(x[0].size());
    double total = 0;
    for (size_t i = 0; i < sq.size(); ++i)
      total += sq[i] = (x[0][i] - x[1][i]) * (x[0][i] - x[1][i]);
    if (red == tp::Reduction::None) return VV{sq};
    return VV{{red == tp::Reduction::Mean ? total / sq.size() : total}};
  };
  c.out_shapes = {red == tp::Reduction::None ? s : Shape{}};
  return c;
}

OpCase cross_entropy_case(int64_t n, int64_t classes, tp::Reduction red, bool with_ignored) {
  OpCase c;
  c.name = "cross_entropy [" + std::to_string(n) + ", " + std::to_string(classes) + "] reduction " +
           std::to_string(int(red)) + (with_ignored ? " with ignored rows" : "");
  c.inputs = {{{n, classes}}, {{n}, with_ignored ? Fill::Targets : Fill::Ids, false, classes}};
  c.run = [red](const TV& in) { return TV{tp::cross_entropy(in[0], in[1], -100, red)}; };
  c.reference = [=](const VV& x) {
    Values lsm = ref_softmax(x[0], n, classes, 1, true);
    Values rows(n, 0.0);
    double total = 0;
    int counted = 0;
    for (int64_t r = 0; r < n; ++r) {
      if (x[1][r] == -100) continue;
      rows[r] = -lsm[r * classes + static_cast<int64_t>(x[1][r])];
      total += rows[r];
      ++counted;
    }
    if (red == tp::Reduction::None) return VV{rows};
    return VV{{red == tp::Reduction::Mean ? total / counted : total}};
  };
  c.out_shapes = {red == tp::Reduction::None ? Shape{n} : Shape{}};
  return c;
}

OpCase identity_case(const std::string& name, Shape s, Shape out,
                     std::function<tp::Tensor(const tp::Tensor&)> op) {
  OpCase c;
  c.name = name + " " + tp::to_string(s);
  c.inputs = {{s}};
  c.run = [op](const TV& in) { return TV{op(in[0])}; };
  c.reference = [](const VV& x) { return VV{x[0]}; };
  c.out_shapes = {out};
  return c;
}

const double kSqrt2OverPi = 0.7978845608028654;

// Elementwise ops with broadcasting, scalar operators and activations.
std::vector<OpCase> elementwise_cases() {
  using tp::Tensor;
  std::vector<OpCase> t;
  auto add = [](const Tensor& a, const Tensor& b) { return a + b; };
  auto sub = [](const Tensor& a, const Tensor& b) { return a - b; };
  auto mul = [](const Tensor& a, const Tensor& b) { return a * b; };
  auto div = [](const Tensor& a, const Tensor& b) { return a / b; };
  auto plus = [](double a, double b) { return a + b; };
  auto minus = [](double a, double b) { return a - b; };
  auto times = [](double a, double b) { return a * b; };
  auto over = [](double a, double b) { return a / b; };
  // -- elementwise with broadcasting
  t.push_back(binary("add", {2, 3, 4}, {3, 1}, {2, 3, 4}, Fill::Normal, add, plus));
  t.push_back(binary("add", {4}, {2, 1, 4}, {2, 1, 4}, Fill::Normal, add, plus));
  t.push_back(binary("add", {2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5}, Fill::Normal, add, plus));
  t.push_back(binary("sub", {2, 1, 4}, {3, 1}, {2, 3, 4}, Fill::Normal, sub, minus));
  t.push_back(binary("mul", {2, 3, 4}, {4}, {2, 3, 4}, Fill::Normal, mul, times));
  t.push_back(binary("mul", {1}, {3, 2}, {3, 2}, Fill::Normal, mul, times));
  t.push_back(binary("div", {3, 4}, {2, 1, 4}, {2, 3, 4}, Fill::Positive, div, over));
  t.push_back(unary(
      "affine", {2, 3}, Fill::Normal, [](const Tensor& x) { return tp::affine(x, 1.5f, -0.5f); },
      [](double x) { return 1.5 * x - 0.5; }));
  t.push_back(unary(
      "scalar operators", {3, 2}, Fill::Normal,
      [](const Tensor& x) { return (2.0f - x * 3.0f) / 4.0f + 1.0f; },
      [](double x) { return (2.0 - 3.0 * x) / 4.0 + 1.0; }));
  t.push_back(unary(
      "neg", {5}, Fill::Normal, [](const Tensor& x) { return -x; }, [](double x) { return -x; }));
  // -- activations
  Shape u = {2, 3, 4};
  // PyTorch's relu keeps NaN: `x <= 0` is false for it.
  t.push_back(unary("relu", u, Fill::Normal, tp::relu, [](double x) { return x <= 0 ? 0 : x; }));
  t.push_back(unary("gelu", u, Fill::Normal, tp::gelu, [=](double x) {
    return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  }));
  t.push_back(unary("tanh", u, Fill::Normal, tp::tanh, [](double x) { return std::tanh(x); }));
  t.push_back(unary("exp", u, Fill::Normal, tp::exp, [](double x) { return std::exp(x); }));
  t.push_back(unary("log", u, Fill::Positive, tp::log, [](double x) { return std::log(x); }));
  t.push_back(unary("sqrt", u, Fill::Positive, tp::sqrt, [](double x) { return std::sqrt(x); }));
  t.push_back(unary("square", u, Fill::Normal, tp::square, [](double x) { return x * x; }));
  t.push_back(unary("sigmoid", u, Fill::Normal, tp::sigmoid,
                    [](double x) { return 1 / (1 + std::exp(-x)); }));
  return t;
}

// Products, linear layers and softmax.
std::vector<OpCase> product_cases() {
  std::vector<OpCase> t;
  // -- products
  t.push_back(matmul_case("matmul", {3, 4}, {4, 5}, {3, 5}, 1, 3, 4, 5, false, tp::matmul));
  t.push_back(matmul_case("matmul", {2, 3, 4}, {4, 5}, {2, 3, 5}, 1, 6, 4, 5, false, tp::matmul));
  t.push_back(matmul_case("matmul", {2, 2, 3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5}, 4, 3, 4, 5, true,
                          tp::matmul));
  t.push_back(matmul_case("matmul", {4}, {4, 5}, {5}, 1, 1, 4, 5, false, tp::matmul));
  t.push_back(matmul_case("matmul", {1, 1, 4}, {4, 1}, {1, 1, 1}, 1, 1, 4, 1, false, tp::matmul));
  t.push_back(matmul_case("bmm", {2, 3, 4}, {2, 4, 5}, {2, 3, 5}, 2, 3, 4, 5, true, tp::bmm));
  t.push_back(linear_case({5, 4}, 3, true));
  t.push_back(linear_case({2, 3, 4}, 5, false));
  t.push_back(linear_case({1, 4}, 1, true));
  t.push_back(linear_case({2, 1, 3, 4}, 2, true));
  // -- softmax
  t.push_back(softmax_case({2, 3, 5}, -1, false));
  t.push_back(softmax_case({2, 3, 5}, 1, false));
  t.push_back(softmax_case({4, 3}, 0, false));
  t.push_back(softmax_case({3, 1}, -1, false));
  t.push_back(softmax_case({3, 5}, -1, true));
  t.push_back(softmax_case({2, 4, 3}, 1, true));
  return t;
}

// Normalisation, embedding, dropout and attention.
std::vector<OpCase> layer_cases() {
  std::vector<OpCase> t;
  // -- normalisation, embedding, dropout, attention (op_table_attention.h)
  t.push_back(layer_norm_case({2, 3, 6}, true, true));
  t.push_back(layer_norm_case({4, 5}, false, false));
  t.push_back(layer_norm_case({3, 4}, true, false));
  t.push_back(layer_norm_case({2, 1, 5}, false, true));
  t.push_back(embedding_case({2, 3}, 7, 4));
  t.push_back(embedding_case({6}, 3, 2));  // repeated ids accumulate
  t.push_back(dropout_case({4, 5}, 0.3f, true));
  t.push_back(dropout_case({2, 3, 4}, 0.5f, true));
  t.push_back(dropout_case({3, 3}, 0.5f, false));
  t.push_back(dropout_case({3, 3}, 0.0f, true));
  for (OpCase& c : attention_cases()) t.push_back(std::move(c));
  return t;
}

// Layout and pieces: permutes, splits, slices, reshapes, cat, dtype round trips.
std::vector<OpCase> layout_cases() {
  using tp::Tensor;
  std::vector<OpCase> t;
  // -- layout and pieces
  t.push_back(permute_case({2, 3, 4}, {2, 0, 1}));
  t.push_back(permute_case({2, 3, 4, 5}, {0, 2, 1, 3}));
  t.push_back(permute_case({3, 1, 2}, {1, 2, 0}));
  t.push_back(transpose_case({2, 3, 4}, -1, -2));
  t.push_back(transpose_case({3, 1, 2}, 0, 2));
  t.push_back(pieces_case("split 2 dim 0", {5, 4}, 0, {2, 2, 1},
                          [](const Tensor& x) { return tp::split(x, 2, 0); }));
  t.push_back(pieces_case("split 3 dim 1", {2, 7}, 1, {3, 3, 1},
                          [](const Tensor& x) { return tp::split(x, 3, 1); }));
  t.push_back(pieces_case("split sizes {1,3,2} dim -1", {2, 6}, 1, {1, 3, 2}, [](const Tensor& x) {
    return tp::split(x, std::vector<int64_t>{1, 3, 2}, -1);
  }));
  t.push_back(pieces_case("chunk 4 dim 1", {2, 6, 3}, 1, {2, 2, 2},
                          [](const Tensor& x) { return tp::chunk(x, 4, 1); }));
  t.push_back(pieces_case("tensor_split 3 dim 0", {7, 2}, 0, {3, 2, 2},
                          [](const Tensor& x) { return tp::tensor_split(x, 3, 0); }));
  t.push_back(pieces_case("tensor_split at {1,4} dim 1", {2, 6}, 1, {1, 3, 2}, [](const Tensor& x) {
    return tp::tensor_split(x, std::vector<int64_t>{1, 4}, 1);
  }));
  t.push_back(pieces_case("narrow dim 1", {3, 5}, 1, {3},
                          [](const Tensor& x) { return TV{tp::narrow(x, 1, 0, 3)}; }));
  t.push_back(pieces_case("slice0", {4, 3}, 0, {3},
                          [](const Tensor& x) { return TV{tp::slice0(x, 0, 3)}; }));
  t.push_back(identity_case("reshape", {2, 6}, {3, 1, 4}, [](const Tensor& x) {
    return x.reshape({3, 1, 4});
  }));
  t.push_back(identity_case("clone", {2, 3}, {2, 3}, [](const Tensor& x) { return x.clone(); }));
  t.push_back(identity_case("cat of own pieces dim 1", {2, 5}, {2, 5}, [](const Tensor& x) {
    return tp::cat({tp::narrow(x, 1, 0, 2), tp::narrow(x, 1, 2, 3)}, 1);
  }));
  {
    OpCase c;
    c.name = "cat dim 0 of two inputs";
    c.inputs = {{{2, 3}}, {{1, 3}}};
    c.run = [](const TV& in) { return TV{tp::cat({in[0], in[1]}, 0)}; };
    c.reference = [](const VV& x) {
      Values y = x[0];
      y.insert(y.end(), x[1].begin(), x[1].end());
      return VV{y};
    };
    c.out_shapes = {{3, 3}};
    t.push_back(c);
  }
  {
    OpCase c = identity_case("to bfloat16 and back", {3, 4}, {3, 4}, [](const Tensor& x) {
      return tp::to_dtype(tp::to_dtype(x, tp::DType::BFloat16), tp::DType::Float32);
    });
    c.fwd_tol = 8e-3;  // bfloat16 keeps 8 bits of mantissa; the gradient is rounded the same way
    c.grad_tol = 8e-3;
    t.push_back(c);
  }
  return t;
}

// Reductions and losses.
std::vector<OpCase> reduction_cases() {
  std::vector<OpCase> t;
  // -- reductions and losses
  t.push_back(reduce_case({2, 3, 4}, 0, false, true, false));
  t.push_back(reduce_case({2, 3, 4}, 1, true, false, false));
  t.push_back(reduce_case({2, 3, 4}, 2, false, false, false));
  t.push_back(reduce_case({2, 3, 4}, 0, false, true, true));
  t.push_back(reduce_case({2, 3, 4}, 0, true, false, true));
  t.push_back(reduce_case({3, 1, 2}, 1, false, false, true));
  t.push_back(mse_case({3, 4}, tp::Reduction::Mean));
  t.push_back(mse_case({2, 3}, tp::Reduction::Sum));
  t.push_back(mse_case({2, 3}, tp::Reduction::None));
  t.push_back(cross_entropy_case(6, 5, tp::Reduction::Mean, true));
  t.push_back(cross_entropy_case(4, 3, tp::Reduction::Mean, false));
  t.push_back(cross_entropy_case(5, 4, tp::Reduction::Sum, true));
  t.push_back(cross_entropy_case(5, 4, tp::Reduction::None, true));
  return t;
}

std::vector<OpCase> op_table() {
  std::vector<OpCase> t;
  for (auto section :
       {elementwise_cases, product_cases, layer_cases, layout_cases, reduction_cases})
    for (OpCase& c : section()) t.push_back(std::move(c));
  return t;
}

// Cases whose result is float32 by construction (a round trip through bfloat16).
bool float32_by_design(const OpCase& c) { return c.name.rfind("to bfloat16 and back", 0) == 0; }

}  // namespace

TEST_CASE("op table: forward, gradients and split backward on the CPU", "[op_table]") {
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) { check_cpu(table[i], 1000 + i); }
  }
}

TEST_CASE("op table: bfloat16 forward, gradients and split backward on the CPU", "[op_table]") {
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (float32_by_design(table[i])) continue;
    DYNAMIC_SECTION(table[i].name) { check_cpu_bfloat16(table[i], 1000 + i); }
  }
}

TEST_CASE("op table: NaN and Inf propagate as in PyTorch", "[op_table][nonfinite]") {
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) {
      check_nonfinite(table[i], 1000 + i, tp::cpu(), tp::DType::Float32);
    }
  }
}

TEST_CASE("op table: NaN and Inf propagate as in PyTorch in bfloat16", "[op_table][nonfinite]") {
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (float32_by_design(table[i])) continue;
    DYNAMIC_SECTION(table[i].name) {
      check_nonfinite(table[i], 1000 + i, tp::cpu(), tp::DType::BFloat16);
    }
  }
}

TEST_CASE("op table: CUDA matches the CPU", "[op_table][cuda]") {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: CUDA comparison skipped");
    return;
  }
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) { check_cuda(table[i], 1000 + i); }
  }
}

TEST_CASE("op table: CUDA matches the CPU in bfloat16", "[op_table][cuda]") {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: CUDA comparison skipped");
    return;
  }
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (float32_by_design(table[i])) continue;
    DYNAMIC_SECTION(table[i].name) { check_cuda_bfloat16(table[i], 1000 + i); }
  }
}

TEST_CASE("op table: CUDA propagates NaN and Inf as in PyTorch", "[op_table][cuda]") {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: CUDA comparison skipped");
    return;
  }
  std::vector<OpCase> table = op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) {
      check_nonfinite(table[i], 1000 + i, tp::Device("cuda:0"), tp::DType::Float32);
    }
  }
}

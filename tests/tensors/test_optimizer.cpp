// Tests for optim/optimizer.h's take_state_dict: state tensors that fit are taken uncopied and
// keep their bits; one that would alias another tensor (a parameter, another state entry, a
// view's base) is copied; the same errors as load_state_dict, nothing changed.
#include <catch2/catch.hpp>
#include <cstring>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace optim = tensorplay::optim;

namespace {

// AdamW state for one parameter of shape {4}: step 3 and moments of distinct values.
tp::StateDict adamw_state(const tp::Tensor& m, const tp::Tensor& v) {
  tp::StateDict dict;
  dict.insert("state.0.step", tp::from_vector({3.0f}, {}));
  dict.insert("state.0.exp_avg", m);
  dict.insert("state.0.exp_avg_sq", v);
  return dict;
}

bool same_bits(const tp::Tensor& a, const tp::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

const void* state_data(const optim::Optimizer& opt, const std::string& key) {
  return opt.state_dict().at(key).raw_data();
}

}  // namespace

TEST_CASE("take_state_dict takes fresh moments uncopied and steps as load_state_dict does",
          "[optimizer]") {
  const tp::Tensor m = tp::from_vector({0.1f, -0.2f, 0.3f, 1e-30f}, {4});
  const tp::Tensor v = tp::from_vector({0.5f, 0.25f, 2.0f, 7.0f}, {4});
  tp::Tensor w1 = tp::from_vector({1, 2, 3, 4}, {4}).requires_grad_();
  tp::Tensor w2 = w1.detach().clone().requires_grad_();
  optim::AdamW copied({w1}), taken({w2});
  copied.load_state_dict(adamw_state(m, v));
  const void* m_data = m.raw_data();
  const void* v_data = v.raw_data();
  taken.take_state_dict(adamw_state(m, v));
  CHECK(state_data(taken, "state.0.exp_avg") == m_data);  // the very storage, no copy
  CHECK(state_data(taken, "state.0.exp_avg_sq") == v_data);
  CHECK(state_data(copied, "state.0.exp_avg") != m_data);
  CHECK(taken.step_count(0) == 3);
  for (const char* key : {"state.0.exp_avg", "state.0.exp_avg_sq"})
    CHECK(same_bits(taken.state_dict().at(key), copied.state_dict().at(key)));
  const tp::Tensor g = tp::from_vector({0.3f, -1.0f, 2.0f, 0.0f}, {4});
  w1.set_grad(g.clone());
  w2.set_grad(g.clone());
  copied.step();
  taken.step();
  CHECK(same_bits(w1, w2));
  // A later load_state_dict copies again.
  taken.load_state_dict(adamw_state(m, v));
  CHECK(state_data(taken, "state.0.exp_avg") != m_data);
}

TEST_CASE("take_state_dict copies what would alias another tensor", "[optimizer]") {
  tp::Tensor w = tp::from_vector({1, 2, 3, 4}, {4}).requires_grad_();
  optim::AdamW opt({w});
  const void* w_data = w.raw_data();
  SECTION("one tensor as both moments: two storages") {
    const tp::Tensor m = tp::from_vector({0.5f, 0.5f, 0.5f, 0.5f}, {4});
    opt.take_state_dict(adamw_state(m, m));
    CHECK(state_data(opt, "state.0.exp_avg") != state_data(opt, "state.0.exp_avg_sq"));
  }
  SECTION("the parameter itself as a moment: not the parameter's storage") {
    opt.take_state_dict(adamw_state(w.detach(), tp::ones({4})));
    CHECK(state_data(opt, "state.0.exp_avg") != w_data);
    CHECK(same_bits(opt.state_dict().at("state.0.exp_avg"), w));
  }
  SECTION("a view of a storage another tensor views, or another dtype: copied") {
    const tp::Tensor base = tp::ones({2, 2});
    const tp::Tensor view = base.reshape({4});
    opt.take_state_dict(adamw_state(view, tp::ones({4}, {.dtype = tp::DType::BFloat16})));
    CHECK(state_data(opt, "state.0.exp_avg") != base.raw_data());
    CHECK(opt.state_dict().at("state.0.exp_avg_sq").dtype() == tp::DType::Float32);
  }
  SECTION("an error: nothing changes, the same message as load_state_dict's") {
    tp::StateDict bad = adamw_state(tp::ones({4}), tp::ones({3}));
    std::string message;
    try {
      opt.load_state_dict(bad);
    } catch (const std::invalid_argument& e) {
      message = e.what();
    }
    CHECK_THROWS_WITH(opt.take_state_dict(bad), message);
    CHECK(opt.state_dict().find("state.0.exp_avg") == nullptr);
  }
}

TEST_CASE("take_state_dict takes SGD's momentum uncopied", "[optimizer]") {
  tp::Tensor w = tp::from_vector({1, 2}, {2}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1f, .momentum = 0.9f});
  const tp::Tensor b = tp::from_vector({0.25f, -4.0f}, {2});
  tp::StateDict dict;
  dict.insert("state.0.momentum_buffer", b);
  const void* b_data = b.raw_data();
  opt.take_state_dict(dict);
  CHECK(state_data(opt, "state.0.momentum_buffer") == b_data);
}

// Tests for ProcessGroup's sharding collectives (process_group.h): all_gather_into_tensor and
// reduce_scatter_tensor, blocking and asynchronous, on ranks of one job joined in this process,
// and their clear errors for inputs that differ between members or outputs of the wrong size. The
// [cuda] case (device tensors through a host copy) runs in test_actors_gpu and
// scripts/gpu_check.sh.
#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>

#include "in_process_job.h"
#include "tensorplay/core/device_info.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;

namespace {

/// Rank-dependent values: member `me`'s element i is 100 me + i.
tp::Tensor ramp(int me, const tp::Shape& shape, tp::DType dtype = tp::DType::Float32) {
  std::vector<float> v(static_cast<size_t>(tp::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(100 * me + i);
  return tp::from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("all_gather_into_tensor concatenates every member's input in rank order",
          "[process_group][shard_collectives]") {
  const int n = 3;
  std::vector<std::vector<float>> gathered(n), gathered_async(n), gathered_bf16(n);
  std::vector<int> completed(n, 0);
  auto outcomes = tp::testing::run_ranks(n, {0, 1, 2}, std::chrono::seconds(20), [&](auto& g) {
    const int me = g.rank();
    tp::Tensor out = tp::zeros({n * 2, 3});
    g.all_gather_into_tensor(out, ramp(me, {2, 3}));
    gathered[me] = out.to_vector();
    tp::Tensor out2 = tp::zeros({n * 6});
    dist::Work w = g.all_gather_into_tensor_async(out2, ramp(me, {2, 3}));
    w.wait();
    completed[me] = w.is_completed();
    w.wait();  // a second wait returns at once
    gathered_async[me] = out2.to_vector();
    tp::Tensor out3 = tp::zeros({n * 2}, {.dtype = tp::DType::BFloat16});
    g.all_gather_into_tensor(out3, ramp(me, {2}, tp::DType::BFloat16));
    gathered_bf16[me] = out3.to_vector();
  });
  for (int me = 0; me < n; ++me) {
    INFO("rank " << me);
    CHECK(outcomes[me].error == "");
    std::vector<float> expect;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < 6; ++i) expect.push_back(static_cast<float>(100 * j + i));
    CHECK(gathered[me] == expect);
    CHECK(gathered_async[me] == expect);
    CHECK(completed[me] == 1);
    CHECK(gathered_bf16[me] == std::vector<float>{0, 1, 100, 101, 200, 201});
  }
}

TEST_CASE("reduce_scatter_tensor sums (or averages) chunk i into member i",
          "[process_group][shard_collectives]") {
  const int n = 4;
  std::vector<std::vector<float>> summed(n), averaged(n), summed_bf16(n);
  auto outcomes = tp::testing::run_ranks(n, {0, 1, 2, 3}, std::chrono::seconds(20), [&](auto& g) {
    const int me = g.rank();
    tp::Tensor out = tp::zeros({1, 2});
    g.reduce_scatter_tensor(out, ramp(me, {n, 2}));
    summed[me] = out.to_vector();
    tp::Tensor avg = tp::zeros({2});
    dist::Work w = g.reduce_scatter_tensor_async(avg, ramp(me, {n * 2}), dist::ReduceOp::Avg);
    w.wait();
    averaged[me] = avg.to_vector();
    tp::Tensor b = tp::zeros({2}, {.dtype = tp::DType::BFloat16});
    g.reduce_scatter_tensor(b, ramp(me, {n * 2}, tp::DType::BFloat16));
    summed_bf16[me] = b.to_vector();
  });
  for (int me = 0; me < n; ++me) {
    INFO("rank " << me);
    CHECK(outcomes[me].error == "");
    // Chunk me holds elements 2 me and 2 me + 1 of every member: sum over j of 100 j + i.
    const float base = 100.0f * (0 + 1 + 2 + 3);
    const std::vector<float> expect{base + n * 2.0f * me, base + n * (2.0f * me + 1)};
    CHECK(summed[me] == expect);
    CHECK(averaged[me] == std::vector<float>{expect[0] / n, expect[1] / n});
    // bfloat16 keeps 8 bits: 100 j + i for i < 8 and j < 4 is exact, and so is each sum here.
    CHECK(summed_bf16[me] == expect);
  }
}

TEST_CASE(
    "the sharding collectives name the member whose input or output is wrong, on every member",
    "[process_group][shard_collectives]") {
  const int n = 2;
  std::vector<std::string> shape_error(n), output_error(n), dtype_error(n), after(n);
  auto outcomes = tp::testing::run_ranks(n, {0, 1}, std::chrono::seconds(20), [&](auto& g) {
    const int me = g.rank();
    // Member 1 passes an input of another shape.
    shape_error[me] = tp::testing::error_of([&] {
      tp::Tensor out = tp::zeros({n * 3});
      g.all_gather_into_tensor(out, tp::zeros({me == 1 ? 4 : 3}));
    });
    // Member 0's output is one element short.
    output_error[me] = tp::testing::error_of([&] {
      tp::Tensor out = tp::zeros({me == 0 ? 1 : 2});
      g.reduce_scatter_tensor(out, tp::zeros({4}));
    });
    dtype_error[me] = tp::testing::error_of([&] {
      tp::Tensor out = tp::zeros({2}, {.dtype = tp::DType::BFloat16});
      g.reduce_scatter_tensor(out, tp::zeros({4}));
    });
    // The group still works afterwards.
    after[me] = tp::testing::error_of([&] {
      tp::Tensor out = tp::zeros({n});
      g.all_gather_into_tensor(out, tp::ones({1}));
    });
  });
  for (int me = 0; me < n; ++me) {
    INFO("rank " << me);
    CHECK(outcomes[me].error == "");
    CHECK_THAT(shape_error[me], Catch::Contains("member 1 (rank 1) passed an input of shape [4]") &&
                                    Catch::Contains("member 0 (rank 0) one of [3]"));
    CHECK_THAT(output_error[me],
               Catch::Contains("member 0 (rank 0) passed an output of shape [1]") &&
                   Catch::Contains("2 (the group's size) times"));
    CHECK_THAT(dtype_error[me], Catch::Contains("member 0 (rank 0) passed an input of float32") &&
                                    Catch::Contains("one dtype"));
    CHECK(after[me] == "");
  }
  CHECK(shape_error[0] == shape_error[1]);
  CHECK(output_error[0] == output_error[1]);
}

TEST_CASE("a member that does not take part is named when the wait runs out",
          "[process_group][shard_collectives]") {
  std::string error;
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(3), [&](auto& g) {
    g.barrier();
    if (g.rank() == 0) {
      error = tp::testing::error_of([&] {
        tp::Tensor out = tp::zeros({2});
        g.all_gather_into_tensor(out, tp::ones({1}));
      });
    }
  });
  CHECK_THAT(error, Catch::Contains("all_gather_into_tensor on group [0, 1]") &&
                        Catch::Contains("[1] did not take part"));
}

TEST_CASE("a group of one copies its input", "[process_group][shard_collectives]") {
  dist::destroy_process_group();
  dist::ProcessGroup one;
  tp::Tensor out = tp::zeros({2, 2});
  one.all_gather_into_tensor(out, tp::ones({2, 2}));
  CHECK(out.to_vector() == std::vector<float>(4, 1.0f));
  one.reduce_scatter_tensor(out, tp::full({4}, 3.0f), dist::ReduceOp::Avg);
  CHECK(out.to_vector() == std::vector<float>(4, 3.0f));
  CHECK_THROWS_WITH(one.all_gather_into_tensor(out, tp::ones({3})),
                    Catch::Contains("output of shape [2, 2]"));
}

TEST_CASE("the sharding collectives take device tensors through a host copy",
          "[process_group][shard_collectives][cuda]") {
  if (tp::cuda_device_count() == 0) {
    WARN("no CUDA device (tests/run_if_gpu.sh skips this case's run)");
    return;
  }
  const tp::Device gpu("cuda:0");
  const int n = 2;
  std::vector<std::vector<float>> gathered(n), reduced(n);
  std::vector<int> on_device(n, 0);
  auto outcomes = tp::testing::run_ranks(n, {0, 1}, std::chrono::seconds(30), [&](auto& g) {
    const int me = g.rank();
    tp::Tensor out = tp::zeros({n * 3}, {.device = gpu});
    g.all_gather_into_tensor(out, ramp(me, {3}).to(gpu));
    gathered[me] = out.to_vector();
    tp::Tensor part = tp::zeros({2}, {.dtype = tp::DType::BFloat16, .device = gpu});
    g.reduce_scatter_tensor_async(part, ramp(me, {n * 2}, tp::DType::BFloat16).to(gpu),
                                  dist::ReduceOp::Avg)
        .wait();
    on_device[me] = out.is_cuda() && part.is_cuda();
    reduced[me] = part.to_vector();
  });
  for (int me = 0; me < n; ++me) {
    INFO("rank " << me);
    CHECK(outcomes[me].error == "");
    CHECK(gathered[me] == std::vector<float>{0, 1, 2, 100, 101, 102});
    CHECK(on_device[me] == 1);
    CHECK(reduced[me] == std::vector<float>{50.0f + 2 * me, 51.0f + 2 * me});
  }
}

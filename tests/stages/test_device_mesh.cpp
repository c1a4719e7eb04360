// Tests for device_mesh.h: the row-major layout PyTorch uses, sub-meshes along a dimension,
// printing, clear errors for bad shapes and names, and each replica's share of a batch.
#include <catch2/catch.hpp>

#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;

TEST_CASE("a {pp, dp} mesh lays ranks out row-major, as PyTorch", "[device_mesh]") {
  // PyTorch: init_device_mesh("cpu", (2, 3), mesh_dim_names=("pp", "dp")).mesh ==
  // [[0, 1, 2], [3, 4, 5]]: a stage's replicas are consecutive, a pipeline takes every 3rd.
  for (int rank = 0; rank < 6; ++rank) {
    dist::DeviceMesh mesh("cpu", {2, 3}, {"pp", "dp"}, rank);
    CHECK(mesh.size() == 6);
    CHECK(mesh.size("pp") == 2);
    CHECK(mesh.size("dp") == 3);
    CHECK(mesh.get_local_rank("pp") == rank / 3);
    CHECK(mesh.get_local_rank("dp") == rank % 3);
    CHECK(mesh.get_coordinate() == std::vector<int>{rank / 3, rank % 3});
    dist::DeviceMesh dp = mesh["dp"], pp = mesh["pp"];
    CHECK(dp.ndim() == 1);
    CHECK(dp.mesh_dim_names() == std::vector<std::string>{"dp"});
    CHECK(dp.ranks() == std::vector<int>{rank / 3 * 3, rank / 3 * 3 + 1, rank / 3 * 3 + 2});
    CHECK(pp.ranks() == std::vector<int>{rank % 3, rank % 3 + 3});
    CHECK(dp.get_local_rank("dp") == rank % 3);
    CHECK(pp.get_local_rank("pp") == rank / 3);
  }
  dist::DeviceMesh three("cpu", {2, 2, 2}, {"pp", "dp", "tp"}, 5);  // coordinate (1, 0, 1)
  CHECK(three.get_coordinate() == std::vector<int>{1, 0, 1});
  CHECK(three["dp"].ranks() == std::vector<int>{5, 7});
  CHECK(three["tp"].ranks() == std::vector<int>{4, 5});
  CHECK(three["pp"].ranks() == std::vector<int>{1, 5});
}

TEST_CASE("a mesh prints as PyTorch prints one", "[device_mesh]") {
  dist::DeviceMesh mesh("cpu", {2, 2}, {"pp", "dp"}, 3);
  CHECK(dist::to_string(mesh) ==
        "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('pp', 'dp'))");
  CHECK(dist::to_string(mesh["pp"]) == "DeviceMesh('cpu', [1, 3], mesh_dim_names=('pp',))");
  CHECK(dist::to_string(dist::DeviceMesh()) == "DeviceMesh()");
  CHECK(dist::DeviceMesh().empty());
}

TEST_CASE("bad meshes are refused naming what is wrong", "[device_mesh]") {
  CHECK_THROWS_WITH(dist::DeviceMesh("cpu", {2, 2}, {"pp"}, 0),
                    Catch::Contains("2 dimensions but 1 names"));
  CHECK_THROWS_WITH(dist::DeviceMesh("cpu", {2, 2}, {"pp", "pp"}, 0),
                    Catch::Contains("'pp' is given twice"));
  CHECK_THROWS_WITH(dist::DeviceMesh("cpu", {2, 0}, {"pp", "dp"}, 0),
                    Catch::Contains("'dp' has size 0"));
  CHECK_THROWS_WITH(dist::DeviceMesh("cpu", {2, 2}, {"pp", "dp"}, 4),
                    Catch::Contains("rank 4 is not in a mesh of 4 ranks"));
  CHECK_THROWS_WITH(dist::DeviceMesh("tpu", {2}, {"pp"}, 0), Catch::Contains("'tpu'"));
  CHECK_THROWS_WITH(dist::DeviceMesh("cpu", {}, {}, 0), Catch::Contains("no dimensions"));
  dist::DeviceMesh mesh("cpu", {2, 2}, {"pp", "dp"}, 0);
  CHECK_THROWS_WITH(mesh["tp"],
                    Catch::Contains("no dimension named 'tp'") && Catch::Contains("('pp', 'dp')"));
  CHECK_THROWS_WITH(mesh.get_local_rank("x"), Catch::Contains("no dimension named 'x'"));
}

TEST_CASE("each replica takes a disjoint share of the batch", "[device_mesh]") {
  tp::Tensor batch = tp::arange(10).reshape({5, 2});
  std::vector<float> seen;
  std::vector<int64_t> rows;
  for (int rank = 0; rank < 4; ++rank) {
    dist::DeviceMesh mesh("cpu", {2, 2}, {"pp", "dp"}, rank);
    tp::Tensor share = dist::shard_batch(batch, mesh);
    if (rank < 2) {  // the first stage's two replicas cover the batch once
      rows.push_back(share.size(0));
      for (float v : share.to_vector()) seen.push_back(v);
    }
    // Replicas at the same dp index (one per stage) take the same share.
    dist::DeviceMesh other("cpu", {2, 2}, {"pp", "dp"}, rank ^ 2);
    CHECK(share.to_vector() == dist::shard_batch(batch, other).to_vector());
  }
  CHECK(rows == std::vector<int64_t>{3, 2});  // as torch.tensor_split
  CHECK(seen == batch.to_vector());
  CHECK(dist::shard_batch(batch, dist::DeviceMesh()).to_vector() == batch.to_vector());
  dist::DeviceMesh wide("cpu", {1, 8}, {"pp", "dp"}, 0);
  CHECK_THROWS_WITH(dist::shard_batch(batch, wide),
                    Catch::Contains("batch of 5 rows") && Catch::Contains("at least 8 rows"));
}

TEST_CASE("a one-dimensional mesh over a group's ranks", "[device_mesh]") {
  dist::DeviceMesh m = dist::DeviceMesh::over_ranks({2, 5, 7}, "pp", 5);
  CHECK(m.ranks() == std::vector<int>{2, 5, 7});
  CHECK(m.get_local_rank("pp") == 1);
  CHECK(m["pp"].ranks() == std::vector<int>{2, 5, 7});
  CHECK(dist::to_string(m) == "DeviceMesh('cpu', [2, 5, 7], mesh_dim_names=('pp',))");
  CHECK_THROWS_WITH(dist::DeviceMesh::over_ranks({}, "pp", 0), Catch::Contains("no ranks"));
  CHECK_THROWS_WITH(dist::DeviceMesh::over_ranks({1, 1}, "pp", 1),
                    Catch::Contains("rank 1 is listed twice"));
  CHECK_THROWS_WITH(dist::DeviceMesh::over_ranks({0}, "", 0), Catch::Contains("empty name"));
}

// Tests for nn/module_list.h: names, indexing, typed access, not callable.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("ModuleList names children by index and registers their parameters", "[module_list]") {
  nn::ModuleList list(nn::Linear(2, 3), nn::ReLU());
  list->push_back(nn::Linear(3, 1));
  REQUIRE(list->size() == 3);
  std::vector<std::string> names;
  for (auto& [name, p] : list->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK((*list)[1]->type_name() == "ReLU");
  CHECK(list->at<nn::LinearImpl>(2)->out_features == 1);
  CHECK_THROWS_WITH(list->at<nn::LinearImpl>(1), Catch::Contains("ReLU"));
  CHECK_THROWS_WITH((*list)[3], Catch::Contains("index 3") && Catch::Contains("3 modules"));
  int count = 0;
  for (const auto& m : *list) count += m != nullptr;
  CHECK(count == 3);
  CHECK_THROWS_WITH(list(tp::ones({1, 2})), Catch::Contains("not callable"));
}

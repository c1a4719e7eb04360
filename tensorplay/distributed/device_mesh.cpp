// DeviceMesh: row-major layout of ranks over named dimensions, and sub-meshes along one of them.
#include "tensorplay/distributed/device_mesh.h"

#include <set>
#include <stdexcept>

#include "tensorplay/core/ops/split.h"

namespace tensorplay::distributed {

namespace {

std::string names_of(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return "(" + out + ")";
}

}  // namespace

DeviceMesh::DeviceMesh(std::string device_type, std::vector<int> shape,
                       std::vector<std::string> dim_names, int rank)
    : device_type_(std::move(device_type)),
      shape_(std::move(shape)),
      names_(std::move(dim_names)),
      rank_(rank) {
  if (device_type_ != "cpu" && device_type_ != "cuda")
    throw std::invalid_argument("DeviceMesh: device type '" + device_type_ +
                                "' is not \"cpu\" or \"cuda\"");
  if (shape_.empty()) throw std::invalid_argument("DeviceMesh: the mesh shape has no dimensions");
  if (names_.size() != shape_.size())
    throw std::invalid_argument("DeviceMesh: " + std::to_string(shape_.size()) +
                                " dimensions but " + std::to_string(names_.size()) + " names " +
                                names_of(names_) + "; give one name per dimension");
  std::set<std::string> seen;
  int64_t total = 1;
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] < 1)
      throw std::invalid_argument("DeviceMesh: dimension '" + names_[d] + "' has size " +
                                  std::to_string(shape_[d]) + "; sizes must be at least 1");
    if (names_[d].empty())
      throw std::invalid_argument("DeviceMesh: dimension " + std::to_string(d) +
                                  " has an empty name");
    if (!seen.insert(names_[d]).second)
      throw std::invalid_argument("DeviceMesh: the dimension name '" + names_[d] +
                                  "' is given twice in " + names_of(names_));
    total *= shape_[d];
    if (total > (int64_t{1} << 24))
      throw std::invalid_argument("DeviceMesh: the mesh has more than 2^24 ranks");
  }
  if (rank_ < 0 || rank_ >= total)
    throw std::invalid_argument("DeviceMesh: rank " + std::to_string(rank_) +
                                " is not in a mesh of " + std::to_string(total) + " ranks");
  for (int r = 0; r < total; ++r) ranks_.push_back(r);
}

DeviceMesh DeviceMesh::over_ranks(std::vector<int> ranks, std::string dim_name, int rank,
                                  std::string device_type) {
  if (ranks.empty()) throw std::invalid_argument("DeviceMesh::over_ranks: no ranks given");
  DeviceMesh mesh(std::move(device_type), {static_cast<int>(ranks.size())}, {std::move(dim_name)},
                  0);
  std::set<int> seen;
  for (int r : ranks)
    if (r < 0 || !seen.insert(r).second)
      throw std::invalid_argument("DeviceMesh::over_ranks: rank " + std::to_string(r) +
                                  (r < 0 ? " is negative" : " is listed twice"));
  mesh.ranks_ = std::move(ranks);
  mesh.rank_ = rank;
  return mesh;
}

bool DeviceMesh::has_dim(const std::string& dim) const {
  for (const std::string& n : names_)
    if (n == dim) return true;
  return false;
}

int DeviceMesh::dim_index(const std::string& dim) const {
  for (size_t d = 0; d < names_.size(); ++d)
    if (names_[d] == dim) return static_cast<int>(d);
  throw std::invalid_argument("DeviceMesh: no dimension named '" + dim + "'; the mesh has " +
                              (names_.empty() ? std::string("none") : names_of(names_)));
}

std::vector<int> DeviceMesh::get_coordinate() const {
  // Position of this rank in ranks_, unravelled row-major (the last dimension varies fastest).
  int pos = 0;
  while (pos < size() && ranks_[pos] != rank_) ++pos;
  std::vector<int> coord(shape_.size());
  for (int d = ndim() - 1; d >= 0; --d) {
    coord[d] = pos % shape_[d];
    pos /= shape_[d];
  }
  return coord;
}

int DeviceMesh::get_local_rank(const std::string& dim) const {
  return get_coordinate()[dim_index(dim)];
}

DeviceMesh DeviceMesh::operator[](const std::string& dim) const {
  const int d = dim_index(dim);
  std::vector<int> coord = get_coordinate();
  DeviceMesh sub;
  sub.device_type_ = device_type_;
  sub.shape_ = {shape_[d]};
  sub.names_ = {names_[d]};
  sub.rank_ = rank_;
  sub.job_ = job_;
  for (int i = 0; i < shape_[d]; ++i) {
    coord[d] = i;
    int pos = 0;
    for (int k = 0; k < ndim(); ++k) pos = pos * shape_[k] + coord[k];
    sub.ranks_.push_back(ranks_[pos]);
  }
  return sub;
}

DeviceMesh DeviceMesh::with_job(std::shared_ptr<const void> job) const {
  DeviceMesh out = *this;
  out.job_ = std::move(job);
  return out;
}

std::string to_string(const DeviceMesh& mesh) {
  if (mesh.empty()) return "DeviceMesh()";
  // Nested lists, row-major: a bracket opens where an index of a dimension restarts at 0.
  std::string grid;
  const auto& shape = mesh.shape();
  for (int i = 0; i < mesh.size(); ++i) {
    int stride = 1, opens = 0;
    for (int d = mesh.ndim() - 1; d >= 0; --d) {
      stride *= shape[d];
      if (i % stride == 0) ++opens;
    }
    if (i > 0) grid += ", ";
    grid += std::string(opens, '[') + std::to_string(mesh.ranks()[i]);
    stride = 1;
    int closes = 0;
    for (int d = mesh.ndim() - 1; d >= 0; --d) {
      stride *= shape[d];
      if ((i + 1) % stride == 0) ++closes;
    }
    grid += std::string(closes, ']');
  }
  std::string names;
  for (const std::string& n : mesh.mesh_dim_names())
    names += (names.empty() ? "'" : ", '") + n + "'";
  if (mesh.ndim() == 1) names += ",";
  return "DeviceMesh('" + mesh.device_type() + "', " + grid + ", mesh_dim_names=(" + names + "))";
}

Tensor shard_batch(const Tensor& batch, const DeviceMesh& mesh, const std::string& dim) {
  if (!batch.defined()) throw std::invalid_argument("shard_batch: the batch is undefined");
  if (mesh.empty() || !mesh.has_dim(dim)) return batch;
  const int n = mesh.size(dim);
  if (batch.dim() == 0 || batch.size(0) < n)
    throw std::invalid_argument("shard_batch: a batch of " +
                                (batch.dim() == 0 ? std::string("no rows (a scalar)")
                                                  : std::to_string(batch.size(0)) + " rows") +
                                " cannot give each of the " + std::to_string(n) +
                                " ranks of mesh dimension '" + dim + "' a share; pass at least " +
                                std::to_string(n) + " rows");
  return tensor_split(batch, n, 0).at(mesh.get_local_rank(dim));
}

}  // namespace tensorplay::distributed

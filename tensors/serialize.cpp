// Binary checkpoint reading and writing (format documented in serialize.h).
#include "tensors/serialize.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <vector>

namespace tensorplay {
namespace {

constexpr uint32_t kMaxRank = 64;
constexpr uint32_t kMaxNameLength = 1u << 20;

// Integers go through these helpers so the file is little-endian whatever the host is.
template <typename T>
void put(std::ostream& out, T value) {
  auto bits = std::bit_cast<std::array<unsigned char, sizeof(T)>>(value);
  if constexpr (std::endian::native == std::endian::big) std::reverse(bits.begin(), bits.end());
  out.write(reinterpret_cast<const char*>(bits.data()), sizeof(T));
}

template <typename T>
T get(std::istream& in, const std::string& source, const std::string& what) {
  std::array<unsigned char, sizeof(T)> bits;
  if (!in.read(reinterpret_cast<char*>(bits.data()), sizeof(T)))
    throw std::runtime_error("checkpoint " + source + " is truncated while reading " + what);
  if constexpr (std::endian::native == std::endian::big) std::reverse(bits.begin(), bits.end());
  return std::bit_cast<T>(bits);
}

// Element bytes in file order (little-endian) from host order, or back: a swap on big-endian hosts.
void swap_elements_if_big_endian(std::vector<char>& bytes, size_t element_bytes) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + element_bytes <= bytes.size(); i += element_bytes)
      std::reverse(bytes.begin() + i, bytes.begin() + i + element_bytes);
  } else {
    (void)bytes;
    (void)element_bytes;
  }
}

uint8_t dtype_code(DType dtype) { return dtype == DType::Float32 ? 0 : 1; }

}  // namespace

void write_tensors(std::ostream& out, const StateDict& tensors) {
  out.write(kCheckpointMagic, sizeof(kCheckpointMagic));
  put<uint32_t>(out, kCheckpointVersion);
  put<uint64_t>(out, tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined())
      throw std::invalid_argument("write_tensors: tensor '" + name + "' is undefined");
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out.write(name.data(), static_cast<std::streamsize>(name.size()));
    put<uint8_t>(out, dtype_code(tensor.dtype()));
    put<uint32_t>(out, static_cast<uint32_t>(tensor.dim()));
    for (int64_t d : tensor.shape()) put<int64_t>(out, d);
    Tensor host = tensor.detach().cpu();
    std::vector<char> bytes(host.nbytes());
    if (!bytes.empty()) std::memcpy(bytes.data(), host.raw_data(), bytes.size());
    swap_elements_if_big_endian(bytes, element_size(host.dtype()));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  if (!out) throw std::runtime_error("write_tensors: the output stream failed while writing");
}

StateDict read_tensors(std::istream& in, const std::string& source) {
  char magic[sizeof(kCheckpointMagic)];
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kCheckpointMagic, sizeof(magic)) != 0)
    throw std::runtime_error("checkpoint " + source +
                             " is not a tensorplay checkpoint (bad magic; expected \"TPLAYSD\")");
  uint32_t version = get<uint32_t>(in, source, "the version");
  if (version != kCheckpointVersion)
    throw std::runtime_error("checkpoint " + source + " has format version " +
                             std::to_string(version) + "; this build reads version " +
                             std::to_string(kCheckpointVersion));
  uint64_t count = get<uint64_t>(in, source, "the tensor count");
  StateDict out;
  for (uint64_t i = 0; i < count; ++i) {
    std::string what = "tensor " + std::to_string(i);
    uint32_t length = get<uint32_t>(in, source, what + "'s name length");
    if (length > kMaxNameLength)
      throw std::runtime_error("checkpoint " + source + ": " + what + " has a name of " +
                               std::to_string(length) + " bytes (corrupt file?)");
    std::string name(length, '\0');
    if (!in.read(name.data(), length))
      throw std::runtime_error("checkpoint " + source + " is truncated in " + what + "'s name");
    what = "tensor '" + name + "'";
    uint8_t code = get<uint8_t>(in, source, what + "'s dtype");
    if (code > 1)
      throw std::runtime_error("checkpoint " + source + ": " + what + " has unknown dtype code " +
                               std::to_string(code));
    DType dtype = code == 0 ? DType::Float32 : DType::BFloat16;
    uint32_t rank = get<uint32_t>(in, source, what + "'s rank");
    if (rank > kMaxRank)
      throw std::runtime_error("checkpoint " + source + ": " + what + " has rank " +
                               std::to_string(rank) + " (corrupt file?)");
    Shape shape(rank);
    for (auto& d : shape) {
      d = get<int64_t>(in, source, what + "'s dims");
      if (d < 0)
        throw std::runtime_error("checkpoint " + source + ": " + what + " has a negative size");
    }
    Tensor t = empty(shape, {.dtype = dtype, .device = cpu()});
    std::vector<char> bytes(t.nbytes());
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
      throw std::runtime_error("checkpoint " + source + " is truncated in " + what + "'s data (" +
                               std::to_string(bytes.size()) + " bytes expected)");
    swap_elements_if_big_endian(bytes, element_size(dtype));
    if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    if (out.contains(name))
      throw std::runtime_error("checkpoint " + source + " holds " + what + " twice");
    out.insert(name, t);
  }
  return out;
}

void save_tensors(const StateDict& tensors, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw std::runtime_error("cannot open '" + path + "' for writing (does its folder exist?)");
  write_tensors(out, tensors);
  out.close();
  if (!out) throw std::runtime_error("writing '" + path + "' failed (disk full?)");
}

StateDict load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open checkpoint '" + path + "' for reading");
  return read_tensors(in, "'" + path + "'");
}

}  // namespace tensorplay

// safetensors files (format in safetensors.h): writing as the reference writer does, reading
// through a memory map after the header checked out, and sharded checkpoints with their index.
#include "tensorplay/core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/detail/safetensors_format.h"

namespace tensorplay {
namespace {

namespace fs = std::filesystem;
using detail::StDType;
using detail::StEntry;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("safetensors: " + source + ": " + what);
}

std::string system_error(const std::string& what, const std::string& path) {
  return "safetensors: cannot " + what + " " + path + ": " + std::strerror(errno);
}

// A whole file mapped read-only; unmapped when destroyed.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(system_error("open", path));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const std::string message = system_error("stat", path);
      ::close(fd);
      throw std::runtime_error(message);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw std::runtime_error("safetensors: " + path + " is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const std::string message = system_error("map", path);
        ::close(fd);
        throw std::runtime_error(message);
      }
      data_ = static_cast<const unsigned char*>(p);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);  // the mapping stays valid
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

StDType st_dtype_of(DType dtype) { return dtype == DType::Float32 ? StDType::F32 : StDType::BF16; }

// Copies file elements (little-endian) into a host tensor of the same element width.
void copy_elements(void* dst, const unsigned char* src, size_t bytes, size_t element_bytes) {
  // A zero-element tensor's data may be null: memcpy with a null pointer is undefined even for 0
  // bytes.
  if (bytes == 0) return;
  std::memcpy(dst, src, bytes);
  if constexpr (std::endian::native == std::endian::big) {
    auto* p = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i + element_bytes <= bytes; i += element_bytes)
      std::reverse(p + i, p + i + element_bytes);
  } else {
    (void)element_bytes;
  }
}

Tensor read_entry(const StEntry& entry, const unsigned char* data) {
  const unsigned char* src = data + entry.begin;
  const size_t bytes = entry.end - entry.begin;
  if (entry.dtype == StDType::F16) {
    Tensor t = empty(entry.shape, TensorOptions{});
    detail::st_decode_to_float(StDType::F16, src, bytes / 2, static_cast<float*>(t.raw_data()));
    return t;
  }
  const DType dtype = entry.dtype == StDType::F32 ? DType::Float32 : DType::BFloat16;
  TensorOptions options;
  options.dtype = dtype;
  Tensor t = empty(entry.shape, options);
  copy_elements(t.raw_data(), src, bytes, element_size(dtype));
  return t;
}

void write_all(std::ofstream& out, const void* data, size_t bytes, const std::string& path) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error(system_error("write", path));
}

// A shard name from an index must be a plain file name beside it.
void check_shard_name(const std::string& shard, const std::string& index_path) {
  if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
      shard.find('\0') != std::string::npos)
    fail(index_path, "the weight map names shard \"" + shard +
                         "\", which is not a plain file name beside the index");
}

std::string shard_file_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", index, count);
  return buf;
}

}  // namespace

void save_safetensors(const StateDict& tensors, const std::string& path,
                      const SafetensorsMetadata& metadata) {
  std::vector<StEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined())
      throw std::invalid_argument("save_safetensors: tensor \"" + name + "\" is undefined");
    entries.push_back({name, st_dtype_of(tensor.dtype()), tensor.shape(), 0, 0});
  }
  detail::st_assign_offsets(entries);
  const std::string header = detail::encode_safetensors_header(entries, metadata);

  // Written beside the target and renamed over it, so a reader never sees half a file.
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(system_error("create", partial));
    write_all(out, header.data(), header.size(), partial);
    for (const StEntry& entry : entries) {
      Tensor t = tensors.at(entry.name);
      if (!t.device().is_cpu()) t = t.cpu();
      if constexpr (std::endian::native == std::endian::big) {
        std::vector<unsigned char> swapped(t.nbytes());
        copy_elements(swapped.data(), static_cast<const unsigned char*>(t.raw_data()), t.nbytes(),
                      element_size(t.dtype()));
        write_all(out, swapped.data(), swapped.size(), partial);
      } else {
        write_all(out, t.raw_data(), t.nbytes(), partial);
      }
    }
    out.close();
    if (!out) throw std::runtime_error(system_error("write", partial));
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) {
    fs::remove(partial, ec);
    throw std::runtime_error("safetensors: cannot rename " + partial + " to " + path);
  }
}

StateDict load_safetensors(const std::string& path, const SafetensorsLoadOptions& options) {
  MappedFile file(path);
  detail::StLayout layout = detail::parse_safetensors(file.data(), file.size(), path);
  StateDict out;
  const unsigned char* data = file.data() + layout.data_start;
  for (const StEntry& entry : layout.entries) {
    if (options.select && !options.select(entry.name)) continue;
    out.insert(entry.name, read_entry(entry, data));
  }
  if (options.metadata != nullptr) *options.metadata = std::move(layout.metadata);
  return out;
}

void save_safetensors_folder(const StateDict& tensors, const std::string& folder,
                             uint64_t max_shard_bytes, const SafetensorsMetadata& metadata) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec)
    throw std::runtime_error("safetensors: cannot create folder " + folder + ": " + ec.message());
  const fs::path dir(folder);
  // Tensors into shards in order, as transformers' splitter does.
  std::vector<StateDict> shards(1);
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined())
      throw std::invalid_argument("save_safetensors_folder: tensor \"" + name + "\" is undefined");
    const uint64_t bytes = tensor.nbytes();
    if (bytes > max_shard_bytes) {  // a shard of its own
      if (!shards.back().empty()) shards.emplace_back();
      shards.back().insert(name, tensor);
      shards.emplace_back();
      shard_bytes = 0;
    } else {
      if (shard_bytes + bytes > max_shard_bytes && !shards.back().empty()) {
        shards.emplace_back();
        shard_bytes = 0;
      }
      shards.back().insert(name, tensor);
      shard_bytes += bytes;
    }
    total_bytes += bytes;
  }
  if (shards.size() > 1 && shards.back().empty()) shards.pop_back();

  if (shards.size() == 1) {
    save_safetensors(shards[0], (dir / kSafetensorsSingleName).string(), metadata);
    fs::remove(dir / kSafetensorsIndexName, ec);  // a stale index would describe other shards
    return;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(i + 1, shards.size());
    save_safetensors(shards[i], (dir / name).string(), metadata);
    for (const auto& item : shards[i]) weight_map[item.first] = name;
  }
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                          {"weight_map", std::move(weight_map)}};
  const std::string index_path = (dir / kSafetensorsIndexName).string();
  {
    std::ofstream out(index_path, std::ios::trunc);
    if (!out) throw std::runtime_error(system_error("create", index_path));
    out << index.dump(2) << "\n";
    if (!out) throw std::runtime_error(system_error("write", index_path));
  }
  // A stale single file would be read instead of the shards.
  fs::remove(dir / kSafetensorsSingleName, ec);
}

namespace {

// The index file's JSON, with a "weight_map" object.
nlohmann::json read_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) throw std::runtime_error(system_error("open", index_path));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(index_path, std::string("the index is not valid JSON (") + e.what() + ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(index_path, "the index has no \"weight_map\" object (name -> shard file)");
  return index;
}

// Shard -> the tensors the weight map puts there, shards in name order.
std::map<std::string, std::vector<std::string>> tensors_by_shard(const nlohmann::json& weight_map,
                                                                 const std::string& index_path) {
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : weight_map.items()) {
    if (!shard.is_string())
      fail(index_path, "the weight map's entry for \"" + name + "\" is not a file name");
    const std::string& file = shard.get_ref<const std::string&>();
    check_shard_name(file, index_path);
    by_shard[file].push_back(name);
  }
  return by_shard;
}

// The tensors of one shard that `options` selects, each checked against the index: the shard
// holds only what the index puts there, and all of it.
StateDict load_shard(const std::string& index_path, const nlohmann::json& weight_map,
                     const std::string& shard, const std::vector<std::string>& names,
                     const SafetensorsLoadOptions& options) {
  const fs::path shard_path = fs::path(index_path).parent_path() / shard;
  if (!fs::exists(shard_path)) {
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 3; ++i) listed += (i ? ", " : "") + names[i];
    if (names.size() > 3) listed += ", ...";
    fail(index_path, "shard " + shard + " is missing (expected at " + shard_path.string() +
                         "; the index puts " + std::to_string(names.size()) +
                         " tensors there: " + listed + ")");
  }
  std::set<std::string> seen;
  SafetensorsLoadOptions shard_options;
  shard_options.select = [&](const std::string& name) {
    seen.insert(name);
    auto it = weight_map.find(name);
    if (it == weight_map.end())
      fail(shard_path.string(),
           "holds tensor \"" + name + "\", which the index " + index_path + " does not list");
    if (it->get_ref<const std::string&>() != shard)
      fail(shard_path.string(), "holds tensor \"" + name + "\", which the index puts in " +
                                    it->get_ref<const std::string&>());
    return !options.select || options.select(name);
  };
  StateDict part = load_safetensors(shard_path.string(), shard_options);
  for (const std::string& name : names)
    if (!seen.count(name))
      fail(index_path,
           "the index puts tensor \"" + name + "\" in shard " + shard + ", which does not hold it");
  return part;
}

// The index's "metadata" strings (numbers as their JSON text) into `out`.
void read_index_metadata(const nlohmann::json& index, SafetensorsMetadata& out) {
  out.clear();
  if (auto it = index.find("metadata"); it != index.end() && it->is_object())
    for (const auto& [key, value] : it->items()) {
      if (value.is_string())
        out[key] = value.get<std::string>();
      else if (value.is_number())
        out[key] = value.dump();
    }
}

}  // namespace

StateDict load_safetensors_index(const std::string& index_path,
                                 const SafetensorsLoadOptions& options) {
  const nlohmann::json index = read_index(index_path);
  const nlohmann::json& weight_map = index["weight_map"];
  StateDict out;
  for (const auto& [shard, names] : tensors_by_shard(weight_map, index_path)) {
    const bool wanted = !options.select || std::any_of(names.begin(), names.end(), options.select);
    if (!wanted) continue;
    for (const auto& [name, tensor] : load_shard(index_path, weight_map, shard, names, options))
      out.insert(name, tensor);
  }
  if (options.metadata != nullptr) read_index_metadata(index, *options.metadata);
  return out;
}

StateDict load_safetensors_folder(const std::string& folder,
                                  const SafetensorsLoadOptions& options) {
  const fs::path dir(folder);
  if (fs::exists(dir / kSafetensorsSingleName))
    return load_safetensors((dir / kSafetensorsSingleName).string(), options);
  if (fs::exists(dir / kSafetensorsIndexName))
    return load_safetensors_index((dir / kSafetensorsIndexName).string(), options);
  throw std::runtime_error("safetensors: " + folder + " holds neither " + kSafetensorsSingleName +
                           " nor " + kSafetensorsIndexName);
}

}  // namespace tensorplay

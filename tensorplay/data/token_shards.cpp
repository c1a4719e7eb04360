// Token shard files: writing in nanoGPT's and llm.c's layouts, mapping them read-only, and
// finding a folder's shards.
#include "tensorplay/data/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tensorplay::data {
namespace {

namespace fs = std::filesystem;
constexpr int32_t kLlmCMagic = 20240520;
constexpr size_t kLlmCHeaderBytes = 256 * sizeof(int32_t);

size_t element_bytes(TokenType type) { return type == TokenType::UInt16 ? 2 : 4; }

}  // namespace

TokenType token_type_for(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenType::UInt16 : TokenType::UInt32;
}

const char* token_type_name(TokenType type) {
  return type == TokenType::UInt16 ? "uint16" : "uint32";
}

void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens, TokenType type,
                       ShardFormat format) {
  if (format == ShardFormat::LlmC && type != TokenType::UInt16)
    throw std::invalid_argument(
        "write_token_shard: llm.c shards hold uint16 ids; write uint32 "
        "ids in nanoGPT's format");
  const int64_t limit = type == TokenType::UInt16 ? 65535 : 4294967295LL;
  std::vector<unsigned char> bytes;
  if (format == ShardFormat::LlmC) {
    int32_t header[256] = {kLlmCMagic, 1, static_cast<int32_t>(tokens.size())};
    bytes.resize(kLlmCHeaderBytes);
    std::memcpy(bytes.data(), header, kLlmCHeaderBytes);
  }
  const size_t width = element_bytes(type), start = bytes.size();
  bytes.resize(start + tokens.size() * width);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > limit)
      throw std::invalid_argument("write_token_shard: token " + std::to_string(tokens[i]) +
                                  " at position " + std::to_string(i) + " does not fit " +
                                  token_type_name(type));
    const auto v = static_cast<uint32_t>(tokens[i]);
    for (size_t b = 0; b < width; ++b) bytes[start + i * width + b] = (v >> (8 * b)) & 0xff;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("write_token_shard: cannot write " + path);
}

TokenShard::TokenShard(const std::string& path, TokenType type) : path_(path), type_(type) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("token shard " + path + ": cannot open it");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error("token shard " + path + ": cannot read its size");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ > 0) {
    map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
    if (map_ == MAP_FAILED) map_ = nullptr;
  }
  ::close(fd);
  if (map_bytes_ > 0 && map_ == nullptr)
    throw std::runtime_error("token shard " + path + ": cannot map it");
  const auto* bytes = static_cast<const unsigned char*>(map_);
  size_t skip = 0;
  int32_t first = 0;
  if (map_bytes_ >= kLlmCHeaderBytes) std::memcpy(&first, bytes, sizeof(first));
  if (first == kLlmCMagic) {  // llm.c: uint16 after the header
    int32_t header[3];
    std::memcpy(header, bytes, sizeof(header));
    type_ = TokenType::UInt16;
    skip = kLlmCHeaderBytes;
    if (static_cast<size_t>(header[2]) * 2 != map_bytes_ - skip) {
      release();
      throw std::runtime_error("token shard " + path + ": its llm.c header counts " +
                               std::to_string(header[2]) + " tokens, the file holds " +
                               std::to_string((map_bytes_ - skip) / 2));
    }
  }
  if ((map_bytes_ - skip) % element_bytes(type_) != 0) {
    release();
    throw std::runtime_error("token shard " + path + ": " + std::to_string(map_bytes_) +
                             " bytes is not a whole number of " + token_type_name(type_) +
                             " tokens");
  }
  tokens_ = bytes + skip;
  count_ = static_cast<int64_t>((map_bytes_ - skip) / element_bytes(type_));
}

void TokenShard::release() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  tokens_ = nullptr;
  count_ = 0;
}

TokenShard::~TokenShard() { release(); }

TokenShard::TokenShard(TokenShard&& o) noexcept
    : path_(std::move(o.path_)),
      tokens_(o.tokens_),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      count_(o.count_),
      type_(o.type_) {
  o.map_ = nullptr;
  o.tokens_ = nullptr;
  o.count_ = 0;
}

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    tokens_ = o.tokens_, map_ = o.map_, map_bytes_ = o.map_bytes_, count_ = o.count_;
    type_ = o.type_;
    o.map_ = nullptr, o.tokens_ = nullptr, o.count_ = 0;
  }
  return *this;
}

int64_t TokenShard::at(int64_t i) const {
  const unsigned char* p = tokens_ + static_cast<size_t>(i) * element_bytes(type_);
  if (type_ == TokenType::UInt16) return p[0] | (p[1] << 8);
  return static_cast<int64_t>(p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24));
}

std::vector<TokenShard> open_token_shards(const std::string& path) {
  const fs::path p(path);
  const fs::path folder = fs::is_directory(p) ? p : p.parent_path();
  TokenType type = TokenType::UInt16;
  const fs::path meta = folder / kTokenShardsMetaName;
  if (fs::exists(meta)) {
    std::ifstream in(meta);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("dtype") ||
        (j["dtype"] != "uint16" && j["dtype"] != "uint32"))
      throw std::runtime_error(meta.string() + ": expected {\"dtype\": \"uint16\" or \"uint32\"}");
    type = j["dtype"] == "uint16" ? TokenType::UInt16 : TokenType::UInt32;
  }
  std::vector<std::string> files;
  if (fs::is_directory(p)) {
    for (const auto& entry : fs::directory_iterator(p))
      if (entry.is_regular_file() && entry.path().extension() == ".bin")
        files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
  } else if (fs::exists(p)) {
    files.push_back(path);
  }
  if (files.empty())
    throw std::runtime_error("token shards: " + path +
                             " is neither a shard file nor a folder holding .bin shards "
                             "(tools/tp-tokenize writes them)");
  std::vector<TokenShard> shards;
  for (const auto& f : files) shards.emplace_back(f, type);
  return shards;
}

}  // namespace tensorplay::data

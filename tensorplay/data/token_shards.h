// Token shards: tokenized text stored once as flat binary arrays (nanoGPT's header-free uint16 or
// uint32 `.bin` files, or llm.c's headered uint16 shards), written here and read through a
// read-only memory map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorplay::data {

/// Element type of a shard's token ids (little-endian).
enum class TokenType { UInt16, UInt32 };
/// uint16 when every id < vocab_size fits (vocab_size <= 65536), else uint32.
TokenType token_type_for(int64_t vocab_size);
/// "uint16" or "uint32".
const char* token_type_name(TokenType type);

/// How a shard lays out its tokens.
enum class ShardFormat {
  NanoGPT,  ///< the ids alone, as numpy's tofile writes them (nanoGPT's train.bin)
  LlmC,     ///< llm.c: 256 int32 header (magic 20240520, version 1, token count), then uint16 ids
};

/// The file beside the shards (in their folder) that names their element type and vocabulary:
/// {"dtype": "uint16" | "uint32", "vocab_size": N, ...}. Without it, shards are uint16.
inline constexpr const char* kTokenShardsMetaName = "tokens.json";

/// Writes `tokens` to `path` (created or truncated) in `format` with elements of `type`.
/// Throws std::invalid_argument for an id that does not fit `type` (naming it and its position)
/// or llm.c's format with uint32; std::runtime_error naming the path on I/O failure.
void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens, TokenType type,
                       ShardFormat format = ShardFormat::NanoGPT);

/// One shard mapped read-only. An llm.c header (its magic number first) is recognised and
/// skipped; anything else is read as a header-free array of `type`.
class TokenShard {
 public:
  /// Throws std::runtime_error naming the file when it cannot be opened or mapped, its size is
  /// not a whole number of tokens, or an llm.c header's count disagrees with the file.
  TokenShard(const std::string& path, TokenType type);
  ~TokenShard();
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  /// Number of tokens.
  int64_t size() const { return count_; }
  /// Token i (0 <= i < size()).
  int64_t at(int64_t i) const;
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const unsigned char* tokens_ = nullptr;  // first token, inside the mapping
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  int64_t count_ = 0;
  TokenType type_ = TokenType::UInt16;
};

/// The shards at `path`: a file, or every `.bin` file of a folder in name order, their type from
/// the folder's tokens.json (uint16 without one). Throws std::runtime_error naming the path when
/// it holds no shard.
std::vector<TokenShard> open_token_shards(const std::string& path);

}  // namespace tensorplay::data

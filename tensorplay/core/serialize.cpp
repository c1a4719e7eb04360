// Binary checkpoint reading and writing (format documented in serialize.h). The reader trusts no
// field: sizes are bounded before anything is allocated, every record and the whole file carry a
// CRC-32, and each error names the tensor and the byte offset where the file went wrong.
#include "tensorplay/core/serialize.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
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
// Data is read in pieces of at most this size when the stream cannot say how long it is, so a
// corrupt length costs at most one piece of memory before the stream runs out.
constexpr size_t kReadPiece = size_t{16} << 20;

uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes a uInt length
    auto piece = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, piece));
    p += piece;
    bytes -= piece;
  }
  return crc;
}

std::string hex(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", value);
  return buf;
}

// Element bytes in file order (little-endian) from host order, or back: a swap on big-endian hosts.
void swap_elements_if_big_endian(char* bytes, size_t size, size_t element_bytes) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + element_bytes <= size; i += element_bytes)
      std::reverse(bytes + i, bytes + i + element_bytes);
  } else {
    (void)bytes;
    (void)size;
    (void)element_bytes;
  }
}

// A name as messages show it: a damaged name may hold zero bytes (which would end the message
// early) or control characters, so those are escaped, and a long one is cut.
std::string printable(const std::string& name) {
  std::string out;
  for (unsigned char c : name.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return name.size() > 200 ? out + "..." : out;
}

uint8_t dtype_code(DType dtype) { return dtype == DType::Float32 ? 0 : 1; }

// -- writing --------------------------------------------------------------------------------------

// Writes to the stream while keeping the whole-file CRC and the current record's CRC.
class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}

  void bytes(const void* data, size_t size) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    file_crc_ = crc32_update(file_crc_, data, size);
    record_crc_ = crc32_update(record_crc_, data, size);
  }
  template <typename T>
  void put(T value) {
    auto bits = std::bit_cast<std::array<unsigned char, sizeof(T)>>(value);
    if constexpr (std::endian::native == std::endian::big) std::reverse(bits.begin(), bits.end());
    bytes(bits.data(), sizeof(T));
  }
  void start_record() { record_crc_ = crc32_update(0, nullptr, 0); }
  uint32_t record_crc() const { return record_crc_; }
  uint32_t file_crc() const { return file_crc_; }

 private:
  std::ostream& out_;
  uint32_t file_crc_ = crc32_update(0, nullptr, 0);
  uint32_t record_crc_ = crc32_update(0, nullptr, 0);
};

// -- reading --------------------------------------------------------------------------------------

// Reads from the stream, counting the offset, keeping the CRCs, and knowing (when the stream can
// seek) how many bytes are left, so that no length read from the file is trusted unchecked.
class Reader {
 public:
  Reader(std::istream& in, std::string source) : in_(in), source_(std::move(source)) {
    std::streampos start = in_.tellg();
    if (start != std::streampos(-1) && in_.seekg(0, std::ios::end)) {
      std::streampos end = in_.tellg();
      if (end != std::streampos(-1) && end >= start) left_ = static_cast<int64_t>(end - start);
      in_.seekg(start);
    }
    if (!in_) {  // not seekable after all: read without a bound on what is left
      in_.clear();
      left_ = -1;
    }
  }

  int64_t offset() const { return offset_; }
  /// Bytes left in the stream, or -1 when the stream cannot say.
  int64_t left() const { return left_ < 0 ? -1 : left_ - offset_; }
  const std::string& source() const { return source_; }

  /// Throws naming the source, what is wrong and the byte offset, with a hint for a damaged
  /// file unless `hint` gives another.
  [[noreturn]] void fail(int64_t at, const std::string& what,
                         const std::string& hint =
                             "the file is corrupt or was not written "
                             "completely: save it again or restore a good "
                             "copy") const {
    throw std::runtime_error("checkpoint " + source_ + ": " + what + " (at byte " +
                             std::to_string(at) + "); " + hint);
  }

  void bytes(void* data, size_t size, const std::string& what) {
    int64_t at = offset_;
    if (size > 0 && !in_.read(static_cast<char*>(data), static_cast<std::streamsize>(size)))
      fail(at, "truncated: the file ends inside " + what + " (" + std::to_string(size) +
                   " bytes expected, " + std::to_string(in_.gcount()) + " found)");
    offset_ += static_cast<int64_t>(size);
    file_crc_ = crc32_update(file_crc_, data, size);
    record_crc_ = crc32_update(record_crc_, data, size);
  }
  template <typename T>
  T get(const std::string& what) {
    std::array<unsigned char, sizeof(T)> bits;
    bytes(bits.data(), sizeof(T), what);
    if constexpr (std::endian::native == std::endian::big) std::reverse(bits.begin(), bits.end());
    return std::bit_cast<T>(bits);
  }

  void start_record() { record_crc_ = crc32_update(0, nullptr, 0); }
  uint32_t record_crc() const { return record_crc_; }
  uint32_t file_crc() const { return file_crc_; }

  /// Whether the stream has no byte left.
  bool at_end() { return in_.peek() == std::char_traits<char>::eof(); }
  /// Counts the bytes left (for the trailing-bytes message), reading at most a few MiB.
  int64_t count_rest() {
    if (left() >= 0) return left();
    int64_t n = 0;
    char buf[4096];
    while (n < (int64_t{4} << 20) && in_.read(buf, sizeof(buf))) n += in_.gcount();
    return n + in_.gcount();
  }

 private:
  std::istream& in_;
  std::string source_;
  int64_t offset_ = 0;
  int64_t left_ = -1;
  uint32_t file_crc_ = crc32_update(0, nullptr, 0);
  uint32_t record_crc_ = crc32_update(0, nullptr, 0);
};

// One record's header as read, with where its fields lie (for errors).
struct RecordHeader {
  std::string name, what;  // `what` names the tensor in errors
  int64_t record_at = 0, dtype_at = 0, rank_at = 0;
  uint8_t dtype_code = 0;
  Shape shape;
  uint64_t stored_bytes = 0;  // version 2 on
};

// Reads a record's name, dtype code, shape and (version 2 on) data length, checking the header's
// checksum before anything is interpreted.
RecordHeader read_header(Reader& r, uint32_t version, uint64_t index) {
  RecordHeader h;
  h.record_at = r.offset();
  r.start_record();
  h.what =
      "tensor " + std::to_string(index) + " (record at byte " + std::to_string(h.record_at) + ")";
  uint32_t length = r.get<uint32_t>(h.what + "'s name length");
  if (length > kMaxNameLength || (r.left() >= 0 && length > r.left()))
    r.fail(h.record_at, h.what + " has a name of " + std::to_string(length) + " bytes, more than " +
                            (length > kMaxNameLength ? "the limit of 2^20" : "the file holds"));
  h.name.assign(length, '\0');
  r.bytes(h.name.data(), length, h.what + "'s name");
  h.what = "tensor '" + printable(h.name) + "' (" + std::to_string(index) + ", record at byte " +
           std::to_string(h.record_at) + ")";
  h.dtype_at = r.offset();
  h.dtype_code = r.get<uint8_t>(h.what + "'s dtype");
  h.rank_at = r.offset();
  uint32_t rank = r.get<uint32_t>(h.what + "'s rank");
  if (rank > kMaxRank)
    r.fail(h.rank_at, h.what + " has rank " + std::to_string(rank) + ", more than the limit of " +
                          std::to_string(kMaxRank));
  h.shape.resize(rank);
  for (uint32_t d = 0; d < rank; ++d) h.shape[d] = r.get<int64_t>(h.what + "'s dims");
  if (version >= 2) {
    h.stored_bytes = r.get<uint64_t>(h.what + "'s data length");
    uint32_t computed = r.record_crc();
    const int64_t crc_at = r.offset();
    uint32_t stored = r.get<uint32_t>(h.what + "'s header checksum");
    if (stored != computed)
      r.fail(crc_at, h.what + ": header checksum mismatch (stored " + hex(stored) + ", computed " +
                         hex(computed) + "): its name, dtype or shape is damaged");
  }
  return h;
}

// The header's dtype, and the bytes its data takes, checked against the file.
std::pair<DType, uint64_t> interpret_header(Reader& r, uint32_t version, const RecordHeader& h) {
  if (h.dtype_code > 1)
    r.fail(h.dtype_at, h.what + " has unknown dtype code " + std::to_string(h.dtype_code) +
                           " (0 = float32, 1 = bfloat16)");
  const DType dtype = h.dtype_code == 0 ? DType::Float32 : DType::BFloat16;
  int64_t elements = 0;
  try {
    elements = check_shape(h.shape, element_size(dtype), "shape");
  } catch (const std::invalid_argument& e) {
    r.fail(h.rank_at, h.what + " has an impossible shape " + to_string(h.shape) + ": " + e.what());
  }
  const int64_t data_at = r.offset();
  const auto bytes = static_cast<uint64_t>(elements) * element_size(dtype);
  if (version >= 2 && h.stored_bytes != bytes)
    r.fail(data_at, h.what + " says its data has " + std::to_string(h.stored_bytes) +
                        " bytes, but shape " + to_string(h.shape) + " needs " +
                        std::to_string(bytes));
  if (r.left() >= 0 && bytes > static_cast<uint64_t>(r.left()))
    r.fail(data_at, h.what + " of shape " + to_string(h.shape) + " needs " + std::to_string(bytes) +
                        " bytes of data, but only " + std::to_string(r.left()) +
                        " bytes are left in the file (truncated, or a damaged size)");
  return {dtype, bytes};
}

// Reads `bytes` of data into a new tensor.
Tensor read_data(Reader& r, const Shape& shape, DType dtype, uint64_t bytes,
                 const std::string& what) {
  Tensor t;
  if (r.left() >= 0) {  // the bytes are there: read them straight into the tensor
    t = empty(shape, {.dtype = dtype, .device = cpu()});
    r.bytes(t.raw_data(), bytes, what + "'s data");
  } else {  // a stream of unknown length: grow a buffer as the bytes arrive, then allocate
    std::vector<char> data;
    while (data.size() < bytes) {
      size_t piece = std::min<uint64_t>(bytes - data.size(), kReadPiece);
      data.resize(data.size() + piece);
      r.bytes(data.data() + data.size() - piece, piece, what + "'s data");
    }
    t = empty(shape, {.dtype = dtype, .device = cpu()});
    if (bytes > 0) std::memcpy(t.raw_data(), data.data(), bytes);
  }
  return t;
}

// Reads one record (the tensor's fields, checks, data) into `out`.
void read_record(Reader& r, uint32_t version, uint64_t index, StateDict& out) {
  const RecordHeader h = read_header(r, version, index);
  // Only now, with the header's checksum checked, are its fields interpreted.
  const auto [dtype, bytes] = interpret_header(r, version, h);
  if (out.contains(h.name)) r.fail(h.record_at, "the file holds " + h.what + " twice");
  r.start_record();
  Tensor t = read_data(r, h.shape, dtype, bytes, h.what);
  if (version >= 2) {
    uint32_t computed = r.record_crc();
    const int64_t crc_at = r.offset();
    uint32_t stored = r.get<uint32_t>(h.what + "'s data checksum");
    if (stored != computed)
      r.fail(crc_at, h.what + ": data checksum mismatch (stored " + hex(stored) + ", computed " +
                         hex(computed) + "): its values are damaged");
  }
  swap_elements_if_big_endian(static_cast<char*>(t.raw_data()), bytes, element_size(dtype));
  out.insert(h.name, t);
}

}  // namespace

void write_tensors(std::ostream& out, const StateDict& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined())
      throw std::invalid_argument("write_tensors: tensor '" + name + "' is undefined");
    if (name.size() > kMaxNameLength)
      throw std::invalid_argument("write_tensors: tensor name '" + name.substr(0, 64) +
                                  "...' is longer than 2^20 bytes");
  }
  Writer w(out);
  w.bytes(kCheckpointMagic, sizeof(kCheckpointMagic));
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint64_t>(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    w.start_record();
    w.put<uint32_t>(static_cast<uint32_t>(name.size()));
    w.bytes(name.data(), name.size());
    w.put<uint8_t>(dtype_code(tensor.dtype()));
    w.put<uint32_t>(static_cast<uint32_t>(tensor.dim()));
    for (int64_t d : tensor.shape()) w.put<int64_t>(d);
    w.put<uint64_t>(tensor.nbytes());
    w.put<uint32_t>(w.record_crc());
    Tensor host = tensor.detach().cpu();
    std::vector<char> bytes(host.nbytes());
    if (!bytes.empty()) std::memcpy(bytes.data(), host.raw_data(), bytes.size());
    swap_elements_if_big_endian(bytes.data(), bytes.size(), element_size(host.dtype()));
    w.start_record();
    w.bytes(bytes.data(), bytes.size());
    w.put<uint32_t>(w.record_crc());
  }
  w.put<uint32_t>(w.file_crc());
  if (!out) throw std::runtime_error("write_tensors: the output stream failed while writing");
}

StateDict read_tensors(std::istream& in, const std::string& source) {
  Reader r(in, source);
  char magic[sizeof(kCheckpointMagic)];
  if (r.left() >= 0 && r.left() < static_cast<int64_t>(sizeof(magic)))
    r.fail(0, "the file has " + std::to_string(r.left()) +
                  " bytes, too few for a tensorplay checkpoint (it starts with \"TPLAYSD\")");
  r.bytes(magic, sizeof(magic), "the magic bytes");
  if (std::memcmp(magic, kCheckpointMagic, sizeof(magic)) != 0)
    r.fail(0, "this is not a tensorplay checkpoint (bad magic; expected \"TPLAYSD\")",
           "pass a file written by save_tensors, nn::save or optim::save");
  uint32_t version = r.get<uint32_t>("the version");
  if (version < kCheckpointOldestVersion || version > kCheckpointVersion)
    r.fail(8,
           "format version " + std::to_string(version) + " is not one this build reads (" +
               std::to_string(kCheckpointOldestVersion) + " to " +
               std::to_string(kCheckpointVersion) + ")",
           "read it with the tensorplay that wrote it, or a newer one");
  // A damaged count needs no bound of its own: nothing is allocated for it, and each record read
  // consumes bytes of the file, so a count larger than the file ends at its end.
  uint64_t count = r.get<uint64_t>("the tensor count");
  StateDict out;
  for (uint64_t i = 0; i < count; ++i) read_record(r, version, i, out);
  if (version >= 2) {
    uint32_t computed = r.file_crc();
    const int64_t crc_at = r.offset();
    uint32_t stored = r.get<uint32_t>("the file checksum");
    if (stored != computed)
      r.fail(crc_at, "whole-file checksum mismatch (stored " + hex(stored) + ", computed " +
                         hex(computed) + ")");
  }
  if (!r.at_end()) {
    const int64_t end_at = r.offset();
    r.fail(end_at, std::to_string(r.count_rest()) +
                       " unexpected bytes follow the last tensor (trailing garbage: was "
                       "something appended to the file?)");
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

// The safetensors byte format: header parsing with every bound checked, the reference writer's
// header, and element widening. The reader trusts no field of the file.
#include "tensorplay/core/detail/safetensors_format.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace tensorplay::detail {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("safetensors: " + source + ": " + what);
}

// A name as messages show it: control characters escaped, a long one cut.
std::string quoted(const std::string& name) {
  std::string out = "\"";
  const size_t shown = std::min<size_t>(name.size(), 120);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '"') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (name.size() > shown ? "...\"" : "\"");
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string range_string(uint64_t begin, uint64_t end) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%llu, %llu]", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end));
  return buf;
}

// Known safetensors dtypes that tensorplay does not read, so that the message can tell a valid
// but unsupported file from a damaged one.
bool is_known_unsupported(const std::string& dtype) {
  static const std::set<std::string> known = {
      "BOOL",    "U8",  "I8",  "I16",         "U16",        "I32",     "U32",
      "I64",     "U64", "F64", "F8_E5M2",     "F8_E4M3",    "F8_E8M0", "F6_E2M3",
      "F6_E3M2", "F4",  "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
  return known.count(dtype) != 0;
}

// Parses JSON and refuses an object that repeats a key (nlohmann would keep the last silently).
Json parse_json_without_repeats(const char* begin, const char* end, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!open_objects.empty() && !open_objects.back().insert(key).second) {
          if (open_objects.size() == 1)
            fail(source, "the header names tensor " + quoted(key) +
                             " twice; each name may appear once (rewrite the file)");
          fail(source, "the header repeats the key " + quoted(key) + " inside one object");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(begin, end, callback);
  } catch (const Json::exception& e) {
    fail(source, std::string("the header is not valid JSON (") + e.what() + ")");
  }
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xffu);
}

// The entry's "dtype": F32, BF16 or F16 (`what` names the tensor in errors).
StDType parse_dtype(const Json& value, const std::string& what, const std::string& source) {
  auto dtype_it = value.find("dtype");
  if (dtype_it == value.end()) fail(source, what + " has no \"dtype\"");
  if (!dtype_it->is_string()) fail(source, what + ": \"dtype\" is not a string");
  const std::string& dtype = dtype_it->get_ref<const std::string&>();
  if (dtype == "F32") return StDType::F32;
  if (dtype == "BF16") return StDType::BF16;
  if (dtype == "F16") return StDType::F16;
  if (is_known_unsupported(dtype))
    fail(source, what + " has dtype " + dtype +
                     ", which tensorplay does not load (it reads F32, BF16 and F16); convert "
                     "the tensor to one of those before saving");
  fail(source, what + " has unknown dtype " + quoted(dtype) + " (expected F32, BF16 or F16)");
}

// The entry's "shape" into `shape`; returns its element count (which fits int64).
uint64_t parse_shape(const Json& value, const std::string& what, const std::string& source,
                     std::vector<int64_t>& shape) {
  auto shape_it = value.find("shape");
  if (shape_it == value.end()) fail(source, what + " has no \"shape\"");
  if (!shape_it->is_array()) fail(source, what + ": \"shape\" is not an array");
  if (shape_it->size() > kStMaxRank)
    fail(source, what + " has rank " + std::to_string(shape_it->size()) + ", more than " +
                     std::to_string(kStMaxRank));
  uint64_t numel = 1;    // product of the dimensions
  uint64_t nonzero = 1;  // product of the nonzero dimensions, kept within int64
  for (const Json& d : *shape_it) {
    if (!d.is_number_unsigned())
      fail(source, what + ": shape entry " + d.dump() + " is not a non-negative integer");
    const auto dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(source, what + ": shape entry " + std::to_string(dim) + " is too large");
    if (dim != 0 && __builtin_mul_overflow(nonzero, dim, &nonzero))
      fail(source, what + ": shape " + shape_it->dump() + " has too many elements");
    if (nonzero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(source, what + ": shape " + shape_it->dump() + " has too many elements");
    numel = dim == 0 ? 0 : numel * dim;  // cannot overflow: numel is 0 or equals nonzero
    shape.push_back(static_cast<int64_t>(dim));
  }
  return numel;
}

// The entry's "data_offsets" into entry.begin and entry.end, checked against the bytes `numel`
// elements of its dtype take.
void parse_offsets(const Json& value, const std::string& what, const std::string& source,
                   uint64_t numel, StEntry& entry) {
  auto offsets_it = value.find("data_offsets");
  if (offsets_it == value.end()) fail(source, what + " has no \"data_offsets\"");
  if (!offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
    fail(source, what + ": \"data_offsets\" " + offsets_it->dump() +
                     " is not a pair of non-negative integers [begin, end]");
  entry.begin = (*offsets_it)[0].get<uint64_t>();
  entry.end = (*offsets_it)[1].get<uint64_t>();
  if (entry.end < entry.begin)
    fail(source, what + ": data_offsets " + range_string(entry.begin, entry.end) +
                     " end before they begin");
  uint64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, st_element_size(entry.dtype), &bytes);
  if (overflow || bytes != entry.end - entry.begin)
    fail(source, what + ": shape " + shape_string(entry.shape) + " of " +
                     value.find("dtype")->get_ref<const std::string&>() + " needs " +
                     (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
                     " bytes, but data_offsets " + range_string(entry.begin, entry.end) + " hold " +
                     std::to_string(entry.end - entry.begin));
}

StEntry parse_entry(const std::string& name, const Json& value, const std::string& source) {
  const std::string what = "tensor " + quoted(name);
  if (!value.is_object())
    fail(source, what + " is described by a JSON " + std::string(value.type_name()) +
                     ", not an object with dtype, shape and data_offsets");
  StEntry entry;
  entry.name = name;
  entry.dtype = parse_dtype(value, what, source);
  const uint64_t numel = parse_shape(value, what, source, entry.shape);
  parse_offsets(value, what, source, numel, entry);
  return entry;
}

// Sorts the entries by offset and checks that they cover [0, data_size) exactly once.
void sort_and_check_tiling(std::vector<StEntry>& entries, uint64_t data_size,
                           const std::string& source) {
  std::stable_sort(entries.begin(), entries.end(), [](const StEntry& a, const StEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const StEntry* previous = nullptr;
  for (const StEntry* e = entries.data(); e != entries.data() + entries.size(); ++e) {
    if (e->begin < at)
      fail(source, "tensors " + quoted(previous->name) + " " +
                       range_string(previous->begin, previous->end) + " and " + quoted(e->name) +
                       " " + range_string(e->begin, e->end) +
                       " overlap; each byte of the data section belongs to one tensor");
    if (e->begin > at)
      fail(source, "no tensor covers bytes " + range_string(at, e->begin) +
                       " of the data section (before tensor " + quoted(e->name) +
                       "); tensors must follow one another without gaps");
    at = e->end;
    previous = e;
  }
  if (at != data_size)
    fail(source, "the tensors cover " + std::to_string(at) + " bytes but the file holds " +
                     std::to_string(data_size) + " bytes after the header" +
                     (at > data_size ? " (the file is truncated)" : " (trailing bytes)"));
}

}  // namespace

const char* st_dtype_name(StDType dtype) {
  switch (dtype) {
    case StDType::F32:
      return "F32";
    case StDType::BF16:
      return "BF16";
    case StDType::F16:
      return "F16";
  }
  return "?";
}

size_t first_invalid_utf8(const unsigned char* data, size_t size) {
  size_t i = 0;
  while (i < size) {
    const unsigned char c = data[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint32_t lowest = 0;
    uint32_t code = 0;
    if ((c & 0xe0) == 0xc0) {
      length = 2, lowest = 0x80, code = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      length = 3, lowest = 0x800, code = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      length = 4, lowest = 0x10000, code = c & 0x07;
    } else {
      return i;
    }
    if (size - i < length) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((data[i + k] & 0xc0) != 0x80) return i;
      code = (code << 6) | (data[i + k] & 0x3f);
    }
    if (code < lowest || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += length;
  }
  return size;
}

StLayout parse_safetensors(const unsigned char* bytes, size_t size, const std::string& source) {
  if (size < 8)
    fail(source, "the file holds " + std::to_string(size) +
                     " bytes, fewer than the 8-byte header length that starts a safetensors "
                     "file");
  const uint64_t header_bytes = read_u64_le(bytes);
  if (header_bytes > kStMaxHeaderBytes)
    fail(source, "the header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                     std::to_string(kStMaxHeaderBytes) +
                     " bytes (this is not a safetensors file, or it is damaged)");
  if (header_bytes > size - 8)
    fail(source, "the header length " + std::to_string(header_bytes) +
                     " runs past the end of the file (" + std::to_string(size) +
                     " bytes); the file is truncated or damaged");
  const unsigned char* header = bytes + 8;
  if (size_t bad = first_invalid_utf8(header, header_bytes); bad != header_bytes) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "0x%02x", header[bad]);
    fail(source, "the header is not valid UTF-8 (byte " + std::string(buf) + " at offset " +
                     std::to_string(8 + bad) + ")");
  }
  if (header_bytes == 0 || header[0] != '{')
    fail(source, "the header does not start with '{' (this is not a safetensors file)");

  const Json json =
      parse_json_without_repeats(reinterpret_cast<const char*>(header),
                                 reinterpret_cast<const char*>(header + header_bytes), source);
  if (!json.is_object()) fail(source, "the header is not a JSON object");

  StLayout layout;
  layout.data_start = 8 + header_bytes;
  layout.data_size = size - layout.data_start;
  layout.entries.reserve(json.size());
  for (const auto& [key, value] : json.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(source, "\"__metadata__\" is not an object of strings");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string())
          fail(source, "\"__metadata__\" entry " + quoted(mkey) + " is a " +
                           std::string(mvalue.type_name()) + ", not a string");
        layout.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    layout.entries.push_back(parse_entry(key, value, source));
  }
  sort_and_check_tiling(layout.entries, layout.data_size, source);
  return layout;
}

void st_assign_offsets(std::vector<StEntry>& entries) {
  // The reference writer sorts by dtype, the widest first, then by name.
  std::stable_sort(entries.begin(), entries.end(), [](const StEntry& a, const StEntry& b) {
    auto rank = [](StDType d) { return d == StDType::F32 ? 2 : d == StDType::BF16 ? 1 : 0; };
    if (rank(a.dtype) != rank(b.dtype)) return rank(a.dtype) > rank(b.dtype);
    return a.name < b.name;
  });
  uint64_t at = 0;
  for (StEntry& e : entries) {
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= static_cast<uint64_t>(d);
    e.begin = at;
    e.end = at + numel * st_element_size(e.dtype);
    at = e.end;
  }
}

std::string encode_safetensors_header(const std::vector<StEntry>& entries,
                                      const std::map<std::string, std::string>& metadata) {
  auto check_utf8 = [](const std::string& s, const char* what) {
    if (first_invalid_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size()) != s.size())
      throw std::invalid_argument(std::string("safetensors: ") + what + " " + quoted(s) +
                                  " is not valid UTF-8");
  };
  // ordered_json keeps insertion order, as the reference writer's map does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) {
      check_utf8(key, "metadata key");
      check_utf8(value, "metadata value");
      meta[key] = value;
    }
    header["__metadata__"] = std::move(meta);
  }
  for (const StEntry& e : entries) {
    check_utf8(e.name, "tensor name");
    if (e.name == "__metadata__")
      throw std::invalid_argument(
          "safetensors: a tensor may not be named \"__metadata__\" (the format reserves it)");
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = st_dtype_name(e.dtype);
    entry["shape"] = e.shape;
    entry["data_offsets"] = {e.begin, e.end};
    header[e.name] = std::move(entry);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size());
  put_u64_le(out, text.size());
  return out + text;
}

float float16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {  // infinity or NaN
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    out = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    out = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

void st_decode_to_float(StDType dtype, const unsigned char* src, size_t count, float* dst) {
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case StDType::F32: {
        const unsigned char* p = src + 4 * i;
        const uint32_t bits = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
        dst[i] = std::bit_cast<float>(bits);
        break;
      }
      case StDType::BF16: {
        const unsigned char* p = src + 2 * i;
        dst[i] = std::bit_cast<float>((static_cast<uint32_t>(p[0]) | p[1] << 8) << 16);
        break;
      }
      case StDType::F16: {
        const unsigned char* p = src + 2 * i;
        dst[i] = float16_to_float(static_cast<uint16_t>(p[0] | p[1] << 8));
        break;
      }
    }
  }
}

}  // namespace tensorplay::detail

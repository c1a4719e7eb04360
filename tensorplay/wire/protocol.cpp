// The protocol's byte form: one writer and one checked reader for every message kind.
#include "tensorplay/wire/protocol.h"

#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace tensorplay::pipelining {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian and written with memcpy");

/// The kind byte: the message's index in WireMessage, plus one (0 is never a kind).
template <typename T, size_t I = 0>
constexpr uint8_t kind_of() {
  if constexpr (std::is_same_v<T, std::variant_alternative_t<I, WireMessage>>)
    return static_cast<uint8_t>(I + 1);
  else
    return kind_of<T, I + 1>();
}

const char* const kKindNames[] = {"notification", "construction facts", "construction details",
                                  "error", "vote"};

// -- writing --------------------------------------------------------------------------------------

struct Writer {
  std::string out;
  template <typename T>
  void put(T value) {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out.append(raw, sizeof(T));
  }
  void flag(bool value) { put<uint8_t>(value ? 1 : 0); }
  void text(std::string_view value) {
    put<uint64_t>(value.size());
    out.append(value);
  }
  void shape(const std::vector<int64_t>& dims) {
    put<uint8_t>(static_cast<uint8_t>(dims.size()));
    for (int64_t d : dims) put<int64_t>(d);
  }
  void metas(const std::vector<TensorMeta>& metas) {
    put<uint32_t>(static_cast<uint32_t>(metas.size()));
    for (const TensorMeta& m : metas) {
      put<uint8_t>(static_cast<uint8_t>(m.dtype));
      shape(m.shape);
    }
  }

  void body(const Notification& n) {
    put<uint8_t>(n.direction == Direction::Backward ? 1 : 0);
    put<uint64_t>(n.step);
    put<int32_t>(n.stage);
    put<int32_t>(n.microbatch);
    put<int32_t>(n.source);
    put<uint32_t>(static_cast<uint32_t>(n.tensors.size()));
    for (const transport::TensorDescriptor& d : n.tensors) {
      flag(d.defined);
      put<uint8_t>(static_cast<uint8_t>(d.dtype));
      put<uint64_t>(d.bytes);
      shape(d.shape);
    }
  }
  void body(const RemoteError& e) {
    text(e.type);
    text(e.message);
  }
  void body(const RankFacts& f) {
    flag(!f.error.empty());
    if (!f.error.empty()) return body(f.error);  // nothing else is set
    text(f.kind);
    put<int32_t>(f.n_microbatches);
    put<int32_t>(f.num_stages);
    put<int32_t>(f.stages_per_rank);
    flag(f.has_loss);
    flag(f.scale_grads);
    flag(f.wants_nccl);
    put<uint64_t>(f.order_hash);
    put<uint64_t>(f.pipe_hash);
    put<uint32_t>(static_cast<uint32_t>(f.stages.size()));
    for (const RankFacts::Stage& s : f.stages) {
      put<int32_t>(s.index);
      metas(s.inputs);
      metas(s.outputs);
    }
  }
  void body(const RankDetail& d) {
    text(d.pipe);
    text(d.order);
  }
  void body(const Vote& v) { flag(v.yes); }
};

// -- reading --------------------------------------------------------------------------------------

/// What was wrong with a message (caught by decode_message, never leaves this file).
struct Malformed {
  std::string what;
};

/// Reads fields from the front of the bytes; throws Malformed naming the first field that is
/// missing or out of range.
struct Reader {
  std::string_view rest;

  template <typename T>
  T get(const char* field) {
    if (rest.size() < sizeof(T)) throw Malformed{"truncated at " + std::string(field)};
    T value{};
    std::memcpy(&value, rest.data(), sizeof(T));
    rest.remove_prefix(sizeof(T));
    return value;
  }
  bool flag(const char* field) {
    const auto v = get<uint8_t>(field);
    if (v > 1) throw Malformed{std::string(field) + " is " + std::to_string(v) + ", not 0 or 1"};
    return v == 1;
  }
  int32_t non_negative(const char* field) {
    const auto v = get<int32_t>(field);
    if (v < 0) throw Malformed{"negative " + std::string(field) + " " + std::to_string(v)};
    return v;
  }
  size_t count(const char* field, size_t limit) {
    const auto n = get<uint32_t>(field);
    if (n > limit)
      throw Malformed{std::to_string(n) + " " + field + " (limit " + std::to_string(limit) + ")"};
    return n;
  }
  std::string text(const char* field) {
    const auto n = get<uint64_t>(field);
    if (n > kMaxWireText || n > rest.size()) throw Malformed{"truncated at " + std::string(field)};
    std::string value(rest.substr(0, n));
    rest.remove_prefix(n);
    return value;
  }
  DType dtype(const char* field) {
    const auto v = get<uint8_t>(field);
    if (v > static_cast<uint8_t>(DType::BFloat16))
      throw Malformed{"unknown dtype " + std::to_string(v) + " in " + field};
    return static_cast<DType>(v);
  }
  /// A shape; returns its element count (checked for overflow).
  uint64_t shape(std::vector<int64_t>& dims, const char* field) {
    const auto n = get<uint8_t>(field);
    if (n > kMaxWireDims)
      throw Malformed{std::to_string(n) + " dimensions in " + field + " (limit 16)"};
    dims.resize(n);
    uint64_t numel = 1;
    for (int64_t& d : dims) {
      d = get<int64_t>(field);
      if (d < 0) throw Malformed{"negative dimension " + std::to_string(d) + " in " + field};
      if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
        throw Malformed{"the element count of " + std::string(field) + " overflows"};
      numel *= static_cast<uint64_t>(d);
    }
    return numel;
  }
  std::vector<TensorMeta> metas(const char* field) {
    std::vector<TensorMeta> metas(count(field, kMaxWireTensors));
    for (TensorMeta& m : metas) {
      m.dtype = dtype(field);
      shape(m.shape, field);
    }
    return metas;
  }

  void body(Notification& n) {
    const auto direction = get<uint8_t>("direction");
    if (direction > 1)
      throw Malformed{"direction " + std::to_string(direction) + " is neither 0 nor 1"};
    n.direction = direction ? Direction::Backward : Direction::Forward;
    n.step = get<uint64_t>("step");
    n.stage = non_negative("stage");
    n.microbatch = non_negative("microbatch");
    n.source = non_negative("source");
    n.tensors.assign(count("tensors", kMaxWireTensors), {});
    for (transport::TensorDescriptor& d : n.tensors) descriptor(d);
  }
  void descriptor(transport::TensorDescriptor& d) {
    d.defined = flag("a descriptor's defined flag");
    d.dtype = dtype("a descriptor");
    d.bytes = get<uint64_t>("a descriptor's bytes");
    const uint64_t numel = shape(d.shape, "a descriptor's shape");
    const uint64_t element = element_size(d.dtype);
    if (d.defined &&
        (numel > std::numeric_limits<uint64_t>::max() / element || numel * element != d.bytes))
      throw Malformed{"a descriptor says " + std::to_string(d.bytes) + " bytes for " +
                      std::to_string(numel) + " elements of " + std::to_string(element) + " bytes"};
    if (!d.defined && (d.bytes != 0 || !d.shape.empty()))
      throw Malformed{"an absent tensor with a shape"};
  }
  void body(RemoteError& e) {
    e.type = text("the error's type");
    e.message = text("the error's message");
    if (e.type.empty()) throw Malformed{"an error without its type"};
  }
  void body(RankFacts& f) {
    if (flag("the error flag")) return body(f.error);
    f.kind = text("the schedule's name");
    f.n_microbatches = non_negative("microbatch count");
    f.num_stages = non_negative("stage count");
    f.stages_per_rank = non_negative("stages per rank");
    f.has_loss = flag("the loss flag");
    f.scale_grads = flag("scale_grads");
    f.wants_nccl = flag("the NCCL flag");
    f.order_hash = get<uint64_t>("the order's hash");
    f.pipe_hash = get<uint64_t>("the pipe's hash");
    f.stages.resize(count("stages", kMaxWireStages));
    for (RankFacts::Stage& s : f.stages) {
      s.index = non_negative("a stage's index");
      s.inputs = metas("a stage's inputs");
      s.outputs = metas("a stage's outputs");
    }
  }
  void body(RankDetail& d) {
    d.pipe = text("the pipe's text");
    d.order = text("the order's text");
  }
  void body(Vote& v) { v.yes = flag("the vote"); }
};

template <size_t I = 0>
void read_kind(Reader& in, uint8_t kind, WireMessage& out) {
  if constexpr (I < std::variant_size_v<WireMessage>) {
    if (kind == I + 1) {
      in.body(out.emplace<I>());
      return;
    }
    read_kind<I + 1>(in, kind, out);
  } else {
    throw Malformed{"unknown message kind " + std::to_string(kind)};
  }
}

}  // namespace

std::string encode_message(const WireMessage& message) {
  Writer w;
  w.out.reserve(64);
  w.put<uint8_t>(kWireVersion);
  w.put<uint8_t>(static_cast<uint8_t>(message.index() + 1));
  std::visit([&w](const auto& m) { w.body(m); }, message);
  return std::move(w.out);
}

std::string decode_message(std::string_view bytes, WireMessage& out) {
  try {
    Reader in{bytes};
    const auto version = in.get<uint8_t>("the version");
    if (version != kWireVersion)
      return "protocol version " + std::to_string(version) + ", expected " +
             std::to_string(kWireVersion);
    read_kind(in, in.get<uint8_t>("the kind"), out);
    if (!in.rest.empty()) return std::to_string(in.rest.size()) + " bytes past the end";
    return {};
  } catch (const Malformed& m) {
    return m.what;
  }
}

template <typename T>
T decode_as(std::string_view bytes, std::string_view what) {
  WireMessage message;
  std::string error = decode_message(bytes, message);
  if (error.empty() && !std::holds_alternative<T>(message))
    error = std::string("a ") + kKindNames[message.index()] + " where " +
            kKindNames[kind_of<T>() - 1] + " belong";
  if (!error.empty())
    throw std::invalid_argument(std::string(what) + " cannot be read: " + error +
                                " (run the same tensorplay version on every rank)");
  return std::get<T>(std::move(message));
}

template RankFacts decode_as<RankFacts>(std::string_view, std::string_view);
template RankDetail decode_as<RankDetail>(std::string_view, std::string_view);
template RemoteError decode_as<RemoteError>(std::string_view, std::string_view);
template Vote decode_as<Vote>(std::string_view, std::string_view);
template Notification decode_as<Notification>(std::string_view, std::string_view);

std::string decode_notification(std::string_view bytes, Notification& note) {
  WireMessage message;
  if (std::string error = decode_message(bytes, message); !error.empty()) return error;
  if (!std::holds_alternative<Notification>(message))
    return std::string("a ") + kKindNames[message.index()] + " where a notification belongs";
  note = std::get<Notification>(std::move(message));
  return {};
}

}  // namespace tensorplay::pipelining

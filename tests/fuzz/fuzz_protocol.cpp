// libFuzzer target for the protocol's decoder (tensorplay/wire/protocol.h), the one parser that
// reads bytes from other processes. Properties: decoding never crashes or reads out of bounds
// (ASan, UBSan), and what decodes re-encodes to the same bytes (one spelling per message).
// Half of the inputs are taken as raw bytes; the other half drive a valid message (a
// notification, construction facts or details, an error or a vote) that the rest of the input
// then corrupts, so the fuzzer reaches every kind's checks quickly.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tensorplay/wire/protocol.h"

namespace pp = tensorplay::pipelining;

namespace {

void check(std::string_view bytes) {
  pp::WireMessage message;
  if (!pp::decode_message(bytes, message).empty()) return;
  if (pp::encode_message(message) != bytes) std::abort();  // two spellings of one message
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    check(rest);
    return 0;
  }
  // Structured: a valid notification built from the next bytes, then overwritten at the
  // positions the remaining bytes name.
  auto take = [&](size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && !rest.empty(); ++i) {
      v = (v << 8) | static_cast<uint8_t>(rest.front());
      rest.remove_prefix(1);
    }
    return v;
  };
  pp::Notification n;
  n.step = take(2);
  n.stage = static_cast<int>(take(1));
  n.microbatch = static_cast<int>(take(1));
  n.source = static_cast<int>(take(1));
  n.direction = take(1) % 2 ? tensorplay::pipelining::Direction::Backward
                            : tensorplay::pipelining::Direction::Forward;
  const int tensors = static_cast<int>(take(1) % 4);
  for (int t = 0; t < tensors; ++t) {
    tensorplay::transport::TensorDescriptor d;
    const int dims = static_cast<int>(take(1) % 4);
    uint64_t numel = 1;
    for (int k = 0; k < dims; ++k) {
      d.shape.push_back(static_cast<int64_t>(take(1)));
      numel *= static_cast<uint64_t>(d.shape.back());
    }
    d.dtype = take(1) % 2 ? tensorplay::DType::BFloat16 : tensorplay::DType::Float32;
    d.bytes = numel * tensorplay::element_size(d.dtype);
    n.tensors.push_back(d);
  }
  std::string bytes;
  switch (take(1) % 5) {
    case 0: {
      pp::RankFacts f;
      f.kind = "1F1B";
      f.n_microbatches = static_cast<int>(take(1));
      f.has_loss = take(1) % 2;
      f.stages.push_back({static_cast<int>(take(1)), {}, {}});
      for (const auto& d : n.tensors) f.stages.back().inputs.push_back({d.shape, d.dtype});
      bytes = pp::encode_message(f);
      break;
    }
    case 1:
      bytes = pp::encode_message(pp::RankDetail{"pipe", "0F0 0B0\n"});
      break;
    case 2:
      bytes = pp::encode_message(pp::RemoteError{"ScheduleError", "why"});
      break;
    case 3:
      bytes = pp::encode_message(pp::Vote{take(1) % 2 == 1});
      break;
    default:
      bytes = pp::encode_message(n);
  }
  check(bytes);
  while (rest.size() >= 3 && !bytes.empty()) {
    const size_t at = take(2) % (bytes.size() + 1);
    const uint8_t op = static_cast<uint8_t>(take(1));
    if (op % 3 == 0 && at < bytes.size())
      bytes[at] = static_cast<char>(op);
    else if (op % 3 == 1)
      bytes.resize(at);
    else
      bytes.insert(at, 1, static_cast<char>(op));
    check(bytes);
  }
  return 0;
}

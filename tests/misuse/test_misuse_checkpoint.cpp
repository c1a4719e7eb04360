// Misuse and corruption of checkpoint files: every damaged file is a clear error naming the tensor
// and the byte offset, never a crash, a huge allocation or a silently wrong tensor, and a model or
// optimizer loading a bad file is left as it was. Ends with a fuzz run of 10,000 mutations.
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "misuse_support.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
using misuse::expect_error;

namespace {

// Where the fields of one version-2 record sit in a file (see tensorplay/core/serialize.h).
struct RecordLayout {
  size_t header_begin, dims_begin, rank, data_length_at, header_crc_at, data_begin, data_bytes,
      data_crc_at;
};

template <typename T>
T get_le(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));  // the test host is little-endian
  return v;
}

template <typename T>
void set_le(std::string& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

uint32_t crc_of(const std::string& b, size_t begin, size_t end) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(b.data() + begin), end - begin));
}

std::vector<RecordLayout> layout_of(const std::string& b) {
  std::vector<RecordLayout> out;
  size_t at = 20;
  uint64_t count = get_le<uint64_t>(b, 12);
  for (uint64_t i = 0; i < count; ++i) {
    RecordLayout r{};
    r.header_begin = at;
    uint32_t name = get_le<uint32_t>(b, at);
    at += 4 + name + 1;
    r.rank = get_le<uint32_t>(b, at);
    at += 4;
    r.dims_begin = at;
    at += 8 * r.rank;
    r.data_length_at = at;
    r.data_bytes = get_le<uint64_t>(b, at);
    at += 8;
    r.header_crc_at = at;
    at += 4;
    r.data_begin = at;
    at += r.data_bytes;
    r.data_crc_at = at;
    at += 4;
    out.push_back(r);
  }
  return out;
}

// Recomputes every checksum of a file laid out as `layout`, so a damaged field reaches the
// reader's other checks instead of stopping at a checksum.
void rechecksum(std::string& b, const std::vector<RecordLayout>& layout) {
  for (const RecordLayout& r : layout) {
    set_le<uint32_t>(b, r.header_crc_at, crc_of(b, r.header_begin, r.header_crc_at));
    set_le<uint32_t>(b, r.data_crc_at, crc_of(b, r.data_begin, r.data_crc_at));
  }
  set_le<uint32_t>(b, b.size() - 4, crc_of(b, 0, b.size() - 4));
}

tp::StateDict sample_state() {
  tp::Generator g(11);
  tp::StateDict d;
  d.insert("layer.weight", tp::randn({4, 5}, {}, &g));
  d.insert("layer.bias", tp::randn({5}, {}, &g).to(tp::DType::BFloat16));
  d.insert("step", tp::scalar_tensor(3.0f));
  d.insert("empty", tp::zeros({0, 3}));
  return d;
}

std::string bytes_of(const tp::StateDict& d) {
  std::ostringstream out;
  tp::write_tensors(out, d);
  return out.str();
}

tp::StateDict read_back(const std::string& bytes) {
  std::istringstream in(bytes);
  return tp::read_tensors(in, "'model.ckpt'");
}

// Whether two dicts hold the same names, shapes, dtypes and bytes.
bool bitwise_equal(const tp::StateDict& a, const tp::StateDict& b) {
  if (a.keys() != b.keys()) return false;
  for (const auto& [name, t] : a) {
    const tp::Tensor& u = b.at(name);
    if (t.shape() != u.shape() || t.dtype() != u.dtype()) return false;
    if (t.nbytes() > 0 && std::memcmp(t.raw_data(), u.raw_data(), t.nbytes()) != 0) return false;
  }
  return true;
}

const std::vector<std::string> kCorrupt = {"checkpoint 'model.ckpt'", "at byte",
                                           "save it again or restore a good copy"};

std::vector<std::string> with(std::vector<std::string> words, const std::string& more) {
  words.push_back(more);
  return words;
}

}  // namespace

TEST_CASE("misuse: a checkpoint with a flipped data byte", "[misuse][checkpoint]") {
  std::string b = bytes_of(sample_state());
  auto layout = layout_of(b);
  b[layout[0].data_begin + 7] ^= 0x01;
  expect_error<std::runtime_error>(
      [b] { read_back(b); }, with(with(kCorrupt, "'layer.weight'"), "data checksum mismatch"));
}

TEST_CASE("misuse: a checkpoint with a damaged name or shape", "[misuse][checkpoint]") {
  std::string b = bytes_of(sample_state());
  auto layout = layout_of(b);
  b[layout[1].dims_begin] ^= 0x04;
  expect_error<std::runtime_error>([b] { read_back(b); },
                                   with(kCorrupt, "header checksum mismatch"));
}

TEST_CASE("misuse: a checkpoint with trailing garbage", "[misuse][checkpoint]") {
  std::string b = bytes_of(sample_state()) + std::string("\0\0extra", 7);
  expect_error<std::runtime_error>([b] { read_back(b); },
                                   {"trailing garbage", "7 unexpected bytes", "at byte"});
}

TEST_CASE("misuse: a truncated checkpoint", "[misuse][checkpoint]") {
  std::string b = bytes_of(sample_state());
  auto layout = layout_of(b);
  std::string cut = b.substr(0, layout[0].data_begin + 10);
  expect_error<std::runtime_error>([cut] { read_back(cut); },
                                   with(with(kCorrupt, "truncated"), "'layer.weight'"));
}

TEST_CASE("misuse: a checkpoint whose dimension is set to 2^62", "[misuse][checkpoint]") {
  // This loaded, and the tensor crashed on use. Checksums recomputed: the shape check must stop it.
  std::string b = bytes_of(sample_state());
  auto layout = layout_of(b);
  set_le<int64_t>(b, layout[0].dims_begin, int64_t{1} << 62);
  rechecksum(b, layout);
  expect_error<std::runtime_error>([b] { read_back(b); },
                                   with(with(kCorrupt, "'layer.weight'"), "impossible shape"));
}

TEST_CASE("misuse: a checkpoint shape larger than the file is refused before allocating",
          "[misuse][checkpoint]") {
  // 2^40 x 5 float32 is 20 TiB: the old reader asked for it and died of a bare std::bad_alloc.
  std::string b = bytes_of(sample_state());
  auto layout = layout_of(b);
  set_le<int64_t>(b, layout[0].dims_begin, int64_t{1} << 40);
  set_le<uint64_t>(b, layout[0].data_length_at, (uint64_t{1} << 40) * 5 * 4);
  rechecksum(b, layout);
  expect_error<std::runtime_error>(
      [b] { read_back(b); }, with(with(kCorrupt, "'layer.weight'"), "bytes are left in the file"));
}

TEST_CASE("misuse: a checkpoint with a huge tensor count or name length", "[misuse][checkpoint]") {
  std::string b = bytes_of(sample_state());
  std::string count = b;
  set_le<uint64_t>(count, 12, uint64_t{1} << 60);
  expect_error<std::runtime_error>([count] { read_back(count); },
                                   with(kCorrupt, "tensor 4 (record at byte"));
  std::string name = b;
  set_le<uint32_t>(name, 20, 0xfffffff0u);
  expect_error<std::runtime_error>([name] { read_back(name); }, with(kCorrupt, "name of"));
}

TEST_CASE("misuse: a file that is not a checkpoint, or from a newer format",
          "[misuse][checkpoint]") {
  expect_error<std::runtime_error>([] { read_back("PK\3\4 this is a zip file, not ours"); },
                                   {"bad magic", "save_tensors"});
  std::string b = bytes_of(sample_state());
  set_le<uint32_t>(b, 8, 99);
  expect_error<std::runtime_error>([b] { read_back(b); }, {"version 99", "newer one"});
}

TEST_CASE("misuse: loading a bad checkpoint leaves the module untouched", "[misuse][checkpoint]") {
  tp::nn::Linear saved(4, 3);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tp_misuse_" + std::to_string(::getpid()) + "_module.ckpt"))
                         .string();
  tp::nn::save(saved, path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x7f');
  }
  tp::nn::Linear target(4, 3);
  std::vector<float> before = target->weight.to_vector();
  expect_error<std::runtime_error>([&] { tp::nn::load(target, path); },
                                   {"checksum mismatch", "at byte"});
  CHECK(target->weight.to_vector() == before);
  std::filesystem::remove(path);
}

TEST_CASE("misuse: loading a bad checkpoint leaves the optimizer untouched",
          "[misuse][checkpoint]") {
  tp::Tensor w = tp::ones({3}).requires_grad_();
  tp::optim::AdamW saved({w}, {.lr = 0.5f});
  w.set_grad(tp::ones({3}));
  saved.step();
  std::string b = bytes_of(saved.state_dict());
  b[b.size() - 9] ^= 0x20;  // inside the last tensor's data
  tp::optim::AdamW target({tp::ones({3}).requires_grad_()}, {.lr = 0.01f});
  expect_error<std::runtime_error>([&] { target.load_state_dict(read_back(b)); },
                                   {"checksum mismatch", "at byte"});
  CHECK(target.options().lr == 0.01f);
  CHECK_FALSE(target.state_dict().contains("state.0.exp_avg"));  // still no moments
}

TEST_CASE("misuse: a checkpoint mutated 10,000 ways loads exactly or fails clearly",
          "[misuse][checkpoint][fuzz]") {
  const tp::StateDict original = sample_state();
  const std::string good = bytes_of(original);
  const auto layout = layout_of(good);
  REQUIRE(bitwise_equal(read_back(good), original));
  std::mt19937_64 rng(20261130);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<int64_t> bad_dims = {int64_t{1} << 62, -1, int64_t{1} << 40,
                                         std::numeric_limits<int64_t>::max(), int64_t{1} << 31};
  size_t exact = 0, consistent = 0, errors = 0;
  // `exact`: the checksums were left as written, so a load must give back the original. A file
  // whose checksums were recomputed after the damage says what it says; a load of it must still
  // give tensors whose shapes match their bytes.
  auto attempt = [&](const std::string& bytes, const std::string& what, bool must_be_exact) {
    try {
      tp::StateDict back = read_back(bytes);
      if (must_be_exact) {
        INFO("mutation " << what << " loaded; it must then equal the original bit for bit");
        REQUIRE(bitwise_equal(back, original));
        ++exact;
      } else {
        for (const auto& [name, t] : back)
          REQUIRE(t.to_vector().size() == static_cast<size_t>(t.numel()));
        ++consistent;
      }
    } catch (const std::runtime_error& e) {
      std::string message = e.what();
      INFO("mutation " << what << ": " << message);
      REQUIRE(message.find("checkpoint 'model.ckpt'") != std::string::npos);
      REQUIRE(message.find("at byte") != std::string::npos);
      ++errors;
    }  // anything else (bad_alloc, length_error, ...) escapes and fails the test
  };
  int n = 0;
  for (size_t length = 0; length < good.size(); ++length, ++n)  // every truncation
    attempt(good.substr(0, length), "truncated to " + std::to_string(length), true);
  for (; n < 10000; ++n) {
    std::string b = good;
    std::string what;
    bool checksums_kept = true;
    switch (n % 8) {
      case 0: {
        size_t at = pick(b.size());
        b[at] ^= static_cast<char>(1 << pick(8));
        what = "bit flip at " + std::to_string(at);
        break;
      }
      case 1: {
        size_t at = pick(b.size());
        b[at] = static_cast<char>(rng());
        what = "byte set at " + std::to_string(at);
        break;
      }
      case 2: {
        size_t at = pick(b.size() + 1);
        b.insert(at, std::string(1 + pick(8), static_cast<char>(rng())));
        what = "bytes inserted at " + std::to_string(at);
        break;
      }
      case 3: {
        size_t at = pick(b.size());
        b.erase(at, 1 + pick(8));
        what = "bytes erased at " + std::to_string(at);
        break;
      }
      case 4: {  // a dim set to a huge or negative value, the checksums made to match
        const RecordLayout& r = layout[std::vector<size_t>{0, 1, 3}[pick(3)]];  // not the scalar
        size_t at = r.dims_begin + 8 * pick(r.rank);
        set_le<int64_t>(b, at, bad_dims[pick(bad_dims.size())]);
        if (rng() % 2) {
          rechecksum(b, layout);
          checksums_kept = false;
        }
        what = "dim set at " + std::to_string(at);
        break;
      }
      case 5: {  // a length field or the count set to a random value, checksums made to match
        const RecordLayout& r = layout[pick(layout.size())];
        size_t field = pick(3);
        if (field == 0) set_le<uint64_t>(b, 12, rng() >> pick(64));
        if (field == 1) set_le<uint32_t>(b, r.header_begin, static_cast<uint32_t>(rng()));
        if (field == 2) set_le<uint64_t>(b, r.data_length_at, rng() >> pick(64));
        rechecksum(b, layout);
        checksums_kept = false;
        what = "length field " + std::to_string(field) + " set";
        break;
      }
      case 6:
        b += std::string(1 + pick(16), static_cast<char>(rng()));
        what = "garbage appended";
        break;
      case 7: {
        for (size_t k = 0, m = 2 + pick(4); k < m; ++k)
          b[pick(b.size())] = static_cast<char>(rng());
        what = "several bytes set";
        break;
      }
    }
    attempt(b, what, checksums_kept);
  }
  INFO(exact << " exact loads, " << consistent << " consistent loads of recomputed checksums, "
             << errors << " clear errors");
  CHECK(exact + consistent + errors == 10000);
  CHECK(errors > 9000);
}

TEST_CASE("misuse: a version-1 checkpoint mutated 2,000 ways never crashes",
          "[misuse][checkpoint][fuzz]") {
  // Version 1 has no checksums, so a damaged value may load; a damaged size must still be a clear
  // error, and whatever loads must be consistent.
  std::string good("TPLAYSD\0", 8);
  auto append = [&good](const void* p, size_t n) { good.append(static_cast<const char*>(p), n); };
  uint32_t version = 1, rank = 2, name_length = 1;
  uint64_t count = 2;
  append(&version, 4);
  append(&count, 8);
  for (const char* name : {"a", "b"}) {
    append(&name_length, 4);
    append(name, 1);
    good += '\0';  // float32
    append(&rank, 4);
    for (int64_t d : {int64_t{3}, int64_t{2}}) append(&d, 8);
    for (int i = 0; i < 6; ++i) {
      float v = static_cast<float>(i);
      append(&v, 4);
    }
  }
  REQUIRE(read_back(good).size() == 2);
  std::mt19937_64 rng(7);
  size_t loads = 0, errors = 0;
  for (int n = 0; n < 2000; ++n) {
    std::string b = good;
    if (n % 3 == 0) b = b.substr(0, rng() % b.size());
    if (n % 3 == 1) set_le<int64_t>(b, 8 + 4 + 8 + 4 + 1 + 1 + 4, static_cast<int64_t>(rng()));
    if (n % 3 == 2) b[rng() % b.size()] = static_cast<char>(rng());
    try {
      for (const auto& [name, t] : read_back(b))
        REQUIRE(t.to_vector().size() == static_cast<size_t>(t.numel()));
      ++loads;
    } catch (const std::runtime_error& e) {
      REQUIRE(std::string(e.what()).find("at byte") != std::string::npos);
      ++errors;
    }
  }
  CHECK(loads + errors == 2000);
}

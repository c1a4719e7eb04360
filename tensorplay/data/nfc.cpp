// NFC through ICU's C API (unorm2, u_strFromUTF8, u_strToUTF8), found with dlopen by soname and
// its versioned symbol names (ICU renames every entry point name_NN for version NN).
#include "tensorplay/data/nfc.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace tensorplay::data {
namespace {

using UErrorCode = int;  // ICU's enum: 0 is success, above 0 a failure
constexpr UErrorCode kBufferOverflow = 15;

struct Icu {
  using GetNfc = const void* (*)(UErrorCode*);
  using Normalize = int32_t (*)(const void*, const char16_t*, int32_t, char16_t*, int32_t,
                                UErrorCode*);
  using FromUtf8 = char16_t* (*)(char16_t*, int32_t, int32_t*, const char*, int32_t, UErrorCode*);
  using ToUtf8 = char* (*)(char*, int32_t, int32_t*, const char16_t*, int32_t, UErrorCode*);
  GetNfc get_nfc = nullptr;
  Normalize normalize = nullptr;
  FromUtf8 from_utf8 = nullptr;
  ToUtf8 to_utf8 = nullptr;
  std::string error;  ///< why ICU could not be loaded; empty once loaded
};

/// The newest ICU common library the machine has (versions 90 down to 50), with its entry points.
const Icu& icu() {
  static Icu loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int v = 90; v >= 50; --v) {
      void* lib = dlopen(("libicuuc.so." + std::to_string(v)).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib) continue;
      const std::string suffix = "_" + std::to_string(v);
      auto sym = [&](const char* name) { return dlsym(lib, (name + suffix).c_str()); };
      loaded.get_nfc = reinterpret_cast<Icu::GetNfc>(sym("unorm2_getNFCInstance"));
      loaded.normalize = reinterpret_cast<Icu::Normalize>(sym("unorm2_normalize"));
      loaded.from_utf8 = reinterpret_cast<Icu::FromUtf8>(sym("u_strFromUTF8"));
      loaded.to_utf8 = reinterpret_cast<Icu::ToUtf8>(sym("u_strToUTF8"));
      if (loaded.get_nfc && loaded.normalize && loaded.from_utf8 && loaded.to_utf8) return;
      dlclose(lib);
    }
    loaded.error =
        "NFC normalization needs ICU's common library (libicuuc.so.NN), which this machine "
        "lacks: install Debian's libicu72 (or libicu-dev)";
  });
  return loaded;
}

void check(UErrorCode status, const char* what) {
  if (status > 0)
    throw std::runtime_error(std::string("NFC normalization: ICU's ") + what + " failed (error " +
                             std::to_string(status) + ")");
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  const Icu& lib = icu();
  if (!lib.error.empty()) throw std::runtime_error(lib.error);
  UErrorCode status = 0;
  const void* nfc = lib.get_nfc(&status);
  check(status, "unorm2_getNFCInstance");
  // UTF-8 -> UTF-16: at most one UTF-16 unit per byte.
  std::vector<char16_t> in(text.size() + 1);
  int32_t in_length = 0;
  lib.from_utf8(in.data(), static_cast<int32_t>(in.size()), &in_length, text.data(),
                static_cast<int32_t>(text.size()), &status);
  check(status, "u_strFromUTF8");
  // Normalized: composition seldom grows text; grow once when ICU says so.
  std::vector<char16_t> out(in_length + 16);
  int32_t out_length = lib.normalize(nfc, in.data(), in_length, out.data(),
                                     static_cast<int32_t>(out.size()), &status);
  if (status == kBufferOverflow) {
    status = 0;
    out.resize(out_length + 1);
    out_length = lib.normalize(nfc, in.data(), in_length, out.data(),
                               static_cast<int32_t>(out.size()), &status);
  }
  check(status, "unorm2_normalize");
  // UTF-16 -> UTF-8: at most three bytes per unit.
  std::string result(static_cast<size_t>(out_length) * 3 + 1, '\0');
  int32_t result_length = 0;
  lib.to_utf8(result.data(), static_cast<int32_t>(result.size()), &result_length, out.data(),
              out_length, &status);
  check(status, "u_strToUTF8");
  result.resize(result_length);
  return result;
}

}  // namespace tensorplay::data

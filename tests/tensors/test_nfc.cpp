// Tests for data/nfc.h: NFC through the ICU common library loaded at run time.
#include <catch2/catch.hpp>
#include <string>

#include "tensorplay/data/nfc.h"

namespace data = tensorplay::data;

TEST_CASE("nfc_normalize composes what NFC composes and keeps the rest", "[data][nfc]") {
  // e + COMBINING ACUTE ACCENT -> U+00E9; A + RING ABOVE -> U+00C5; Hangul jamo -> a syllable.
  CHECK(data::nfc_normalize("e\xCC\x81") == "\xC3\xA9");
  CHECK(data::nfc_normalize("A\xCC\x8A") == "\xC3\x85");
  CHECK(data::nfc_normalize("\xE1\x84\x80\xE1\x85\xA1") == "\xEA\xB0\x80");
  // Already composed, ASCII, CJK and the empty string come back as they were.
  CHECK(data::nfc_normalize("caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC") ==
        "caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC");
  CHECK(data::nfc_normalize("plain") == "plain");
  CHECK(data::nfc_normalize("").empty());
  // A long text crosses no buffer limit.
  std::string long_text, composed;
  for (int i = 0; i < 20000; ++i) long_text += "e\xCC\x81", composed += "\xC3\xA9";
  CHECK(data::nfc_normalize(long_text) == composed);
}

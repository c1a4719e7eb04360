// tp-launch's line relay alone: prefixes, lines over 64 KiB cut into marked pieces (never inside a
// UTF-8 character) that join back to the line, and the rank's log file keeping such lines whole.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "line_relay.h"

namespace {

using tensorplay::launch::LineRelay;
using tensorplay::launch::RankLog;

constexpr std::size_t kPiece = LineRelay::kMaxPieceBytes;

// A file in memory that a relay writes to as it would to the launcher's stdout.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("line_relay_test", MFD_CLOEXEC)) { REQUIRE(fd_ >= 0); }
  ~MemoryFile() { ::close(fd_); }
  int fd() const { return fd_; }
  std::string text() const {
    std::string out;
    char buffer[65536];
    off_t offset = 0;
    ssize_t count;
    while ((count = ::pread(fd_, buffer, sizeof(buffer), offset)) > 0) {
      out.append(buffer, static_cast<std::size_t>(count));
      offset += count;
    }
    return out;
  }

 private:
  int fd_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  CHECK(start == text.size());  // every line ends with a newline
  return lines;
}

// Feeds `text` in chunks of `chunk` bytes, as reads from a pipe would bring it.
void feed_in_chunks(LineRelay& relay, const std::string& text, std::size_t chunk) {
  for (std::size_t at = 0; at < text.size(); at += chunk) relay.feed(text.substr(at, chunk));
}

// Joins the relayed lines of one rank back into the rank's text: a "[rank R+] " piece continues
// the line before it.
std::string rejoin(const std::vector<std::string>& lines, int rank) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  const std::string continued = "[rank " + std::to_string(rank) + "+] ";
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(continued, 0) == 0) {
      REQUIRE(i > 0);
      out.pop_back();  // the newline the cut added
      out += lines[i].substr(continued.size()) + "\n";
    } else {
      REQUIRE(lines[i].rfind(prefix, 0) == 0);
      out += lines[i].substr(prefix.size()) + "\n";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("line relay: short lines get the rank's prefix, unchanged", "[tp_launch]") {
  MemoryFile out;
  LineRelay relay(3, out.fd(), nullptr);
  relay.feed("one\ntw");
  relay.feed("o\n\nthree");
  relay.finish();
  CHECK(out.text() == "[rank 3] one\n[rank 3] two\n[rank 3] \n[rank 3] three\n");
}

TEST_CASE("line relay: a line over 64 KiB comes in pieces, each further one marked",
          "[tp_launch]") {
  // This line came out as four lines that all read "[rank 1] ...", with nothing to say that the
  // last three continue the first.
  const std::string line(3 * kPiece + 3392, 'a');
  for (std::size_t chunk : {std::size_t{1000}, kPiece, line.size() + 1}) {
    INFO("fed in chunks of " << chunk << " bytes");
    MemoryFile out;
    MemoryFile log_file;
    RankLog log{log_file.fd()};
    LineRelay relay(1, out.fd(), &log);
    feed_in_chunks(relay, line + "\nafter\n", chunk);
    const std::vector<std::string> lines = lines_of(out.text());
    REQUIRE(lines.size() == 5);
    CHECK(lines[0] == "[rank 1] " + std::string(kPiece, 'a'));
    CHECK(lines[1] == "[rank 1+] " + std::string(kPiece, 'a'));
    CHECK(lines[2] == "[rank 1+] " + std::string(kPiece, 'a'));
    CHECK(lines[3] == "[rank 1+] " + std::string(3392, 'a'));
    CHECK(lines[4] == "[rank 1] after");  // the next line starts afresh
    CHECK(rejoin(lines, 1) == line + "\nafter\n");
    CHECK(log_file.text() == line + "\nafter\n");  // whole in the rank's log
  }
}

TEST_CASE("line relay: a line of exactly 64 KiB is not cut", "[tp_launch]") {
  MemoryFile out;
  LineRelay relay(0, out.fd(), nullptr);
  feed_in_chunks(relay, std::string(kPiece, 'b') + "\n", 4096);
  CHECK(out.text() == "[rank 0] " + std::string(kPiece, 'b') + "\n");
}

TEST_CASE("line relay: output without a newline is cut, marked, and ends at finish",
          "[tp_launch]") {
  // A progress bar redrawn with '\r' never ends its line.
  std::string text;
  while (text.size() < 2 * kPiece + 10) text += "\rstep 12/100 [=====>    ]";
  MemoryFile out;
  LineRelay relay(2, out.fd(), nullptr);
  feed_in_chunks(relay, text, 777);
  relay.finish();
  const std::vector<std::string> lines = lines_of(out.text());
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].rfind("[rank 2+] ", 0) == 0);
  CHECK(lines[2].rfind("[rank 2+] ", 0) == 0);
  CHECK(rejoin(lines, 2) == text + "\n");
}

TEST_CASE("line relay: pieces are never cut inside a UTF-8 character", "[tp_launch]") {
  // Two-, three- and four-byte characters after one ASCII byte, so a cut at 64 KiB falls inside.
  for (const std::string character : {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x99\x82"}) {
    std::string line = "x";
    while (line.size() < 3 * kPiece) line += character;
    MemoryFile out;
    LineRelay relay(0, out.fd(), nullptr);
    feed_in_chunks(relay, line + "\n", 5000);
    const std::vector<std::string> lines = lines_of(out.text());
    REQUIRE(lines.size() >= 3);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string piece = lines[i].substr(i == 0 ? 9 : 10);  // "[rank 0] ", "[rank 0+] "
      INFO("piece " << i << " of a line of " << character.size() << "-byte characters");
      CHECK((static_cast<unsigned char>(piece.front()) & 0xC0) != 0x80);  // starts a character
      if (i + 1 < lines.size()) {
        CHECK(piece.size() <= kPiece);
        CHECK(piece.size() >= kPiece - 3);  // backed off a partial character at most
      }
    }
    CHECK(rejoin(lines, 0) == line + "\n");
  }
}

TEST_CASE("line relay: the log keeps a long line whole unless the other stream cuts in",
          "[tp_launch]") {
  MemoryFile out;
  MemoryFile err;
  MemoryFile log_file;
  RankLog log{log_file.fd()};
  LineRelay stdout_relay(4, out.fd(), &log);
  LineRelay stderr_relay(4, err.fd(), &log);
  stdout_relay.feed(std::string(kPiece + 10, 'o'));  // one piece out, 10 bytes pending
  stderr_relay.feed("warning\n");                    // a line of the other stream in between
  stdout_relay.feed("tail\n");
  stderr_relay.feed("done\n");
  CHECK(log_file.text() ==
        std::string(kPiece, 'o') + "\nwarning\n" + std::string(10, 'o') + "tail\ndone\n");
  CHECK(err.text() == "[rank 4] warning\n[rank 4] done\n");
  CHECK(out.text() ==
        "[rank 4] " + std::string(kPiece, 'o') + "\n[rank 4+] " + std::string(10, 'o') + "tail\n");
}

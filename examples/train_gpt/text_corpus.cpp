// Reading and sampling the character-level corpus.
#include "text_corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace train_gpt {
namespace {

namespace tp = tensorplay;
constexpr const char* kLicenseFolder = "/usr/share/common-licenses";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "' (check the path given to --data)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// UTF-8 to code points; throws naming the byte offset of the first malformed sequence.
std::vector<char32_t> decode_utf8(const std::string& text, const std::string& source) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + extra >= text.size() + (extra == 0 ? 1 : 0))
      throw std::runtime_error(source + " is not UTF-8 text (byte " + std::to_string(i) +
                               "): pass a UTF-8 file to --data");
    char32_t cp = extra == 0 ? c : c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char d = static_cast<unsigned char>(text[i + k]);
      if ((d >> 6) != 2)
        throw std::runtime_error(source + " is not UTF-8 text (byte " + std::to_string(i + k) +
                                 "): pass a UTF-8 file to --data");
      cp = (cp << 6) | (d & 0x3f);
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

}  // namespace

std::vector<std::string> TextCorpus::default_text_files() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(kLicenseFolder, ec))
    if (!entry.is_symlink() && entry.is_regular_file()) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TextCorpus::TextCorpus(const std::string& path, double held_out, int64_t context) {
  std::string text;
  if (path.empty()) {
    const auto files = default_text_files();
    if (files.empty())
      throw std::runtime_error(std::string("no default text: ") + kLicenseFolder +
                               " has no files (install base-files, or pass --data FILE)");
    for (const auto& file : files) text += read_file(file) + "\n\n";
    source_ = "the license texts of " + std::string(kLicenseFolder) + " (" +
              std::to_string(files.size()) + " files, in name order)";
  } else {
    text = read_file(path);
    source_ = "'" + path + "'";
  }
  const std::vector<char32_t> chars = decode_utf8(text, source_);
  alphabet_ = chars;
  std::sort(alphabet_.begin(), alphabet_.end());
  alphabet_.erase(std::unique(alphabet_.begin(), alphabet_.end()), alphabet_.end());

  const auto split = static_cast<size_t>(std::llround(chars.size() * (1.0 - held_out)));
  for (size_t i = 0; i < chars.size(); ++i) {
    const auto id = static_cast<int32_t>(
        std::lower_bound(alphabet_.begin(), alphabet_.end(), chars[i]) - alphabet_.begin());
    (i < split ? train_ : val_).push_back(id);
  }
  const auto need = static_cast<size_t>(context + 1);
  if (train_.size() < need || val_.size() < need)
    throw std::runtime_error(
        source_ + " is too short: " + std::to_string(chars.size()) + " characters leave " +
        std::to_string(train_.size()) + " for training and " + std::to_string(val_.size()) +
        " held out, each needs more than --context " + std::to_string(context) +
        " (pass a longer text or a shorter context)");
}

std::pair<tp::Tensor, tp::Tensor> TextCorpus::batch(int64_t batch, int64_t context,
                                                    tp::Generator& generator, bool held_out,
                                                    int64_t /*step*/) const {
  return sample_windows(held_out ? val_ : train_, batch, context, generator);
}

std::string TextCorpus::describe() const {
  return source_ + ": " + std::to_string(train_size()) + " characters for training, " +
         std::to_string(val_size()) + " held out, " + std::to_string(vocab_size()) + " distinct";
}

double TextCorpus::unigram_entropy() const {
  std::vector<double> counts(alphabet_.size(), 0.0);
  for (int32_t id : train_) counts[id] += 1.0;
  double entropy = 0;
  for (double c : counts)
    if (c > 0) entropy -= c / train_.size() * std::log(c / train_.size());
  return entropy;
}

std::string TextCorpus::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids)
    append_utf8(out,
                alphabet_.at(static_cast<size_t>(std::clamp<int64_t>(id, 0, vocab_size() - 1))));
  return out;
}

std::vector<int64_t> TextCorpus::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (char32_t cp : decode_utf8(text, "the prompt")) {
    auto it = std::lower_bound(alphabet_.begin(), alphabet_.end(), cp);
    ids.push_back(it != alphabet_.end() && *it == cp ? it - alphabet_.begin() : 0);
  }
  return ids;
}

}  // namespace train_gpt

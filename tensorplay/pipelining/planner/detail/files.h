// Whole-file text reading and writing for the planner's JSON files (profiles and plans), with
// errors naming the file.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tensorplay::pipelining::detail {

inline std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + what + " file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_text_file(const std::string& path, const std::string& text,
                            const std::string& what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + what + " file '" + path + "'");
}

}  // namespace tensorplay::pipelining::detail

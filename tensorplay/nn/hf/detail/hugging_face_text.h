// Text helpers the Hugging Face folder readers and writers share (GPT-2 and Llama): reading and
// writing a file whole, a folder's config.json, a float as config.json shows it, names for errors.
#pragma once

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tensorplay::nn::detail {

/// A float as JSON shows it: the shortest decimal that reads back as the float (1e-05, not
/// 9.999999747378752e-06).
inline double shortest_double(float value) {
  char buf[32];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::strtod(std::string(buf, result.ptr).c_str(), nullptr);
}

/// The whole file; throws std::runtime_error naming it when it cannot be opened.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Writes `text` as the whole of `path`; throws std::runtime_error "`caller`: cannot write PATH".
inline void write_text(const std::filesystem::path& path, const std::string& text,
                       const std::string& caller) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error(caller + ": cannot write " + path.string());
}

/// The path of `folder`'s config.json; throws std::runtime_error naming the folder (a `model`
/// folder, e.g. "GPT-2") when it has none.
inline std::filesystem::path config_json_path(const std::string& folder, const std::string& model) {
  const std::filesystem::path path = std::filesystem::path(folder) / "config.json";
  if (!std::filesystem::exists(path))
    throw std::runtime_error(model + " folder " + folder +
                             " has no config.json (a Hugging Face model folder holds config.json "
                             "and model.safetensors)");
  return path;
}

/// The weight file(s) of `folder` as an error names them: model.safetensors, or the shards'
/// index with the shard files it lists.
inline std::string weight_files(const std::string& folder) {
  const std::filesystem::path index =
      std::filesystem::path(folder) / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) return index.string() + " (and the shards it lists)";
  return (std::filesystem::path(folder) / "model.safetensors").string();
}

/// Runs `load`, rethrowing a std::invalid_argument as one that names `folder`'s config.json and
/// weight files: "`what`: FOLDER/config.json and FOLDER/model.safetensors: ...".
template <typename F>
void naming_files(const std::string& what, const std::string& folder, F&& load) {
  try {
    load();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": the weights in " + weight_files(folder) + " do not fit " +
                                (std::filesystem::path(folder) / "config.json").string() + ": " +
                                e.what());
  }
}

/// "a, b, c" (the first 8, then how many in all), for error messages.
inline std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace tensorplay::nn::detail

// A Hugging Face config.json read field by field, each field checked, failing with the model, the
// source and the field: shared by the GPT-2 and Llama folder readers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tensorplay::nn::detail {

class ConfigReader {
 public:
  using Json = nlohmann::json;

  /// Parses `text` (from `source`) as a `model` config ("GPT-2", "Llama"); throws
  /// std::invalid_argument when it is not a JSON object.
  ConfigReader(const std::string& text, std::string model, std::string source)
      : model_(std::move(model)), source_(std::move(source)) {
    try {
      j_ = Json::parse(text);
    } catch (const Json::exception& e) {
      fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j_.is_object()) fail("not a JSON object");
  }
  /// Throws std::invalid_argument "`model` config `source`: `what`".
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(model_ + " config " + source_ + ": " + what);
  }
  /// Fails unless model_type is absent or `type` ("gpt2", "llama").
  void expect_model_type(const char* type) const {
    if (has("model_type") && at("model_type") != type)
      fail("model_type is " + at("model_type").dump() + ", not \"" + type + "\"; this reads " +
           model_ + " folders");
  }
  /// Whether `key` is there and not null.
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const Json& at(const char* key) const { return j_[key]; }
  /// A positive integer field, or `fallback` when absent.
  int64_t size(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() <= 0)
      fail(std::string(key) + " is " + j_[key].dump() + ", not a positive integer");
    return j_[key].get<int64_t>();
  }
  /// A boolean field, or `fallback` when absent.
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(std::string(key) + " is " + j_[key].dump() + ", not a boolean");
    return j_[key].get<bool>();
  }
  /// `value` (the field `key`) as a number.
  float number(const Json& value, const std::string& key) const {
    if (!value.is_number()) fail(key + " is " + value.dump() + ", not a number");
    return static_cast<float>(value.get<double>());
  }

 private:
  Json j_;
  std::string model_, source_;
};

}  // namespace tensorplay::nn::detail

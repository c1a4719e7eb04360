// Profile (profile.h): checks, lookups and the JSON form.
#include "tensorplay/pipelining/planner/profile.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorplay/pipelining/planner/detail/files.h"

namespace tensorplay::pipelining {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "tensorplay-profile";

json segment_json(const SegmentProfile& s) {
  json j = {{"name", s.name},
            {"forward", s.forward},
            {"input_backward", s.input_backward},
            {"weight_backward", s.weight_backward},
            {"full_backward", s.full_backward},
            {"activation_bytes", s.activation_bytes},
            {"activation_bytes_recompute", s.activation_bytes_recompute},
            {"parameter_bytes", s.parameter_bytes},
            {"gradient_bytes", s.gradient_bytes},
            {"optimizer_bytes", s.optimizer_bytes},
            {"output_bytes", s.output_bytes},
            {"overhead", s.overhead},
            {"optimizer_seconds", s.optimizer_seconds}};
  if (!s.larger.empty()) {
    json larger = json::array();
    for (const SizedTimes& t : s.larger)
      larger.push_back({{"samples", t.samples},
                        {"forward", t.forward},
                        {"input_backward", t.input_backward},
                        {"weight_backward", t.weight_backward},
                        {"full_backward", t.full_backward}});
    j["larger"] = larger;
  }
  return j;
}

// The field `key` of `object`, or an error naming where it was expected.
const json& field(const json& object, const char* key, const std::string& where) {
  if (!object.is_object() || !object.contains(key))
    throw std::invalid_argument("profile: " + where + " has no field '" + key + "'");
  return object.at(key);
}

double number(const json& object, const char* key, const std::string& where) {
  const json& v = field(object, key, where);
  if (!v.is_number())
    throw std::invalid_argument("profile: " + where + "." + key + " must be a number, got " +
                                v.dump());
  return v.get<double>();
}

std::string text(const json& object, const char* key, const std::string& where) {
  const json& v = field(object, key, where);
  if (!v.is_string())
    throw std::invalid_argument("profile: " + where + "." + key + " must be a string, got " +
                                v.dump());
  return v.get<std::string>();
}

SegmentProfile segment_from(const json& j, const std::string& where) {
  SegmentProfile s;
  s.name = text(j, "name", where);
  s.forward = number(j, "forward", where);
  s.input_backward = number(j, "input_backward", where);
  s.weight_backward = number(j, "weight_backward", where);
  s.full_backward = number(j, "full_backward", where);
  s.activation_bytes = number(j, "activation_bytes", where);
  s.activation_bytes_recompute = number(j, "activation_bytes_recompute", where);
  s.parameter_bytes = number(j, "parameter_bytes", where);
  s.gradient_bytes = number(j, "gradient_bytes", where);
  s.optimizer_bytes = number(j, "optimizer_bytes", where);
  s.output_bytes = number(j, "output_bytes", where);
  s.overhead = j.contains("overhead") ? number(j, "overhead", where) : 0.0;
  s.optimizer_seconds =
      j.contains("optimizer_seconds") ? number(j, "optimizer_seconds", where) : 0.0;
  if (!j.contains("larger")) return s;
  if (!j.at("larger").is_array())
    throw std::invalid_argument("profile: " + where + ".larger must be an array");
  for (size_t i = 0; i < j.at("larger").size(); ++i) {
    const json& t = j.at("larger")[i];
    const std::string at = where + ".larger[" + std::to_string(i) + "]";
    s.larger.push_back({static_cast<int64_t>(number(t, "samples", at)), number(t, "forward", at),
                        number(t, "input_backward", at), number(t, "weight_backward", at),
                        number(t, "full_backward", at)});
  }
  return s;
}

const json& array(const json& object, const char* key) {
  const json& v = field(object, key, "the profile");
  if (!v.is_array())
    throw std::invalid_argument(std::string("profile: '") + key + "' must be an array");
  return v;
}

// Throws unless `s`'s larger sizes ascend above `microbatch_size` with times >= 0.
void check_larger(const SegmentProfile& s, int64_t microbatch_size, const std::string& model) {
  int64_t below = microbatch_size;
  for (const SizedTimes& t : s.larger) {
    if (t.samples <= below)
      throw std::invalid_argument("profile of " + model + ": segment '" + s.name +
                                  "' has larger sizes that do not ascend above the microbatch's " +
                                  std::to_string(microbatch_size) + " samples (" +
                                  std::to_string(t.samples) + " after " + std::to_string(below) +
                                  ")");
    for (double v : {t.forward, t.input_backward, t.weight_backward, t.full_backward})
      if (!(v >= 0))
        throw std::invalid_argument("profile of " + model + ": segment '" + s.name +
                                    "' has a negative time at " + std::to_string(t.samples) +
                                    " samples");
    below = t.samples;
  }
}

// Throws unless `factors` ascend above `microbatch_size`, each above 0.
void check_larger_factors(const std::vector<SizedFactor>& factors, int64_t microbatch_size,
                          const std::string& model) {
  int64_t below = microbatch_size;
  for (const SizedFactor& f : factors) {
    if (f.samples <= below)
      throw std::invalid_argument(
          "profile of " + model + ": larger_compute_factors must ascend above the microbatch's " +
          std::to_string(microbatch_size) + " samples (" + std::to_string(f.samples) + " after " +
          std::to_string(below) + ")");
    if (!(f.compute_factor > 0))
      throw std::invalid_argument("profile of " + model + ": the compute factor at " +
                                  std::to_string(f.samples) + " samples must be > 0, got " +
                                  std::to_string(f.compute_factor));
    below = f.samples;
  }
}

}  // namespace

std::vector<std::string> Profile::segment_names() const {
  std::vector<std::string> names;
  for (const SegmentProfile& s : segments) names.push_back(s.name);
  return names;
}

const ChannelProfile& Profile::channel(const std::string& kind) const {
  std::string known;
  for (const ChannelProfile& c : channels) {
    if (c.kind == kind) return c;
    known += (known.empty() ? "" : ", ") + c.kind;
  }
  throw std::invalid_argument("profile of " + model + " has no channel '" + kind +
                              "'; it measured: " + (known.empty() ? "none" : known));
}

double Profile::compute_factor_at(double samples) const {
  double x0 = static_cast<double>(microbatch_size), y0 = compute_factor;
  if (samples <= x0) return y0;
  for (const SizedFactor& f : larger_compute_factors) {
    const double x1 = static_cast<double>(f.samples);
    if (samples <= x1) {  // weights that give each end's factor exactly at that end
      const double t = (samples - x0) / (x1 - x0);
      return (1.0 - t) * y0 + t * f.compute_factor;
    }
    x0 = x1, y0 = f.compute_factor;
  }
  return y0;  // past the largest calibrated size
}

double Profile::speedup(int n) const {
  if (threads.empty() || n <= 1) return 1.0;
  const ThreadScaling* below = nullptr;
  for (const ThreadScaling& t : threads) {
    if (t.threads == n) return t.speedup;
    if (t.threads < n) below = &t;
    if (t.threads > n) {
      if (below == nullptr) return t.speedup * n / t.threads;
      const double f = double(n - below->threads) / double(t.threads - below->threads);
      return below->speedup + f * (t.speedup - below->speedup);
    }
  }
  return threads.back().speedup;  // past the last measured count: no further gain
}

void Profile::check() const {
  if (segments.empty()) throw std::invalid_argument("profile of " + model + ": no segments");
  if (microbatch_size < 1)
    throw std::invalid_argument("profile of " + model + ": microbatch_size must be >= 1, got " +
                                std::to_string(microbatch_size));
  if (!segments.front().name.empty())
    throw std::invalid_argument("profile of " + model + ": the first segment's name must be \"\"");
  for (const SegmentProfile& s : segments) {
    for (double v :
         {s.forward, s.input_backward, s.weight_backward, s.full_backward, s.activation_bytes,
          s.activation_bytes_recompute, s.parameter_bytes, s.gradient_bytes, s.optimizer_bytes,
          s.output_bytes, s.overhead, s.optimizer_seconds})
      if (!(v >= 0))
        throw std::invalid_argument("profile of " + model + ": segment '" + s.name +
                                    "' has a negative or missing figure");
  }
  for (const SegmentProfile& s : segments) check_larger(s, microbatch_size, model);
  if (!(action_overhead >= 0))
    throw std::invalid_argument("profile of " + model + ": action_overhead must be >= 0");
  if (!(compute_factor > 0))
    throw std::invalid_argument("profile of " + model + ": compute_factor must be > 0, got " +
                                std::to_string(compute_factor));
  check_larger_factors(larger_compute_factors, microbatch_size, model);
  for (size_t i = 1; i < threads.size(); ++i)
    if (threads[i].threads <= threads[i - 1].threads)
      throw std::invalid_argument("profile of " + model + ": thread counts must ascend");
}

std::string profile_to_json(const Profile& p) {
  json segments = json::array(), channels = json::array(), threads = json::array();
  for (const SegmentProfile& s : p.segments) segments.push_back(segment_json(s));
  for (const ChannelProfile& c : p.channels)
    channels.push_back({{"kind", c.kind}, {"latency", c.latency}, {"bandwidth", c.bandwidth}});
  for (const ThreadScaling& t : p.threads)
    threads.push_back({{"threads", t.threads}, {"speedup", t.speedup}});
  json j = {{"format", kFormat},
            {"version", 1},
            {"model", p.model},
            {"device", p.device},
            {"microbatch_size", p.microbatch_size},
            {"cores", p.cores},
            {"activation_bytes_source", p.activation_bytes_source},
            {"segments", segments},
            {"channels", channels},
            {"threads", threads},
            {"action_overhead", p.action_overhead},
            {"compute_factor", p.compute_factor}};
  if (!p.larger_compute_factors.empty()) {
    json larger = json::array();
    for (const SizedFactor& f : p.larger_compute_factors)
      larger.push_back({{"samples", f.samples}, {"compute_factor", f.compute_factor}});
    j["larger_compute_factors"] = larger;
  }
  return j.dump(2) + "\n";
}

Profile profile_from_json(const std::string& source) {
  const json j = json::parse(source, nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument("profile: not valid JSON");
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw std::invalid_argument(std::string("profile: not a profile (its \"format\" must be \"") +
                                kFormat + "\")");
  Profile p;
  p.model = text(j, "model", "the profile");
  p.device = text(j, "device", "the profile");
  p.microbatch_size = static_cast<int64_t>(number(j, "microbatch_size", "the profile"));
  p.cores = static_cast<int>(number(j, "cores", "the profile"));
  p.activation_bytes_source = text(j, "activation_bytes_source", "the profile");
  const json& segments = array(j, "segments");
  for (size_t i = 0; i < segments.size(); ++i)
    p.segments.push_back(segment_from(segments[i], "segments[" + std::to_string(i) + "]"));
  for (const json& c : array(j, "channels"))
    p.channels.push_back({text(c, "kind", "a channel"), number(c, "latency", "a channel"),
                          number(c, "bandwidth", "a channel")});
  for (const json& t : array(j, "threads"))
    p.threads.push_back({static_cast<int>(number(t, "threads", "a thread count")),
                         number(t, "speedup", "a thread count")});
  p.action_overhead =
      j.contains("action_overhead") ? number(j, "action_overhead", "the profile") : 0.0;
  p.compute_factor =
      j.contains("compute_factor") ? number(j, "compute_factor", "the profile") : 1.0;
  if (j.contains("larger_compute_factors"))
    for (const json& f : array(j, "larger_compute_factors"))
      p.larger_compute_factors.push_back(
          {static_cast<int64_t>(number(f, "samples", "a larger compute factor")),
           number(f, "compute_factor", "a larger compute factor")});
  p.check();
  return p;
}

void save_profile(const Profile& profile, const std::string& path) {
  detail::write_text_file(path, profile_to_json(profile), "profile");
}

Profile load_profile(const std::string& path) {
  const std::string source = detail::read_text_file(path, "profile");
  try {
    return profile_from_json(source);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace tensorplay::pipelining

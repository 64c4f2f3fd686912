#include "common/metrics/result_json.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace pstrain {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// The one list of fields, in output order; `f(name, field)` for each. Writer
// and reader both walk it, so they cannot disagree.
template <typename R, typename F>
void ForEachField(R& r, F&& f) {
  f("experiment", r.experiment);
  f("model", r.model);
  f("variable_update", r.variable_update);
  f("local_parameter_device", r.local_parameter_device);
  f("all_reduce_spec", r.all_reduce_spec);
  f("consistency", r.consistency);
  f("staleness", r.staleness);
  f("transport", r.transport);
  f("num_ps", r.num_ps);
  f("num_workers", r.num_workers);
  f("devices_per_worker", r.devices_per_worker);
  f("device", r.device);
  f("batch_size_per_device", r.batch_size_per_device);
  f("global_batch_size", r.global_batch_size);
  f("steps", r.steps);
  f("images_per_sec", r.images_per_sec);
  f("images_per_sec_stddev", r.images_per_sec_stddev);
  f("final_loss", r.final_loss);
  f("test_accuracy", r.test_accuracy);
  f("wall_seconds", r.wall_seconds);
}

template <typename S, typename F>
void ForEachShardField(S& s, F&& f) {
  f("shard", s.shard);
  f("variables", s.variables);
  f("variable_bytes", s.variable_bytes);
  f("bytes_in", s.bytes_in);
  f("bytes_out", s.bytes_out);
  f("applied_updates", s.applied_updates);
  f("dropped_gradients", s.dropped_gradients);
  f("apply_seconds", s.apply_seconds);
}

// ---- Writing ----

std::string JsonValue(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through unchanged.
        }
    }
  }
  return out + "\"";
}

std::string JsonValue(int v) { return absl::StrCat(v); }
std::string JsonValue(int64_t v) { return absl::StrCat(v); }

// Shortest text that reads back as the same double; null for NaN and infinities.
std::string JsonValue(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

std::string JsonValue(const std::optional<double>& v) { return v.has_value() ? JsonValue(*v) : "null"; }

// ---- Reading ----

absl::Status FieldError(const std::string& origin, absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": field \"", name, "\": ", what));
}

std::string KindName(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "an array";
    default:
      return "nothing";
  }
}

absl::Status Convert(const Value& v, const std::string& origin, absl::string_view name, std::string* out) {
  if (v.kind_case() != Value::kStringValue) return FieldError(origin, name, "expected a string, got " + KindName(v));
  *out = v.string_value();
  return absl::OkStatus();
}

template <typename Int>
absl::Status ConvertInt(const Value& v, const std::string& origin, absl::string_view name, Int* out) {
  if (v.kind_case() != Value::kNumberValue) return FieldError(origin, name, "expected an integer, got " + KindName(v));
  const double d = v.number_value();
  // Numbers travel as doubles: integers are exact up to 2^53.
  constexpr double kExact = 9007199254740992.0;
  if (d != std::trunc(d) || std::abs(d) > kExact || d < static_cast<double>(std::numeric_limits<Int>::min()) ||
      d > static_cast<double>(std::numeric_limits<Int>::max())) {
    return FieldError(origin, name, absl::StrCat("expected an integer in range, got ", d));
  }
  *out = static_cast<Int>(d);
  return absl::OkStatus();
}

absl::Status Convert(const Value& v, const std::string& origin, absl::string_view name, int* out) {
  return ConvertInt(v, origin, name, out);
}
absl::Status Convert(const Value& v, const std::string& origin, absl::string_view name, int64_t* out) {
  return ConvertInt(v, origin, name, out);
}

// null reads as NaN: that is how non-finite values are written.
absl::Status Convert(const Value& v, const std::string& origin, absl::string_view name, double* out) {
  if (v.kind_case() == Value::kNullValue) {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (v.kind_case() == Value::kNumberValue) {
    *out = v.number_value();
  } else {
    return FieldError(origin, name, "expected a number or null, got " + KindName(v));
  }
  return absl::OkStatus();
}

absl::Status Convert(const Value& v, const std::string& origin, absl::string_view name, std::optional<double>* out) {
  if (v.kind_case() == Value::kNullValue) {
    out->reset();
    return absl::OkStatus();
  }
  double d;
  absl::Status s = Convert(v, origin, name, &d);
  if (s.ok()) *out = d;
  return s;
}

// Reads every field named by `for_each` from `obj` into `target`; the first error wins.
template <typename T, typename ForEach>
absl::Status ReadFields(const Struct& obj, const std::string& origin, T& target, ForEach for_each) {
  absl::Status status;
  for_each(target, [&](absl::string_view name, auto& field) {
    if (!status.ok()) return;
    auto it = obj.fields().find(std::string(name));
    if (it == obj.fields().end()) {
      status = FieldError(origin, name, "missing");
      return;
    }
    status = Convert(it->second, origin, name, &field);
  });
  return status;
}

}  // namespace

std::string ToJson(const RunResult& result) {
  std::vector<std::string> lines;
  ForEachField(result, [&](absl::string_view name, const auto& v) {
    lines.push_back(absl::StrCat("  \"", name, "\": ", JsonValue(v)));
  });
  std::vector<std::string> shards;
  for (const ShardLoadSummary& s : result.ps_load) {
    std::vector<std::string> parts;
    ForEachShardField(s, [&](absl::string_view name, const auto& v) {
      parts.push_back(absl::StrCat("\"", name, "\": ", JsonValue(v)));
    });
    shards.push_back(absl::StrCat("    {", absl::StrJoin(parts, ", "), "}"));
  }
  if (shards.empty()) {
    lines.push_back("  \"ps_load\": []");
  } else {
    lines.push_back(absl::StrCat("  \"ps_load\": [\n", absl::StrJoin(shards, ",\n"), "\n  ]"));
  }
  return absl::StrCat("{\n", absl::StrJoin(lines, ",\n"), "\n}\n");
}

absl::Status WriteResultJson(const RunResult& result, const std::string& path) {
  const std::string tmp = path + ".tmp";
  const std::string text = ToJson(result);
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(fileno(f)) == 0 && ok;
  const int saved_errno = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(tmp, ": write failed: ", std::strerror(saved_errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(rename_errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> ParseResultJson(const std::string& json, const std::string& origin) {
  Struct root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &root);
  if (!parsed.ok()) {
    const auto msg = parsed.message();
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a JSON object: ", absl::string_view(msg.data(), msg.size())));
  }
  RunResult result;
  absl::Status s = ReadFields(root, origin, result, [](auto& r, auto&& f) { ForEachField(r, f); });
  if (!s.ok()) return s;
  auto it = root.fields().find("ps_load");
  if (it != root.fields().end()) {
    const Value& list = it->second;
    if (list.kind_case() != Value::kListValue) {
      return FieldError(origin, "ps_load", "expected an array, got " + KindName(list));
    }
    for (int i = 0; i < list.list_value().values_size(); ++i) {
      const Value& item = list.list_value().values(i);
      const std::string where = absl::StrCat(origin, ": ps_load[", i, "]");
      if (item.kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object, got ", KindName(item)));
      }
      ShardLoadSummary shard;
      s = ReadFields(item.struct_value(), where, shard, [](auto& r, auto&& f) { ForEachShardField(r, f); });
      if (!s.ok()) return s;
      result.ps_load.push_back(shard);
    }
  }
  return result;
}

absl::StatusOr<RunResult> ReadResultJson(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": file not found"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ParseResultJson(buf.str(), path);
}

}  // namespace pstrain

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
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace pstrain {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::Struct;
using google::protobuf::Value;

// ---- Writing ----

std::string JsonString(const std::string& s) { return QuoteString(s); }

// Shortest text that reads back as the same double; null for NaN and infinities.
std::string JsonDouble(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

std::string JsonObject(const Message& m);

// The JSON value of singular field `f` of `m`: null for an optional field
// or a message that is not set.
std::string JsonField(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  if (f->has_presence() && !r->HasField(m, f)) return "null";
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return JsonString(r->GetString(m, f));
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return JsonDouble(r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return JsonDouble(r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(m, f) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_MESSAGE:  // a record of scalars (emulation)
      return JsonObject(r->GetMessage(m, f));
    default:
      LOG(FATAL) << "result.json: field " << f->full_name() << " has a type the writer does not know";
  }
  return "null";
}

// [1, 2], ["a", "b"] or [{...}, {...}]: repeated field `f` of `m` of
// integers (counts per epoch or per worker), strings (warnings) or records
// (a worker's layout decisions), the lists a record holds.
std::string JsonScalars(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  std::vector<std::string> items;
  for (int k = 0; k < r->FieldSize(m, f); ++k) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT64:
        items.push_back(absl::StrCat(r->GetRepeatedInt64(m, f, k)));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        items.push_back(absl::StrCat(r->GetRepeatedInt32(m, f, k)));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        items.push_back(JsonString(r->GetRepeatedString(m, f, k)));
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        items.push_back(JsonObject(r->GetRepeatedMessage(m, f, k)));
        break;
      default:
        LOG(FATAL) << "result.json: repeated field " << f->full_name() << " is not of integers, strings or records";
    }
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// {"a": 1, "b": "x", "c": [1, 2]}: a message of scalar fields, lists of
// integers or strings (or such records) on one line.
std::string JsonObject(const Message& m) {
  std::vector<std::string> parts;
  const auto* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    parts.push_back(absl::StrCat(JsonString(f->name()), ": ", f->is_repeated() ? JsonScalars(m, f) : JsonField(m, f)));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

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

// An integer JSON number (numbers travel as doubles: exact up to 2^53)
// within [lo, hi].
absl::StatusOr<int64_t> IntegerOf(const Value& v, double lo, double hi) {
  if (v.kind_case() != Value::kNumberValue) {
    return absl::InvalidArgumentError(absl::StrCat("expected an integer, got ", KindName(v)));
  }
  const double d = v.number_value();
  constexpr double kExact = 9007199254740992.0;
  if (d != std::trunc(d) || std::abs(d) > kExact || d < lo || d > hi) {
    return absl::InvalidArgumentError(absl::StrCat("expected an integer in range, got ", d));
  }
  return static_cast<int64_t>(d);
}

absl::Status ReadObject(const Struct& obj, const std::string& origin, int required_up_to, Message* m);

// Sets singular field `f` of `m` (a scalar, or a record of scalars) from `v`.
absl::Status SetField(const Value& v, const FieldDescriptor* f, Message* m) {
  const Reflection* r = m->GetReflection();
  if (v.kind_case() == Value::kNullValue && f->has_presence()) {
    r->ClearField(m, f);  // absent
    return absl::OkStatus();
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      if (v.kind_case() != Value::kStringValue) {
        return absl::InvalidArgumentError(absl::StrCat("expected a string, got ", KindName(v)));
      }
      r->SetString(m, f, v.string_value());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_INT32: {
      absl::StatusOr<int64_t> i =
          IntegerOf(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      if (!i.ok()) return i.status();
      r->SetInt32(m, f, static_cast<int32_t>(*i));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      absl::StatusOr<int64_t> i = IntegerOf(v, static_cast<double>(std::numeric_limits<int64_t>::min()),
                                            static_cast<double>(std::numeric_limits<int64_t>::max()));
      if (!i.ok()) return i.status();
      r->SetInt64(m, f, *i);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double d;
      if (v.kind_case() == Value::kNullValue) {
        d = std::numeric_limits<double>::quiet_NaN();  // how non-finite values are written
      } else if (v.kind_case() == Value::kNumberValue) {
        d = v.number_value();
      } else {
        return absl::InvalidArgumentError(absl::StrCat("expected a number or null, got ", KindName(v)));
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        r->SetDouble(m, f, d);
      } else {
        r->SetFloat(m, f, static_cast<float>(d));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (v.kind_case() != Value::kBoolValue) {
        return absl::InvalidArgumentError(absl::StrCat("expected a boolean, got ", KindName(v)));
      }
      r->SetBool(m, f, v.bool_value());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (v.kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(absl::StrCat("expected an object or null, got ", KindName(v)));
      }
      // Every field of the record may be absent (files written before it existed).
      return ReadObject(v.struct_value(), std::string(f->name()), 0, r->MutableMessage(m, f));
    default:
      return absl::InternalError(absl::StrCat("field ", f->full_name(), " has a type the reader does not know"));
  }
}

// Reads repeated integer, string or record field `f` of `m` from the array
// `v` (every field of a record may be absent).
absl::Status ReadScalars(const Value& v, const FieldDescriptor* f, Message* m) {
  if (v.kind_case() != Value::kListValue) return absl::InvalidArgumentError("expected an array, got " + KindName(v));
  const Reflection* r = m->GetReflection();
  for (const Value& item : v.list_value().values()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (item.kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(absl::StrCat("expected objects, got ", KindName(item)));
      }
      PSTRAIN_RETURN_IF_ERROR(ReadObject(item.struct_value(), std::string(f->name()), 0, r->AddMessage(m, f)));
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
      PSTRAIN_ASSIGN_OR_RETURN(const int64_t n, IntegerOf(item, -9007199254740992.0, 9007199254740992.0));
      r->AddInt64(m, f, n);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      PSTRAIN_ASSIGN_OR_RETURN(const int64_t n, IntegerOf(item, -2147483648.0, 2147483647.0));
      r->AddInt32(m, f, static_cast<int32_t>(n));
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (item.kind_case() != Value::kStringValue) {
        return absl::InvalidArgumentError(absl::StrCat("expected strings, got ", KindName(item)));
      }
      r->AddString(m, f, item.string_value());
    } else {
      return absl::InternalError(absl::StrCat("field ", f->full_name(), " has a type the reader does not know"));
    }
  }
  return absl::OkStatus();
}

// Reads the fields and lists of `m` from `obj` (a RunResult's own lists of
// records are the caller's: it names their items). A field
// numbered at most `required_up_to` must be there; the others may be absent.
absl::Status ReadObject(const Struct& obj, const std::string& origin, int required_up_to, Message* m) {
  const auto* d = m->GetDescriptor();
  const bool top = d == RunResult::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      if (top && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) continue;
      auto it = obj.fields().find(f->name());
      if (it == obj.fields().end()) continue;
      if (absl::Status s = ReadScalars(it->second, f, m); !s.ok()) return FieldError(origin, f->name(), s.message());
      continue;
    }
    auto it = obj.fields().find(f->name());
    if (it == obj.fields().end()) {
      if (f->number() <= required_up_to) return FieldError(origin, f->name(), "missing");
      continue;
    }
    if (absl::Status s = SetField(it->second, f, m); !s.ok()) return FieldError(origin, f->name(), s.message());
  }
  return absl::OkStatus();
}

}  // namespace

std::string ToJson(const RunResult& result) {
  std::vector<std::string> lines;
  const auto* d = RunResult::descriptor();
  const Reflection* r = result.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->is_repeated()) {
      lines.push_back(absl::StrCat("  ", JsonString(f->name()), ": ", JsonField(result, f)));
      continue;
    }
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      lines.push_back(absl::StrCat("  ", JsonString(f->name()), ": ", JsonScalars(result, f)));
      continue;
    }
    std::vector<std::string> items;
    for (int k = 0; k < r->FieldSize(result, f); ++k) {
      items.push_back(absl::StrCat("    ", JsonObject(r->GetRepeatedMessage(result, f, k))));
    }
    lines.push_back(items.empty()
                        ? absl::StrCat("  ", JsonString(f->name()), ": []")
                        : absl::StrCat("  ", JsonString(f->name()), ": [\n", absl::StrJoin(items, ",\n"), "\n  ]"));
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
  if (absl::Status s = ReadObject(root, origin, kLastContractField, &result); !s.ok()) return s;
  const auto* d = RunResult::descriptor();
  const Reflection* r = result.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->is_repeated() || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;  // ReadObject's
    auto it = root.fields().find(f->name());
    if (it == root.fields().end()) continue;  // e.g. ps_load of an older file
    const Value& list = it->second;
    if (list.kind_case() != Value::kListValue) {
      return FieldError(origin, f->name(), "expected an array, got " + KindName(list));
    }
    for (int k = 0; k < list.list_value().values_size(); ++k) {
      const Value& item = list.list_value().values(k);
      const std::string where = absl::StrCat(origin, ": ", f->name(), "[", k, "]");
      if (item.kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object, got ", KindName(item)));
      }
      // Every field of an element may be absent (files written before it existed).
      if (absl::Status s = ReadObject(item.struct_value(), where, 0, r->AddMessage(&result, f)); !s.ok()) return s;
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

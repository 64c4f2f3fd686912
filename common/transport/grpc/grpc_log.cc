#include "common/transport/grpc/grpc_log.h"

#include <grpc/support/log.h>

#include <cstdio>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace {

thread_local std::string* captured = nullptr;

// gRPC's messages may span lines; one line each on stderr.
std::string OneLine(absl::string_view message) {
  std::string line;
  for (absl::string_view part : absl::StrSplit(message, '\n', absl::SkipWhitespace())) {
    absl::StrAppend(&line, line.empty() ? "" : " ", part);
  }
  return line;
}

void LogLine(gpr_log_func_args* args) {
  const std::string line = OneLine(args->message);
  if (captured != nullptr) {
    absl::StrAppend(captured, line, "\n");
    return;
  }
  const std::string text = absl::StrCat("grpc: ", gpr_log_severity_string(args->severity), ": ", line, " (", args->file,
                                        ":", args->line, ")\n");
  std::fputs(text.c_str(), stderr);
}

}  // namespace

void RouteGrpcLogs() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(LogLine); });
}

GrpcLogCapture::GrpcLogCapture() { captured = &text_; }

GrpcLogCapture::~GrpcLogCapture() { captured = nullptr; }

std::string ListenFailureCause(const std::string& grpc_log) {
  struct Cause {
    const char* found;
    const char* says;
  };
  static constexpr Cause kCauses[] = {
      {"Address already in use", "address in use"},
      {"Permission denied", "not permitted (ports below 1024 need privileges)"},
      {"Cannot assign requested address", "not an address of this host"},
      {"DNS resolution failed", "cannot resolve the host name"},
      {"Name or service not known", "cannot resolve the host name"},
  };
  for (const Cause& cause : kCauses) {
    if (absl::StrContains(grpc_log, cause.found)) return cause.says;
  }
  const std::string first = grpc_log.substr(0, grpc_log.find('\n'));
  return first.empty() ? "unknown cause" : first;
}

}  // namespace pstrain

#include "common/command_line/command_line.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace {

bool Own(const gflags::CommandLineFlagInfo& flag, const CommandLineSpec& spec) {
  const std::string stem = std::filesystem::path(flag.filename).stem().string();
  return std::find(spec.own_files.begin(), spec.own_files.end(), stem) != spec.own_files.end();
}

// "  --name=<default>  description"; strings quoted, so "" reads as empty.
std::string FlagLine(const gflags::CommandLineFlagInfo& flag) {
  const std::string value = flag.type == "string" ? absl::StrCat("\"", flag.default_value, "\"") : flag.default_value;
  return absl::StrCat("  --", flag.name, "=", value, "  ", flag.description);
}

// The info of the flag `name` names, with a bool's "no" prefix undone.
bool Lookup(const std::string& name, gflags::CommandLineFlagInfo* info, bool* negated) {
  *negated = false;
  if (gflags::GetCommandLineFlagInfo(name.c_str(), info)) return true;
  if (name.rfind("no", 0) != 0 || !gflags::GetCommandLineFlagInfo(name.c_str() + 2, info)) return false;
  *negated = info->type == "bool";
  return *negated;
}

}  // namespace

std::string HelpText(const CommandLineSpec& spec, bool full) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::vector<std::string> own, others;
  for (const gflags::CommandLineFlagInfo& flag : flags) {
    if (Own(flag, spec)) {
      if (!spec.shows || spec.shows(flag.description)) own.push_back(FlagLine(flag));
    } else if (full && flag.name != "help" && flag.name != "helpfull") {
      others.push_back(FlagLine(flag));
    }
  }
  std::string text =
      absl::StrCat("usage: ", spec.program, " ", spec.usage, "\n\nflags:\n", absl::StrJoin(own, "\n"), "\n");
  if (full) {
    absl::StrAppend(&text, "\nthe libraries' flags (glog, gflags):\n", absl::StrJoin(others, "\n"), "\n");
  } else {
    absl::StrAppend(&text, "\n--helpfull also lists the libraries' flags (glog's logging, gflags').\n");
  }
  return text;
}

std::string FirstBadFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals));
    gflags::CommandLineFlagInfo info;
    bool negated = false;
    if (!Lookup(name, &info, &negated)) return absl::StrCat("unknown flag --", name);
    if (negated) continue;
    std::string value;
    if (equals != absl::string_view::npos) {
      value = std::string(arg.substr(equals + 1));
    } else if (info.type == "bool") {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];  // "--flag value" (the value may look like "-1")
    } else {
      return absl::StrCat("--", name, " needs a value (", info.type, ")");
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::StrCat("--", name, ": '", value, "' is not ",
                          info.type == "int32" || info.type == "int64" ? "an " : "a ", info.type);
    }
  }
  return "";
}

void ParseCommandLine(const CommandLineSpec& spec, int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i) {
    const absl::string_view arg = (*argv)[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull" || arg == "-helpfull") {
      std::cout << HelpText(spec, absl::EndsWith(arg, "helpfull"));
      std::exit(0);
    }
  }
  if (const std::string bad = FirstBadFlag(*argc, *argv); !bad.empty()) {
    std::cerr << spec.program << ": " << bad << " (see --help)" << std::endl;
    std::exit(kExitBadFlag);
  }
  gflags::SetUsageMessage(absl::StrCat(spec.program, " ", spec.usage));
  gflags::ParseCommandLineNonHelpFlags(argc, argv, /*remove_flags=*/true);
}

}  // namespace pstrain

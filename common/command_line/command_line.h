// The command line of every pstrain binary, handled one way:
//
//   --help       the usage and pstrain's own flags (those defined in the
//                binary's own files), one line each; exit 0
//   --helpfull   the same, then the libraries' flags (glog's, gflags'); exit 0
//   a bad flag   a flag no one defines, or a value its type refuses
//                ("--timeout_s abc"): one line on stderr, naming it; exit 2
//
// and otherwise gflags::ParseCommandLineFlags, removing the flags from argv.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pstrain {

inline constexpr int kExitBadFlag = 2;

struct CommandLineSpec {
  std::string program;  // "pstrain-launch": names it in messages
  // After "usage: <program> "; lines after the first are printed as given.
  std::string usage;
  // Basenames without extension of the files that define the binary's own
  // flags ("launch_main"): --help shows theirs, --helpfull every flag.
  std::vector<std::string> own_files;
  // When set, --help shows only the own flags whose description it accepts
  // (pstrain-bench's "ps: ..." flags for `pstrain-bench ps --help`).
  std::function<bool(const std::string& description)> shows;
};

// Parses and removes the flags (see above); exits on --help, --helpfull
// and bad flags.
void ParseCommandLine(const CommandLineSpec& spec, int* argc, char*** argv);

// What --help (full: --helpfull) prints.
std::string HelpText(const CommandLineSpec& spec, bool full);

// The line a bad flag of argv gets ("unknown flag --x", "--timeout_s: 'abc'
// is not an int32"), or "" when every flag is good. Sets the good ones.
std::string FirstBadFlag(int argc, char** argv);

}  // namespace pstrain

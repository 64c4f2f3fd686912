// The output of an mpirun started with --tag-output, turned back into the
// lines of each rank. Open MPI tags every chunk it forwards with
// "[<job>,<rank>]<stdout>:" (or <stderr>:), at its start and after each
// newline in it, so a rank's line that reached mpirun in two reads comes out
// in two pieces, with another rank's output maybe in between. TaggedOutput
// keeps a partial line per rank and gives each whole line once, as
// "<prefix of the rank> <line>" (prefix "[worker1]" for rank 1); bytes before
// any tag (mpirun's own messages) go under "[mpirun]".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain::launch {

class TaggedOutput {
 public:
  // Rank r's lines are prefixed "[<rank_name><r>] " ("worker" -> "[worker1] ").
  explicit TaggedOutput(std::string rank_name) : rank_name_(std::move(rank_name)) {}

  // The lines `data` completes, prefixed, each ending in '\n'.
  std::string Feed(absl::string_view data);
  // What is left of unfinished lines (the pipe closed), each as a line.
  std::string Flush();

 private:
  std::string Prefix(int rank) const;
  // Appends `text` to rank's partial line; completed lines go to *out.
  void Append(int rank, absl::string_view text, std::string* out);

  const std::string rank_name_;
  std::string pending_;               // an incomplete tag at the end of the last chunk
  int rank_ = -1;                     // the rank the current bytes belong to; -1: mpirun itself
  std::map<int, std::string> lines_;  // per rank, its unfinished line
};

}  // namespace pstrain::launch

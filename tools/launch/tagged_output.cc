#include "tools/launch/tagged_output.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain::launch {
namespace {

constexpr size_t kLongestTag = 64;

// The length of the tag "[<job>,<rank>]<stream>:" at the start of `s` and its
// rank; 0 when `s` does not start with one; npos when `s` may be the start of
// one that the next chunk completes.
size_t TagAt(absl::string_view s, int* rank) {
  if (s.empty() || s[0] != '[') return 0;
  const size_t comma = s.find(',');
  const size_t close = s.find("]<");
  const size_t end = s.find(">:");
  if (end == absl::string_view::npos) {
    const bool may_grow = s.size() < kLongestTag && s.find('\n') == absl::string_view::npos;
    return may_grow ? absl::string_view::npos : 0;
  }
  if (comma == absl::string_view::npos || close == absl::string_view::npos || !(comma < close && close < end)) return 0;
  if (!absl::SimpleAtoi(s.substr(comma + 1, close - comma - 1), rank)) return 0;
  const absl::string_view stream = s.substr(close + 2, end - close - 2);
  if (stream != "stdout" && stream != "stderr" && stream != "stddiag") return 0;
  return end + 2;
}

}  // namespace

std::string TaggedOutput::Prefix(int rank) const {
  return rank < 0 ? "[mpirun] " : absl::StrCat("[", rank_name_, rank, "] ");
}

void TaggedOutput::Append(int rank, absl::string_view text, std::string* out) {
  std::string& line = lines_[rank];
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == absl::string_view::npos) {
      line.append(text.data(), text.size());
      return;
    }
    absl::StrAppend(out, Prefix(rank), line, text.substr(0, nl), "\n");
    line.clear();
    text.remove_prefix(nl + 1);
  }
}

std::string TaggedOutput::Feed(absl::string_view data) {
  std::string joined = pending_;
  joined.append(data.data(), data.size());
  pending_.clear();
  absl::string_view rest = joined;
  std::string out;
  while (!rest.empty()) {
    int rank = 0;
    const size_t tag = TagAt(rest, &rank);
    if (tag == absl::string_view::npos) {  // wait for the rest of the tag
      pending_ = std::string(rest);
      break;
    }
    if (tag > 0) {
      rank_ = rank;
      rest.remove_prefix(tag);
      continue;
    }
    // Up to the next possible tag: a '[' right after a newline, or here.
    size_t next = rest.find("\n[", 0);
    next = next == absl::string_view::npos ? rest.size() : next + 1;
    const size_t bracket = rest.find('[', 1);
    if (bracket != absl::string_view::npos && bracket < next && TagAt(rest.substr(bracket), &rank) != 0) next = bracket;
    Append(rank_, rest.substr(0, next), &out);
    rest.remove_prefix(next);
  }
  return out;
}

std::string TaggedOutput::Flush() {
  std::string out;
  for (auto& [rank, line] : lines_) {
    if (!line.empty()) absl::StrAppend(&out, Prefix(rank), line, "\n");
    line.clear();
  }
  if (!pending_.empty()) absl::StrAppend(&out, Prefix(-1), pending_, "\n");
  pending_.clear();
  return out;
}

}  // namespace pstrain::launch

#include "tools/launch/host_count.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain::launch {
namespace {

// Reads a whole regular file.
absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open config file: ", std::strerror(errno)));
  }
  std::string text;
  struct stat st;
  absl::Status status;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  } else {
    char buf[8192];
    while (true) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n > 0) {
        text.append(buf, n);
      } else if (n == 0) {
        break;
      } else if (errno != EINTR) {
        status = absl::InvalidArgumentError(absl::StrCat(path, ": cannot read config file: ", std::strerror(errno)));
        break;
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return text;
}

bool IsTextProtoPath(absl::string_view path) {
  for (absl::string_view ext : {".pbtxt", ".textproto", ".prototxt", ".txtpb"}) {
    if (absl::EndsWithIgnoreCase(path, ext)) return true;
  }
  return false;
}

// ---- YAML -----------------------------------------------------------------

absl::StatusOr<int> CountYamlList(const YAML::Node& cluster, const char* key, absl::string_view name) {
  const YAML::Node list = cluster[key];
  if (!list || list.IsNull()) return 0;
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": cluster.", key, " must be a list of host:port strings (line ", list.Mark().line + 1, ")"));
  }
  return static_cast<int>(list.size());
}

// ---- protobuf text format -------------------------------------------------

struct Token {
  enum Kind { kWord, kString, kPunct, kEnd } kind = kEnd;
  std::string text;  // word text, or the punctuation character
  int line = 1;
};

// Splits text-format input into words, string literals and the punctuation
// that structures it. Comments are dropped.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view s, absl::string_view name) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  auto is_punct = [](char c) { return absl::string_view("{}<>[]:,;").find(c) != absl::string_view::npos; };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const int start_line = line;
      ++i;
      std::string value;
      bool closed = false;
      while (i < s.size() && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size()) {
          value += s[i + 1];
          i += 2;
        } else if (s[i] == c) {
          closed = true;
          ++i;
          break;
        } else {
          value += s[i++];
        }
      }
      if (!closed) {
        return absl::InvalidArgumentError(absl::StrCat(name, ":", start_line, ": unterminated string literal"));
      }
      tokens.push_back({Token::kString, std::move(value), start_line});
    } else if (is_punct(c)) {
      tokens.push_back({Token::kPunct, std::string(1, c), line});
      ++i;
    } else {
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])) && !is_punct(s[j]) && s[j] != '#' &&
             s[j] != '"' && s[j] != '\'') {
        ++j;
      }
      tokens.push_back({Token::kWord, std::string(s.substr(i, j - i)), line});
      i = j;
    }
  }
  tokens.push_back({Token::kEnd, "", line});
  return tokens;
}

bool IsPunct(const Token& t, char c) { return t.kind == Token::kPunct && t.text[0] == c; }

// Parses the value of a `ps_hosts` / `worker_hosts` field starting at
// tokens[*pos] (just after the field name) and returns how many hosts it holds.
absl::StatusOr<int> CountTextProtoValue(const std::vector<Token>& tokens, size_t* pos, const std::string& field,
                                        absl::string_view name) {
  size_t& p = *pos;
  auto error = [&](const Token& t, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", t.line, ": cluster.", field, ": expected ", what));
  };
  if (!IsPunct(tokens[p], ':')) return error(tokens[p], "':' after the field name");
  ++p;
  if (tokens[p].kind == Token::kString) {
    while (tokens[p].kind == Token::kString) ++p;  // adjacent literals concatenate
    return 1;
  }
  if (!IsPunct(tokens[p], '[')) return error(tokens[p], "a quoted host:port or a [...] list");
  ++p;
  int count = 0;
  if (IsPunct(tokens[p], ']')) {
    ++p;
    return 0;
  }
  while (true) {
    if (tokens[p].kind != Token::kString) return error(tokens[p], "a quoted host:port in the list");
    while (tokens[p].kind == Token::kString) ++p;
    ++count;
    if (IsPunct(tokens[p], ']')) {
      ++p;
      return count;
    }
    if (!IsPunct(tokens[p], ',')) return error(tokens[p], "',' or ']' in the list");
    ++p;
  }
}

}  // namespace

absl::StatusOr<HostCounts> CountHostsInYaml(absl::string_view text, absl::string_view name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not valid YAML: ", e.what()));
  }
  HostCounts counts;
  if (!root || root.IsNull()) return counts;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the top level must be a map of config fields"));
  }
  try {
    const YAML::Node cluster = root["cluster"];
    if (!cluster || cluster.IsNull()) return counts;
    if (!cluster.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": cluster must be a map with ps_hosts and worker_hosts (line ", cluster.Mark().line + 1, ")"));
    }
    absl::StatusOr<int> ps = CountYamlList(cluster, "ps_hosts", name);
    if (!ps.ok()) return ps.status();
    absl::StatusOr<int> workers = CountYamlList(cluster, "worker_hosts", name);
    if (!workers.ok()) return workers.status();
    counts.num_ps = *ps;
    counts.num_workers = *workers;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", e.what()));
  }
  return counts;
}

absl::StatusOr<HostCounts> CountHostsInTextProto(absl::string_view text, absl::string_view name) {
  absl::StatusOr<std::vector<Token>> tokenized = Tokenize(text, name);
  if (!tokenized.ok()) return tokenized.status();
  const std::vector<Token>& tokens = *tokenized;

  HostCounts counts;
  std::vector<char> open;  // the closing character each open block expects
  int cluster_depth = -1;  // depth of the fields of the open cluster block
  size_t p = 0;
  while (tokens[p].kind != Token::kEnd) {
    const Token& t = tokens[p];
    const int depth = static_cast<int>(open.size());
    if (t.kind == Token::kPunct && (t.text[0] == '{' || t.text[0] == '<')) {
      open.push_back(t.text[0] == '{' ? '}' : '>');
      ++p;
    } else if (t.kind == Token::kPunct && (t.text[0] == '}' || t.text[0] == '>')) {
      if (open.empty() || open.back() != t.text[0]) {
        return absl::InvalidArgumentError(absl::StrCat(name, ":", t.line, ": unbalanced '", t.text, "'"));
      }
      open.pop_back();
      if (static_cast<int>(open.size()) < cluster_depth) cluster_depth = -1;
      ++p;
    } else if (t.kind == Token::kWord && depth == 0 && t.text == "cluster") {
      ++p;
      if (IsPunct(tokens[p], ':')) ++p;
      if (!IsPunct(tokens[p], '{') && !IsPunct(tokens[p], '<')) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ":", tokens[p].line, ": cluster: expected '{' to open the message"));
      }
      cluster_depth = 1;  // the '{' is consumed by the next iteration
    } else if (t.kind == Token::kWord && depth == cluster_depth && (t.text == "ps_hosts" || t.text == "worker_hosts")) {
      ++p;
      absl::StatusOr<int> n = CountTextProtoValue(tokens, &p, t.text, name);
      if (!n.ok()) return n.status();
      (t.text == "ps_hosts" ? counts.num_ps : counts.num_workers) += *n;
    } else {
      ++p;
    }
  }
  if (!open.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": unexpected end of file: missing '", std::string(1, open.back()), "'"));
  }
  return counts;
}

absl::StatusOr<HostCounts> CountHosts(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<HostCounts> counts =
      IsTextProtoPath(path) ? CountHostsInTextProto(*text, path) : CountHostsInYaml(*text, path);
  if (!counts.ok()) return counts;
  if (counts->num_workers == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ": cluster.worker_hosts lists no workers; the launcher starts one "
                                                   "process "
                                                   "per host listed in cluster.ps_hosts and cluster.worker_hosts"));
  }
  return counts;
}

}  // namespace pstrain::launch

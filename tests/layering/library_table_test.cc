// The table "Which library may include which" of docs/ARCHITECTURE.md,
// checked against the build: build/layering/libraries.txt, which
// cmake/layering.cmake writes at configure time (every pstrain_* library of
// the product and its direct pstrain_* link dependencies).
//
// The table's format: the first column names a row's libraries in backticks
// (`pstrain_ps`); in the "links" and "never" columns every name in backticks
// is a library, without its `pstrain_` prefix (`optim`), and the rest is
// notes. The build must
//   * give every library of its own a row,
//   * link each library only to libraries its row's "links" column names,
//   * never let a library reach, directly or through others, a library its
//     row's "never" column names.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kTableFile[] = "docs/ARCHITECTURE.md";
constexpr char kTableCaption[] = "Which library may include which";

struct Row {
  int line = 0;  // in kTableFile
  std::vector<std::string> libraries;
  std::set<std::string> links;
  std::set<std::string> never;
};

// The names between backticks in `text`.
std::vector<std::string> Backticked(const std::string& text) {
  std::vector<std::string> names;
  size_t open = text.find('`');
  while (open != std::string::npos) {
    const size_t close = text.find('`', open + 1);
    if (close == std::string::npos) break;
    names.push_back(text.substr(open + 1, close - open - 1));
    open = text.find('`', close + 1);
  }
  return names;
}

std::string Library(const std::string& name) { return name.rfind("pstrain_", 0) == 0 ? name : "pstrain_" + name; }

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line.substr(1));  // after the leading '|'
  std::string cell;
  while (std::getline(in, cell, '|')) cells.push_back(cell);
  return cells;
}

std::string Where(int line) { return std::string(kTableFile) + ":" + std::to_string(line); }

// The rows of the table after kTableCaption (header and separator skipped).
std::vector<Row> ReadTable(std::string* error) {
  std::ifstream in(std::string(PSTRAIN_TEST_SOURCE_DIR) + "/" + kTableFile);
  if (!in) {
    *error = std::string("cannot read ") + kTableFile;
    return {};
  }
  std::vector<Row> rows;
  std::string line;
  int number = 0;
  bool after_caption = false, in_table = false;
  while (std::getline(in, line)) {
    ++number;
    if (!after_caption) {
      after_caption = line.find(kTableCaption) != std::string::npos;
      continue;
    }
    if (line.empty() || line[0] != '|') {
      if (in_table) break;
      continue;
    }
    if (!in_table) {  // the header row
      in_table = true;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    const std::vector<std::string> cells = Cells(line);
    if (cells.size() < 3) {
      *error = Where(number) + ": a row needs three columns (library, links, never): " + line;
      return {};
    }
    Row row;
    row.line = number;
    for (const std::string& name : Backticked(cells[0])) {
      if (name.rfind("pstrain_", 0) == 0) row.libraries.push_back(name);
    }
    for (const std::string& name : Backticked(cells[1])) row.links.insert(Library(name));
    for (const std::string& name : Backticked(cells[2])) row.never.insert(Library(name));
    rows.push_back(row);
  }
  if (rows.empty()) *error = std::string("no table after \"") + kTableCaption + "\" in " + kTableFile;
  return rows;
}

// library -> its direct pstrain_* dependencies, from libraries.txt.
std::map<std::string, std::set<std::string>> ReadBuildGraph(std::string* error) {
  std::ifstream in(PSTRAIN_LIBRARY_GRAPH);
  if (!in) {
    *error =
        std::string("cannot read ") + PSTRAIN_LIBRARY_GRAPH + " (written by cmake/layering.cmake at configure time)";
    return {};
  }
  std::map<std::string, std::set<std::string>> graph;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    std::set<std::string>& deps = graph[line.substr(0, colon)];
    std::stringstream rest(line.substr(colon + 1));
    std::string dep;
    while (rest >> dep) deps.insert(dep);
  }
  if (graph.empty()) *error = std::string(PSTRAIN_LIBRARY_GRAPH) + " lists no library";
  return graph;
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

class LibraryTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    rows_ = ReadTable(&error);
    ASSERT_TRUE(error.empty()) << error;
    graph_ = ReadBuildGraph(&error);
    ASSERT_TRUE(error.empty()) << error;
    for (const Row& row : rows_) {
      for (const std::string& library : row.libraries) row_of_.emplace(library, &row);
    }
  }

  std::vector<Row> rows_;
  std::map<std::string, const Row*> row_of_;
  std::map<std::string, std::set<std::string>> graph_;
};

// Every name the table uses is a library it has a row for, once; no row
// both allows and forbids a library.
TEST_F(LibraryTableTest, TableIsConsistent) {
  std::map<std::string, int> rows_naming;
  for (const Row& row : rows_) {
    for (const std::string& library : row.libraries) ++rows_naming[library];
  }
  for (const auto& [library, count] : rows_naming) {
    EXPECT_EQ(count, 1) << library << " has " << count << " rows in the table of " << kTableFile;
  }
  for (const Row& row : rows_) {
    for (const std::set<std::string>* column : {&row.links, &row.never}) {
      for (const std::string& name : *column) {
        EXPECT_TRUE(rows_naming.count(name))
            << Where(row.line) << ": `" << name << "` names no library of the table (a typo, or a row is missing)";
      }
    }
    for (const std::string& name : row.links) {
      EXPECT_FALSE(row.never.count(name)) << Where(row.line) << ": " << name << " is under both links and never";
    }
  }
}

TEST_F(LibraryTableTest, EveryLibraryOfTheBuildHasARow) {
  for (const auto& [library, deps] : graph_) {
    EXPECT_TRUE(row_of_.count(library)) << library << " is a library of this build but has no row in the table \""
                                        << kTableCaption << "\" of " << kTableFile << ": add one";
  }
}

// Each direct link is one the library's "links" column allows.
TEST_F(LibraryTableTest, EveryLinkIsAllowed) {
  for (const auto& [library, deps] : graph_) {
    const auto row = row_of_.find(library);
    if (row == row_of_.end()) continue;  // EveryLibraryOfTheBuildHasARow says so
    for (const std::string& dep : deps) {
      EXPECT_TRUE(row->second->links.count(dep))
          << library << " links " << dep << ", which the table does not allow (" << Where(row->second->line)
          << ", links: " << Join(row->second->links) << "): remove the link, or if the edge is right, add it to "
          << "the table";
    }
  }
}

// No library reaches what its "never" column forbids, through any path of
// links (private ones included: they end up in the same binaries).
TEST_F(LibraryTableTest, NoLibraryReachesWhatItMustNever) {
  for (const auto& [library, deps] : graph_) {
    const auto row = row_of_.find(library);
    if (row == row_of_.end() || row->second->never.empty()) continue;
    // Breadth first, remembering how each library was reached.
    std::map<std::string, std::string> reached_from = {{library, ""}};
    std::vector<std::string> frontier = {library};
    while (!frontier.empty()) {
      std::vector<std::string> next;
      for (const std::string& from : frontier) {
        const auto out = graph_.find(from);
        if (out == graph_.end()) continue;
        for (const std::string& to : out->second) {
          if (reached_from.emplace(to, from).second) next.push_back(to);
        }
      }
      frontier = std::move(next);
    }
    for (const std::string& forbidden : row->second->never) {
      if (!reached_from.count(forbidden)) continue;
      std::string path = forbidden;
      for (std::string at = reached_from[forbidden]; !at.empty(); at = reached_from[at]) path = at + " -> " + path;
      ADD_FAILURE() << library << " reaches " << forbidden << " (" << path << "), which its row forbids ("
                    << Where(row->second->line) << ", never: " << Join(row->second->never) << ")";
    }
  }
}

}  // namespace
}  // namespace pstrain

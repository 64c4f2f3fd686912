#include "tools/data/folder_writer.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace pstrain::data_tool {
namespace fs = std::filesystem;
namespace {

std::string ClassFolder(int label, const std::string& name) {
  return absl::StrFormat("%02d-%s", label, absl::StrReplaceAll(name, {{"/", "_"}, {" ", "_"}}));
}

absl::Status WriteWhole(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> WriteClassFolders(const SplitSource& split, const std::vector<std::string>& classes,
                                          const std::string& out) {
  std::vector<fs::path> folders;
  for (size_t c = 0; c < classes.size(); ++c) {
    folders.push_back(fs::path(out) / split.name / ClassFolder(static_cast<int>(c), classes[c]));
    std::error_code ec;
    fs::create_directories(folders.back(), ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", folders.back().string(), ": ", ec.message()));
  }
  int64_t bytes = 0;
  for (int64_t i = 0; i < split.size; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(const data::ImageExample example, split.example(i));
    if (example.label < 0 || example.label >= static_cast<int64_t>(classes.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(split.name, " example ", i, ": label ", example.label, " outside [0, ", classes.size(), ")"));
    }
    const std::string extension = absl::AsciiStrToLower(example.format) == "png" ? "png" : "jpg";
    const fs::path file = folders[example.label] / absl::StrFormat("%s-%06d.%s", split.name, i, extension);
    PSTRAIN_RETURN_IF_ERROR(WriteWhole(file, example.encoded));
    bytes += static_cast<int64_t>(example.encoded.size());
  }
  return bytes;
}

}  // namespace pstrain::data_tool

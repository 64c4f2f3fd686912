#include "common/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions.
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension.
constexpr int64_t kRows = 28;
constexpr int64_t kCols = 28;
constexpr int kNumClasses = 10;

// An open gzip (or plain) file; closes on destruction.
class GzFile {
 public:
  static absl::StatusOr<GzFile> Open(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": file not found"));
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", errno ? std::strerror(errno) : "out of memory"));
    }
    gzbuffer(f, 1 << 17);
    return GzFile(path, f);
  }
  GzFile(GzFile&& o) noexcept : path_(std::move(o.path_)), f_(std::exchange(o.f_, nullptr)) {}
  GzFile& operator=(GzFile&&) = delete;
  ~GzFile() {
    if (f_ != nullptr) gzclose(f_);
  }

  // Reads up to `n` bytes, fewer only at end of data. Errors for corrupt or
  // cut-off gzip streams.
  absl::StatusOr<size_t> Read(void* buf, size_t n) {
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(f_, static_cast<char*>(buf) + done, chunk);
      if (got < 0) return ZlibError();
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    // gzread may return a short count before reporting the error on the next call.
    int err = Z_OK;
    gzerror(f_, &err);
    if (err != Z_OK) return ZlibError();
    return done;
  }

  // Reads exactly `n` bytes of `what`, or says how many were missing.
  absl::Status ReadExactly(void* buf, size_t n, absl::string_view what) {
    PSTRAIN_ASSIGN_OR_RETURN(size_t got, Read(buf, n));
    if (got != n) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated: expected ", n, " bytes of ", what, ", got ", got));
    }
    return absl::OkStatus();
  }

  // Reads exactly `n` bytes of `what` into a vector. Memory grows with the data
  // actually present, so a corrupt header claiming billions of records fails as
  // truncated instead of allocating it all up front.
  absl::StatusOr<std::vector<unsigned char>> ReadBytes(size_t n, absl::string_view what) {
    constexpr size_t kChunk = size_t{1} << 22;
    std::vector<unsigned char> out;
    while (out.size() < n) {
      const size_t old = out.size();
      const size_t want = std::min(kChunk, n - old);
      out.resize(old + want);
      PSTRAIN_ASSIGN_OR_RETURN(size_t got, Read(out.data() + old, want));
      if (got != want) {
        return absl::DataLossError(
            absl::StrCat(path_, ": truncated: expected ", n, " bytes of ", what, ", got ", old + got));
      }
    }
    return out;
  }

  // Checks that no data follows; reading to the end also makes zlib verify the gzip CRC.
  absl::Status ExpectEnd() {
    char extra[64];
    PSTRAIN_ASSIGN_OR_RETURN(size_t got, Read(extra, sizeof(extra)));
    if (got != 0) return absl::DataLossError(absl::StrCat(path_, ": unexpected trailing data after the last record"));
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }

 private:
  GzFile(std::string path, gzFile f) : path_(std::move(path)), f_(f) {}

  absl::Status ZlibError() {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    if (err == Z_ERRNO) return absl::DataLossError(absl::StrCat(path_, ": read error: ", std::strerror(errno)));
    if (err == Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated gzip stream (", msg, ")"));
    }
    return absl::DataLossError(absl::StrCat(path_, ": corrupt gzip data (", msg, ")"));
  }

  std::string path_;
  gzFile f_;
};

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads `count` big-endian uint32 header fields.
absl::Status ReadHeader(GzFile& f, uint32_t* out, int count) {
  unsigned char raw[16];
  PSTRAIN_RETURN_IF_ERROR(f.ReadExactly(raw, 4 * count, "IDX header"));
  for (int i = 0; i < count; ++i) out[i] = BigEndian32(raw + 4 * i);
  return absl::OkStatus();
}

absl::Status CheckMagic(const GzFile& f, uint32_t got, uint32_t want, absl::string_view kind) {
  if (got == want) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(f.path(), ": bad magic number ", got, " (expected ", want, " for IDX ", kind,
                                          "; is this the right file, and is it IDX?)"));
}

// The .gz file, or the uncompressed one when only that exists.
std::string ResolvePath(const std::string& dir, absl::string_view stem) {
  const std::string gz = (std::filesystem::path(dir) / absl::StrCat(stem, ".gz")).string();
  const std::string plain = (std::filesystem::path(dir) / std::string(stem)).string();
  std::error_code ec;
  if (!std::filesystem::exists(gz, ec) && std::filesystem::exists(plain, ec)) return plain;
  return gz;
}

absl::Status ReadLabels(const std::string& path, std::vector<int32_t>* labels) {
  PSTRAIN_ASSIGN_OR_RETURN(GzFile f, GzFile::Open(path));
  uint32_t header[2];
  PSTRAIN_RETURN_IF_ERROR(ReadHeader(f, header, 2));
  PSTRAIN_RETURN_IF_ERROR(CheckMagic(f, header[0], kLabelsMagic, "labels (idx1-ubyte)"));
  const uint32_t n = header[1];
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<unsigned char> raw, f.ReadBytes(n, absl::StrCat(n, " labels")));
  PSTRAIN_RETURN_IF_ERROR(f.ExpectEnd());
  labels->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (raw[i] >= kNumClasses) {
      return absl::DataLossError(
          absl::StrCat(path, ": label ", int{raw[i]}, " of example ", i, " is outside [0, ", kNumClasses, ")"));
    }
    (*labels)[i] = raw[i];
  }
  return absl::OkStatus();
}

absl::Status ReadImages(const std::string& path, std::vector<float>* images, int64_t* count) {
  PSTRAIN_ASSIGN_OR_RETURN(GzFile f, GzFile::Open(path));
  uint32_t header[4];
  PSTRAIN_RETURN_IF_ERROR(ReadHeader(f, header, 4));
  PSTRAIN_RETURN_IF_ERROR(CheckMagic(f, header[0], kImagesMagic, "images (idx3-ubyte)"));
  const int64_t n = header[1], rows = header[2], cols = header[3];
  if (rows != kRows || cols != kCols) {
    return absl::DataLossError(absl::StrCat(path, ": images are ", rows, "x", cols, ", expected ", kRows, "x", kCols));
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<unsigned char> raw,
      f.ReadBytes(static_cast<size_t>(n * rows * cols), absl::StrCat(n, " images of ", rows, "x", cols)));
  PSTRAIN_RETURN_IF_ERROR(f.ExpectEnd());
  images->resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) (*images)[i] = raw[i] * (1.0f / 255.0f);
  *count = n;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, std::string_view split_arg) {
  // Debian's abseil is built with its own string_view, which StrCat needs.
  const absl::string_view split(split_arg.data(), split_arg.size());
  absl::string_view prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown Fashion-MNIST split '", split, "' (expected train or test)"));
  }
  const std::string images_path = ResolvePath(dir, absl::StrCat(prefix, "-images-idx3-ubyte"));
  const std::string labels_path = ResolvePath(dir, absl::StrCat(prefix, "-labels-idx1-ubyte"));

  Dataset data;
  data.example_shape = {1, kRows, kCols};
  data.num_classes = kNumClasses;
  // Labels first: the small file fails fast when the directory is wrong.
  PSTRAIN_RETURN_IF_ERROR(ReadLabels(labels_path, &data.labels));
  PSTRAIN_RETURN_IF_ERROR(ReadImages(images_path, &data.images, &data.num_examples));
  if (static_cast<int64_t>(data.labels.size()) != data.num_examples) {
    return absl::DataLossError(absl::StrCat("count mismatch: ", images_path, " holds ", data.num_examples,
                                            " images but ", labels_path, " holds ", data.labels.size(), " labels"));
  }
  return data;
}

}  // namespace pstrain

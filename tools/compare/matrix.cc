#include "tools/compare/matrix.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/config/byte_scale.h"
#include "common/config/config_loader.h"
#include "common/config/yaml_to_proto.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"

namespace pstrain::compare {
namespace {

namespace fs = std::filesystem;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// "<matrix>: [<variant>: ]field '<field>': expected <expected>[, got <got>]",
// the shape of the config loader's errors.
absl::Status FieldError(const std::string& matrix, const std::string& variant, const std::string& field,
                        const std::string& expected, const std::string& got = "") {
  return absl::InvalidArgumentError(absl::StrCat(matrix, ": ", variant.empty() ? "" : absl::StrCat(variant, ": "),
                                                 "field '", field, "': expected ", expected,
                                                 got.empty() ? "" : absl::StrCat(", got ", got)));
}

std::string Quoted(const std::string& text) { return absl::StrCat("'", text, "'"); }

// Sets `hosts` to `count` entries localhost:<first_port + i>.
void SetShorthandHosts(int count, int first_port, google::protobuf::RepeatedPtrField<std::string>* hosts) {
  hosts->Clear();
  for (int i = 0; i < count; ++i) *hosts->Add() = absl::StrCat("localhost:", first_port + i);
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

// A `ps: N` or `workers: N` shorthand of one variant.
struct Shorthand {
  bool given;
  int value;
  const char* key;          // "ps", "workers"
  int minimum;              // the smallest count allowed
  const char* hosts_field;  // the cluster's list it fills
  int hosts_in_set;         // entries the variant's `set` gives that list
  int first_port;
  google::protobuf::RepeatedPtrField<std::string>* hosts;
};

// Builds a Matrix from its spec, one step at a time (BuildMatrix calls them
// in order). Each step returns the first error: InvalidArgument naming the
// matrix file, the variant and the field.
class MatrixBuilder {
 public:
  MatrixBuilder(const ComparisonMatrix& spec, const std::string& path) : spec_(spec), path_(path) {
    matrix_.path = path;
  }

  // `name` (default: the file's stem) and `description`.
  absl::Status Name() {
    matrix_.name = fs::path(path_).stem().string();
    if (spec_.has_name()) {
      if (spec_.name().empty()) {
        return FieldError(path_, "", "name", "a non-empty name (default: the file's stem)", "''");
      }
      matrix_.name = spec_.name();
    }
    matrix_.description = spec_.description();
    if (!ByteScaleInRange(spec_.byte_scale())) {
      return FieldError(path_, "", "byte_scale", "a number in [1, 1000]", absl::StrCat(spec_.byte_scale()));
    }
    matrix_.byte_scale = spec_.byte_scale();
    return absl::OkStatus();
  }

  // The base config, read by the config library (either format) from `base`
  // resolved against the matrix's directory.
  absl::Status ReadBase() {
    if (spec_.base().empty()) {
      return FieldError(path_, "", "base",
                        "the path of the experiment config every variant starts from (relative to the matrix file)",
                        "nothing");
    }
    fs::path base_path(spec_.base());
    if (base_path.is_relative()) base_path = fs::path(path_).parent_path() / base_path;
    matrix_.base_path = base_path.lexically_normal().string();
    absl::StatusOr<ExperimentConfig> base = ReadExperimentConfig(matrix_.base_path);
    if (!base.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": field 'base': ", base.status().message()));
    }
    base_ = *std::move(base);
    return absl::OkStatus();
  }

  // Every variant in order, each checked (label, shorthands) before the next.
  absl::Status AddVariants() {
    if (spec_.variants().empty()) {
      return FieldError(path_, "", "variants",
                        "a non-empty list of variants, each a map with the keys label, set, workers, ps", "none");
    }
    for (int i = 0; i < spec_.variants_size(); ++i) PSTRAIN_RETURN_IF_ERROR(AddVariant(i));
    return absl::OkStatus();
  }

  // `baseline`, when given, must be one of the labels; else the first.
  // Every variant's own `baseline` too, each one of the labels.
  absl::Status FindBaseline() {
    if (spec_.has_baseline()) {
      PSTRAIN_ASSIGN_OR_RETURN(matrix_.baseline, IndexOfLabel(spec_.baseline(), "", "baseline"));
    }
    for (Variant& variant : matrix_.variants) {
      const ComparisonVariant& v = spec_.variants(variant.index);
      variant.baseline = matrix_.baseline;
      if (v.has_baseline()) {
        const std::string who = absl::StrCat("variant '", variant.label, "' (#", variant.index + 1, ")");
        PSTRAIN_ASSIGN_OR_RETURN(
            variant.baseline, IndexOfLabel(v.baseline(), who, absl::StrCat("variants[", variant.index, "].baseline")));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> IndexOfLabel(const std::string& label, const std::string& where, const std::string& field) {
    std::vector<std::string> quoted;
    for (const Variant& variant : matrix_.variants) {
      quoted.push_back(Quoted(variant.label));
      if (variant.label == label) return variant.index;
    }
    return FieldError(path_, where, field, absl::StrCat("one of the variant labels ", absl::StrJoin(quoted, ", ")),
                      Quoted(label));
  }

  Matrix Take() { return std::move(matrix_); }

 private:
  // Variant `i`: its label checked, its directory named, its config merged:
  // base <- name <- overrides <- set <- shorthands.
  absl::Status AddVariant(int i) {
    const ComparisonVariant& v = spec_.variants(i);
    const std::string field = absl::StrCat("variants[", i, "]");
    if (v.label().empty()) {
      return FieldError(path_, "", absl::StrCat(field, ".label"),
                        "a non-empty label (the variant's name in the table and the chart)", "nothing");
    }
    const std::string who = absl::StrCat("variant '", v.label(), "' (#", i + 1, ")");
    if (!labels_.insert(v.label()).second) {
      return FieldError(path_, who, absl::StrCat(field, ".label"), "a label no other variant has",
                        absl::StrCat(Quoted(v.label()), " again"));
    }
    Variant variant;
    variant.label = v.label();
    variant.index = i;
    const std::string slug = Slug(variant.label);
    const int width = std::max<int>(2, absl::StrCat(spec_.variants_size()).size());
    variant.dir_name = absl::StrFormat("%0*d-%s", width, i + 1, slug);
    variant.config = base_;
    variant.config.set_name(absl::StrCat(matrix_.name, "-", slug));
    if (spec_.has_overrides()) MergeConfig(spec_.overrides(), &variant.config);
    if (v.has_set()) MergeConfig(v.set(), &variant.config);
    PSTRAIN_RETURN_IF_ERROR(ApplyShorthands(v, field, who, variant.config));
    matrix_.variants.push_back(std::move(variant));
    return absl::OkStatus();
  }

  // `ps: N` and `workers: N`: N generated host entries, unless out of range
  // or the variant's `set` lists those hosts itself.
  absl::Status ApplyShorthands(const ComparisonVariant& v, const std::string& field, const std::string& who,
                               ExperimentConfig& config) {
    ClusterConfig* cluster = config.mutable_cluster();
    const ClusterConfig& set_cluster = v.set().cluster();
    for (const Shorthand& s :
         {Shorthand{v.has_ps(), v.ps(), "ps", 0, "ps_hosts", set_cluster.ps_hosts_size(), kPsShorthandPort,
                    cluster->mutable_ps_hosts()},
          Shorthand{v.has_workers(), v.workers(), "workers", 1, "worker_hosts", set_cluster.worker_hosts_size(),
                    kWorkerShorthandPort, cluster->mutable_worker_hosts()}}) {
      if (!s.given) continue;
      const std::string key = absl::StrCat(field, ".", s.key);
      if (s.value < s.minimum || s.value > kMaxShorthandCount) {
        return FieldError(path_, who, key, absl::StrCat("an integer in [", s.minimum, ", ", kMaxShorthandCount, "]"),
                          absl::StrCat(s.value));
      }
      if (s.hosts_in_set > 0) {
        return FieldError(
            path_, who, key,
            absl::StrCat("either '", s.key, ": N' or 'set: {cluster: {", s.hosts_field, ": [...]}}', not both"));
      }
      SetShorthandHosts(s.value, s.first_port, s.hosts);
    }
    return absl::OkStatus();
  }

  const ComparisonMatrix& spec_;
  const std::string path_;
  Matrix matrix_;
  ExperimentConfig base_;
  std::set<std::string> labels_;  // of the variants added so far
};

}  // namespace

std::string Slug(std::string_view label) {
  std::string slug;
  bool pending_dash = false;
  for (const char c : label) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      if (pending_dash && !slug.empty()) slug += '-';
      pending_dash = false;
      slug += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else {
      pending_dash = true;
    }
    if (slug.size() >= 40) break;
  }
  if (slug.size() > 40) slug.resize(40);
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "variant" : slug;
}

void MergeConfig(const Message& patch, Message* config) {
  const Reflection* reflection = patch.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(patch, &fields);
  // Singular messages merge recursively; every other field given in `patch`
  // is cleared in `config`, and the rest of `patch` (those fields only) is
  // then merged in, so scalars are set and lists replaced rather than
  // appended to.
  std::unique_ptr<Message> rest(patch.New());
  rest->CopyFrom(patch);
  for (const FieldDescriptor* field : fields) {
    if (!field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      MergeConfig(reflection->GetMessage(patch, field), reflection->MutableMessage(config, field));
      rest->GetReflection()->ClearField(rest.get(), field);
    } else {
      config->GetReflection()->ClearField(config, field);
    }
  }
  config->MergeFrom(*rest);
}

namespace {

// `spec` with only the variants whose label `only` matches and the
// baselines they name (the matrix's, or their own).
absl::Status KeepMatching(const std::string& path, const std::string& only, ComparisonMatrix* spec) {
  std::regex pattern;
  try {
    pattern = std::regex(only);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": --only '", only, "': ", e.what()));
  }
  std::set<std::string> keep;
  for (const ComparisonVariant& v : spec->variants()) {
    if (!std::regex_search(v.label(), pattern)) continue;
    keep.insert(v.label());
    keep.insert(v.has_baseline() ? v.baseline() : spec->has_baseline() ? spec->baseline() : spec->variants(0).label());
  }
  if (keep.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": --only '", only, "' matches no label"));
  google::protobuf::RepeatedPtrField<ComparisonVariant> kept;
  for (const ComparisonVariant& v : spec->variants()) {
    if (keep.count(v.label()) > 0) *kept.Add() = v;
  }
  spec->mutable_variants()->Swap(&kept);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Matrix> LoadMatrix(const std::string& path, const std::string& only) {
  ComparisonMatrix spec;
  PSTRAIN_RETURN_IF_ERROR(ReadConfigMessage(path, &spec));
  if (!only.empty() && spec.variants_size() > 0) PSTRAIN_RETURN_IF_ERROR(KeepMatching(path, only, &spec));
  return BuildMatrix(spec, path);
}

absl::StatusOr<Matrix> BuildMatrix(const ComparisonMatrix& spec, const std::string& path) {
  MatrixBuilder builder(spec, path);
  PSTRAIN_RETURN_IF_ERROR(builder.Name());
  PSTRAIN_RETURN_IF_ERROR(builder.ReadBase());
  PSTRAIN_RETURN_IF_ERROR(builder.AddVariants());
  PSTRAIN_RETURN_IF_ERROR(builder.FindBaseline());
  return builder.Take();
}

absl::Status PrepareVariants(Matrix& matrix, const std::string& out_dir) {
  // Write every config first, so a user can look at all of them even when one
  // is rejected.
  for (Variant& variant : matrix.variants) {
    const fs::path dir = fs::path(out_dir) / variant.dir_name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": cannot create directory: ", ec.message()));
    }
    variant.config_path = (dir / "config.yaml").string();
    // A label or path with a line break must not end the comment line.
    const auto comment = [](const std::string& text) { return absl::StrReplaceAll(text, {{"\n", " "}, {"\r", " "}}); };
    const std::string text =
        absl::StrCat("# Generated by pstrain-compare: variant '", comment(variant.label), "' of ", comment(matrix.path),
                     "\n# base: ", comment(matrix.base_path), "\n", MessageToYaml(variant.config));
    PSTRAIN_RETURN_IF_ERROR(WriteText(variant.config_path, text));
  }
  for (Variant& variant : matrix.variants) {
    const std::string who = absl::StrCat(matrix.path, ": variant '", variant.label, "' (#", variant.index + 1, "): ");
    absl::StatusOr<ExperimentConfig> config = ReadExperimentConfig(variant.config_path);
    if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat(who, config.status().message()));
    if (absl::Status status = ValidateExperimentConfig(*config, variant.config_path); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(who, status.message()));
    }
    variant.config = *std::move(config);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::compare

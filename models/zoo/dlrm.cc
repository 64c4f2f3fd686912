// Click-through-rate models over dense features and pooled embeddings.
//
// Both read ONE input per example, [1, 1, D + sum of the tables' dims]: the
// D dense features (model.input_shape is [1, 1, D], the dense part only,
// e.g. [1, 1, 13] for Criteo, log1p'd), then each table's pooled embedding
// (model.tables[t].dim floats, in model.tables order), which the worker
// pulls from the parameter servers and pools; it reads the model's gradient
// with respect to that input back to push the rows' gradients. Two classes
// (no click, click: p(click) = softmax[1]); at least one table.
//
// "dlrm" (Naumov et al. 2019, DLRM): every table has the same dim d.
//   dense_features = slice(input, 0, D) -> bottom MLP (dense + relu per
//   model.bottom_units, default [64, d]; the last is d) -> b [d]
//   embeddings = slice(input, D, T*d); interaction_inputs = concat(b,
//   embeddings) [(T+1)*d]; interaction = dot_interaction(T+1)
//   [(T+1)*T/2]; top_inputs = concat(b, interaction) -> top MLP (dense +
//   relu per model.top_units, default [64, 32]) -> logits (dense 2).
// "wide_deep" (Cheng et al. 2016, Wide & Deep): tables of any dims.
//   wide = dense(2) over the whole input (the linear part over the dense
//   features and the embeddings); deep = dense + relu per
//   model.hidden_units (default [64, 32]) over the whole input -> deep_logits
//   (dense 2); logits = add(wide, deep_logits).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/model.h"
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

std::string Where(const ModelConfig& config) { return absl::StrCat("model \"", config.name(), "\": "); }

// The checks both models share; returns D, the number of dense features.
absl::StatusOr<int64_t> DenseFeatures(const ModelConfig& config) {
  const auto& shape = config.input_shape();
  if (shape.size() != 3 || shape[0] != 1 || shape[1] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Where(config),
                                                   "model.input_shape must be [1, 1, D] (the D dense features), got [",
                                                   absl::StrJoin(shape, ", "), "]"));
  }
  if (config.num_classes() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(config), "model.num_classes must be 2 (no click, click), got ", config.num_classes()));
  }
  if (config.tables_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(config), "model.tables must list at least one embedding table (the sparse features)"));
  }
  for (int t = 0; t < config.tables_size(); ++t) {
    if (config.tables(t).dim() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(config), "model.tables[", t, "].dim must be positive, got ", config.tables(t).dim()));
    }
  }
  return shape[2];
}

// The units of `field` (model.<field>), `fallback` when it is empty; each > 0.
absl::StatusOr<std::vector<int64_t>> Units(const ModelConfig& config, const std::string& field,
                                           const google::protobuf::RepeatedField<int32_t>& units,
                                           std::vector<int64_t> fallback) {
  if (units.empty()) return fallback;
  for (int i = 0; i < units.size(); ++i) {
    if (units[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(config), "model.", field, "[", i, "] must be positive, got ", units[i]));
    }
  }
  return std::vector<int64_t>(units.begin(), units.end());
}

// dense + relu per entry of `units`, named "<prefix><i>" and "<prefix>_relu<i>"
// from 1, fed by `input`; returns the last relu (or `input` when none).
int Mlp(ModelBuilder& b, const std::string& prefix, int input, const std::vector<int64_t>& units) {
  int node = input;
  for (size_t i = 0; i < units.size(); ++i) {
    node = b.Add(absl::StrCat(prefix, i + 1), zoo::Dense(units[i]), {node});
    node = b.Then(absl::StrCat(prefix, "_relu", i + 1), LayerSpec{"relu"});
  }
  return node;
}

// Every table's dim, which dlrm needs equal; returns it.
absl::StatusOr<int64_t> CommonTableDim(const ModelConfig& config) {
  const int64_t dim = config.tables(0).dim();
  for (int t = 1; t < config.tables_size(); ++t) {
    if (config.tables(t).dim() != dim) {
      return absl::InvalidArgumentError(absl::StrCat(Where(config), "model.tables[", t, "].dim is ",
                                                     config.tables(t).dim(), " but model.tables[0].dim is ", dim,
                                                     ": dlrm's interaction needs every table to have the same dim"));
    }
  }
  return dim;
}

absl::StatusOr<std::unique_ptr<Model>> BuildDlrm(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t dense, DenseFeatures(config));
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t dim, CommonTableDim(config));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<int64_t> bottom,
                           Units(config, "bottom_units", config.bottom_units(), {64, dim}));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<int64_t> top, Units(config, "top_units", config.top_units(), {64, 32}));
  if (bottom.back() != dim) {
    return absl::InvalidArgumentError(absl::StrCat(Where(config),
                                                   "model.bottom_units' last entry must equal the "
                                                   "tables' dim ",
                                                   dim, " (the bottom MLP's output meets the embeddings), got ",
                                                   bottom.back()));
  }
  const int64_t tables = config.tables_size();
  const int64_t embedded = tables * dim;
  ModelBuilder b(config.name(), {1, 1, dense + embedded}, config.num_classes(), ctx);
  const int dense_in =
      b.Add("dense_features", LayerSpec{"slice"}.Int("begin", 0).Int("size", dense), {ModelBuilder::kInput});
  const int bottom_out = Mlp(b, "bottom", dense_in, bottom);
  const int embeddings =
      b.Add("embeddings", LayerSpec{"slice"}.Int("begin", dense).Int("size", embedded), {ModelBuilder::kInput});
  const int vectors = b.Add("interaction_inputs", LayerSpec{"concat"}, {bottom_out, embeddings});
  const int interaction = b.Add("interaction", LayerSpec{"dot_interaction"}.Int("features", tables + 1), {vectors});
  const int top_in = b.Add("top_inputs", LayerSpec{"concat"}, {bottom_out, interaction});
  const int top_out = Mlp(b, "top", top_in, top);
  return b.Finish(b.Add("logits", zoo::Dense(config.num_classes()), {top_out}));
}

absl::StatusOr<std::unique_ptr<Model>> BuildWideDeep(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t dense, DenseFeatures(config));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<int64_t> hidden,
                           Units(config, "hidden_units", config.hidden_units(), {64, 32}));
  int64_t embedded = 0;
  for (const EmbeddingTableConfig& t : config.tables()) embedded += t.dim();
  ModelBuilder b(config.name(), {1, 1, dense + embedded}, config.num_classes(), ctx);
  const int wide = b.Add("wide", zoo::Dense(config.num_classes()), {ModelBuilder::kInput});
  const int deep_out = Mlp(b, "deep", ModelBuilder::kInput, hidden);
  const int deep = b.Add("deep_logits", zoo::Dense(config.num_classes()), {deep_out});
  return b.Finish(b.Add("logits", LayerSpec{"add"}, {wide, deep}));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("dlrm", BuildDlrm) && RegisterModel("wide_deep", BuildWideDeep);

}  // namespace
}  // namespace pstrain

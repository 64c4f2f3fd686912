// Shared by the equivalence tests (a distributed run must reach the
// parameters of one device with the whole global batch): the small MLP
// experiments they train (an MLP, a DLRM with embedding tables), and how
// far apart two parameter sets are.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {

// An MLP (32, 16) on Fashion-MNIST, momentum SGD, 6 synchronous steps,
// no warm-up and no evaluation; the cluster is left to the test.
inline ExperimentConfig EquivalenceConfig(const std::string& name) {
  ExperimentConfig config;
  config.set_name(name);
  config.mutable_model()->set_name("mlp");
  config.mutable_model()->add_hidden_units(32);
  config.mutable_model()->add_hidden_units(16);
  config.mutable_data()->set_source("fashion_mnist");
  config.mutable_optimizer()->set_name("momentum");
  config.mutable_optimizer()->set_learning_rate(0.05f);
  config.mutable_train()->set_steps(6);
  config.mutable_train()->set_warmup_steps(0);
  config.mutable_train()->set_evaluate(false);
  config.set_consistency("sync");
  config.set_placement("greedy");
  return config;
}

// DLRM (bottom MLP 8-4, top 8) on synthetic click logs with 3 small
// fixed-size tables of dim 4 (every row touched many times), each with its
// own `table_optimizer` ("adagrad", "ftrl", ...), 12 synchronous steps; the
// cluster is left to the test.
inline ExperimentConfig DlrmEquivalenceConfig(const std::string& table_optimizer) {
  ExperimentConfig config = EquivalenceConfig(absl::StrCat("sparse_equivalence_", table_optimizer));
  ModelConfig* model = config.mutable_model();
  model->Clear();
  model->set_name("dlrm");
  model->add_bottom_units(8);
  model->add_bottom_units(4);
  model->add_top_units(8);
  for (int t = 0; t < 3; ++t) {
    EmbeddingTableConfig* table = model->add_tables();
    table->set_name(absl::StrCat("C", t + 1));
    table->set_dim(4);
    table->set_cardinality(30 + 10 * t);
    table->set_init_scale(0.1f);
    table->mutable_optimizer()->set_name(table_optimizer);
    table->mutable_optimizer()->set_learning_rate(0.1f);
    if (table_optimizer == "ftrl") {
      table->mutable_optimizer()->set_l1(0.001f);
      table->mutable_optimizer()->set_l2(0.01f);
    }
  }
  DataConfig* data = config.mutable_data();
  data->set_source("synthetic_ctr");
  CtrDataConfig* ctr = data->mutable_ctr();
  ctr->set_train_examples(4096);
  ctr->set_test_examples(512);
  // Features the model has no table for hold one id: no signal the model
  // misses (the planted AUC stays within its reach).
  for (int f = 0; f < 26; ++f) ctr->add_cardinalities(f < 3 ? 30 + 10 * f : 1);
  config.mutable_optimizer()->set_name("adagrad");
  config.mutable_optimizer()->set_learning_rate(0.05f);
  config.mutable_train()->set_steps(12);
  return config;
}

// `base` run on one device (one worker, one PS shard, in process) with the
// whole global batch: what every distributed run is compared with.
inline absl::StatusOr<ClusterRun> RunOnOneDevice(ExperimentConfig base, int global_batch) {
  SetInProcessHosts(&base, /*num_ps=*/1, 1);
  base.set_devices_per_worker(1);
  base.mutable_train()->set_batch_size_per_device(global_batch);
  return RunInProcessCluster(base);
}

// Largest |a-b| / (1 + |b|) over all parameters; sizes must agree.
inline double MaxRelativeDifference(const std::vector<std::vector<float>>& a,
                                    const std::vector<std::vector<float>>& b) {
  double worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t v = 0; v < a.size() && v < b.size(); ++v) {
    EXPECT_EQ(a[v].size(), b[v].size());
    for (size_t i = 0; i < a[v].size() && i < b[v].size(); ++i) {
      worst = std::max(worst, std::abs(double(a[v][i]) - b[v][i]) / (1.0 + std::abs(double(b[v][i]))));
    }
  }
  return worst;
}

}  // namespace pstrain

// SupervisedTrainer on the GPU (skips without one), with a linear model over the flattened window
// (linear_window_model.h): the loss falls; a resident epoch keeps its transfer contract under the
// in-process audit (0 bulk D2H, 0 H2D, <= 2 scalar D2H, <= 2 syncs) and a host-fed one shows its
// per-step transfers; host-fed and resident give the same loss curve (1e-6 relative; the same
// kernels on the same windows in the same order, so equal bits are expected) and the same
// parameters; early stopping stops after `patience` worse epochs and restores the best
// parameters; 4 epochs straight equal 2 + save + a new trainer + load + 2 bit for bit; a
// checkpoint of another model, shape or dataset is refused naming the field and changes nothing;
// a non-finite loss names the epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "kernels/core/error.h"
#include "lib/core/stream.h"
#include "lib/data/series_dataset.h"
#include "lib/models/supervised_trainer.h"
#include "tests/models/trainer/linear_window_model.h"
#include "tests/support/gpu.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::models;

SupervisedTrainerConfig small_config() {
  SupervisedTrainerConfig c;
  c.batch = 32;
  c.epochs = 6;
  c.patience = 3;
  c.adamw.lr = 3e-3;
  c.max_grad_norm = 1.0f;
  c.seed = 11;
  c.validation_fraction = 0.25;
  c.window = 16;
  c.horizon = 2;
  return c;
}

data::HostSeries synthetic(std::size_t steps = 3000, std::uint64_t seed = 5) {
  data::SyntheticSeriesConfig s;
  s.seed = seed;
  s.steps = steps;
  s.features = 4;
  return data::make_synthetic_series(s);
}

struct Fixture {
  explicit Fixture(const SupervisedTrainerConfig& c, data::HostSeries series = synthetic())
      : config(c), dataset(std::move(series), window_spec(c), stream.get()) {}
  std::unique_ptr<SupervisedTrainer> trainer(TrainerPipeline pipeline = TrainerPipeline::Resident,
                                             const std::string& name = "test-linear") {
    SupervisedTrainerConfig c = config;
    c.pipeline = pipeline;
    return std::make_unique<SupervisedTrainer>(
        c, dataset, test::make_linear_window_model(model_shape_for(c, dataset), c.seed, name));
  }
  SupervisedTrainerConfig config;
  Stream stream;
  data::SeriesDataset dataset;
};

std::vector<float> download(const SupervisedTrainer& t, nn::SlabPart part) {
  return t.model().slab().download(part, t.context().stream());
}

std::vector<float> download_best(const SupervisedTrainer& t) {
  std::vector<float> host(t.model().slab().total_elements());
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), t.best_params(), host.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost));
  return host;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SupervisedTrainer, LossFalls) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  auto trainer = setup.trainer();
  ASSERT_EQ(trainer->steps_per_epoch(), setup.dataset.split().train_windows / 32);
  std::vector<EpochResult> results;
  for (int e = 0; e < 6; ++e) results.push_back(trainer->train_epoch());
  for (const EpochResult& r : results)
    std::printf("epoch %zu: train %.5f validation %.5f %s %.0f windows/s\n", r.epoch, r.train_loss,
                r.validation_loss, r.improved ? "(best)" : "", r.windows_per_second);
  EXPECT_LT(results.back().train_loss, 0.7 * results.front().train_loss);
  EXPECT_LT(trainer->best_validation_loss(), results.front().validation_loss);
  EXPECT_LT(trainer->best_validation_loss(), 0.8);  // normalized target: predicting 0 gives ~1
  EXPECT_EQ(trainer->epochs_done(), 6u);
  EXPECT_TRUE(results.back().stop);  // config.epochs reached
}

TEST(SupervisedTrainer, ResidentEpochKeepsItsContract) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  auto trainer = setup.trainer();
  trainer->train_epoch();  // warm-up (lazy module loading, cuBLAS)
  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("supervised/epoch");
    for (int e = 0; e < 3; ++e) trainer->train_epoch();
  }
  const audit::AuditReport report = tracer.snapshot();
  RESIDENT_EXPECT_WITHIN_CONTRACT(
      report, (std::vector<audit::TransferContract>{
                  {.phase = "supervised/epoch",
                   .max_d2h_scalar = 3 * SupervisedEpochContract::max_d2h_scalar,
                   .max_d2h_bulk = SupervisedEpochContract::max_d2h_bulk,
                   .max_h2d = SupervisedEpochContract::max_h2d,
                   .max_syncs = 3 * SupervisedEpochContract::max_syncs}}));
  // The contract can fail: a checkpoint inside the phase breaks it.
  tracer.reset();
  const test::TempDir dir("supervised_contract");
  {
    const audit::Phase phase("supervised/epoch");
    trainer->train_epoch();
    trainer->save_checkpoint(dir / "c.ckpt");
  }
  const auto violations = audit::check_contracts(
      tracer.snapshot(), {{.phase = "supervised/epoch", .max_d2h_scalar = 2, .max_d2h_bulk = 0,
                           .max_h2d = 0, .max_syncs = 2}});
  EXPECT_FALSE(violations.empty()) << "the checkpoint's downloads were not seen";
  tracer.stop();
}

TEST(SupervisedTrainer, HostFedEpochShowsItsTransfers) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  auto trainer = setup.trainer(TrainerPipeline::HostFed);
  trainer->train_epoch();
  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("supervised_host_fed/epoch");
    trainer->train_epoch();
  }
  const audit::AuditReport report = tracer.snapshot();
  tracer.stop();
  const std::size_t steps = trainer->steps_per_epoch(), batches = trainer->validation_batches();
  for (const audit::PhaseReport& p : report.phases)
    if (p.phase == "supervised_host_fed/epoch") {
      std::printf("host-fed epoch: %llu H2D, %llu scalar D2H, %llu syncs (%zu steps, %zu "
                  "validation batches)\n",
                  static_cast<unsigned long long>(p.counters.h2d),
                  static_cast<unsigned long long>(p.counters.d2h_scalar),
                  static_cast<unsigned long long>(p.counters.syncs()), steps, batches);
      EXPECT_EQ(p.counters.h2d, 2 * (steps + batches));         // x and y per batch
      EXPECT_EQ(p.counters.d2h_scalar, steps + batches);        // the loss per batch
      EXPECT_GE(p.counters.syncs(), steps + batches);
      return;
    }
  FAIL() << "the host-fed phase was not recorded";
}

TEST(SupervisedTrainer, HostFedAndResidentGiveTheSameLossCurve) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  auto resident = setup.trainer(TrainerPipeline::Resident);
  auto host_fed = setup.trainer(TrainerPipeline::HostFed);
  constexpr double kRtol = 1e-6;
  double worst = 0.0;
  for (int e = 0; e < 3; ++e) {
    const EpochResult r = resident->train_epoch(), h = host_fed->train_epoch();
    const double train = std::fabs(r.train_loss - h.train_loss) / std::fabs(h.train_loss);
    const double validation =
        std::fabs(r.validation_loss - h.validation_loss) / std::fabs(h.validation_loss);
    worst = std::max({worst, train, validation});
    std::printf("epoch %zu: train %.9g vs %.9g, validation %.9g vs %.9g (host-fed %.0f, resident "
                "%.0f windows/s)\n",
                r.epoch, r.train_loss, h.train_loss, r.validation_loss, h.validation_loss,
                h.windows_per_second, r.windows_per_second);
    EXPECT_LE(train, kRtol) << "epoch " << r.epoch;
    EXPECT_LE(validation, kRtol) << "epoch " << r.epoch;
  }
  std::printf("largest relative difference %.3g (%.3g of the tolerance %.0e)\n", worst,
              worst / kRtol, kRtol);
  EXPECT_TRUE(same_bits(download(*resident, nn::SlabPart::Params),
                        download(*host_fed, nn::SlabPart::Params)))
      << "the two pipelines' parameters differ after 3 epochs";
}

// Training rows: target_t = x_{t-1}; validation rows: target_t = -x_{t-1}. Learning the training
// relation makes the validation loss worse every epoch after the first.
data::HostSeries flipped_series(std::size_t steps, std::size_t train_rows) {
  data::HostSeries s;
  s.steps = steps;
  s.columns = 2;
  s.column_names = {"x", "target"};
  s.input_columns = 2;
  s.target_columns = {1};
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x(steps);
  for (double& v : x) v = normal(rng);
  for (std::size_t t = 0; t < steps; ++t) {
    const double sign = t < train_rows ? 1.0 : -1.0;
    s.values.push_back(static_cast<float>(x[t]));
    s.values.push_back(static_cast<float>(t == 0 ? 0.0 : sign * x[t - 1] + 0.05 * normal(rng)));
  }
  return s;
}

TEST(SupervisedTrainer, EarlyStoppingStopsAndRestoresTheBestParameters) {
  RESIDENT_REQUIRE_GPU();
  SupervisedTrainerConfig c = small_config();
  c.window = 4;
  c.horizon = 1;
  c.patience = 2;
  c.epochs = 50;
  c.validation_fraction = 0.5;
  c.adamw.lr = 1e-2;
  Fixture setup(c, flipped_series(2000, 1000));
  auto trainer = setup.trainer();
  std::vector<float> after_first;
  std::vector<EpochResult> results = trainer->fit([&](const EpochResult& r) {
    std::printf("epoch %zu: train %.5f validation %.5f%s\n", r.epoch, r.train_loss,
                r.validation_loss, r.improved ? " (best)" : "");
    if (r.epoch == 1) after_first = download(*trainer, nn::SlabPart::Params);
  });
  ASSERT_EQ(results.size(), 3u) << "expected the best epoch, then patience 2 worse ones";
  EXPECT_TRUE(results[0].improved);
  EXPECT_FALSE(results[1].improved);
  EXPECT_FALSE(results[2].improved);
  EXPECT_TRUE(results[2].stop);
  EXPECT_TRUE(trainer->stopped());
  EXPECT_EQ(trainer->best_epoch(), 1u);
  EXPECT_EQ(trainer->best_validation_loss(), results[0].validation_loss);
  EXPECT_TRUE(same_bits(download(*trainer, nn::SlabPart::Params), after_first))
      << "fit() did not restore the best epoch's parameters";
  EXPECT_TRUE(same_bits(download_best(*trainer), after_first));
}

TEST(SupervisedTrainer, ResumeIsBitIdentical) {
  RESIDENT_REQUIRE_GPU();
  for (const TrainerPipeline pipeline : {TrainerPipeline::Resident, TrainerPipeline::HostFed}) {
    Fixture setup(small_config());
    const test::TempDir dir("supervised_resume");
    auto straight = setup.trainer(pipeline);
    std::vector<EpochResult> a;
    for (int e = 0; e < 4; ++e) a.push_back(straight->train_epoch());

    auto first = setup.trainer(pipeline);
    std::vector<EpochResult> b;
    for (int e = 0; e < 2; ++e) b.push_back(first->train_epoch());
    first->save_checkpoint(dir / "t.ckpt");
    first.reset();
    auto resumed = setup.trainer(pipeline);
    resumed->load_checkpoint(dir / "t.ckpt");
    EXPECT_EQ(resumed->epochs_done(), 2u);
    for (int e = 0; e < 2; ++e) b.push_back(resumed->train_epoch());

    const char* name = pipeline_name(pipeline);
    for (std::size_t e = 0; e < 4; ++e) {
      EXPECT_EQ(a[e].train_loss, b[e].train_loss) << name << " epoch " << e + 1;
      EXPECT_EQ(a[e].validation_loss, b[e].validation_loss) << name << " epoch " << e + 1;
      EXPECT_EQ(a[e].improved, b[e].improved) << name << " epoch " << e + 1;
    }
    for (const nn::SlabPart part : {nn::SlabPart::Params, nn::SlabPart::AdamM, nn::SlabPart::AdamV})
      EXPECT_TRUE(same_bits(download(*straight, part), download(*resumed, part)))
          << name << ": slab part " << static_cast<int>(part) << " differs";
    EXPECT_TRUE(same_bits(download_best(*straight), download_best(*resumed))) << name;
    EXPECT_EQ(straight->model().slab().read_step(straight->context().stream()),
              resumed->model().slab().read_step(resumed->context().stream()));
    EXPECT_EQ(straight->best_validation_loss(), resumed->best_validation_loss());
    EXPECT_EQ(straight->patience_left(), resumed->patience_left());
  }
}

TEST(SupervisedTrainer, ACheckpointOfAnotherModelOrShapeIsRefusedAndChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  const test::TempDir dir("supervised_mismatch");
  auto writer = setup.trainer();
  writer->train_epoch();
  writer->save_checkpoint(dir / "t.ckpt");

  const auto expect_refused = [&](SupervisedTrainer& t, const std::string& field) {
    const std::vector<float> before = download(t, nn::SlabPart::Params);
    try {
      t.load_checkpoint(dir / "t.ckpt");
      ADD_FAILURE() << "a checkpoint differing in " << field << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.error_name(), "checkpoint mismatch") << e.what();
      EXPECT_NE(std::string(e.what()).find(field + ": the checkpoint holds"), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(same_bits(download(t, nn::SlabPart::Params), before)) << field;
    EXPECT_EQ(t.epochs_done(), 0u);
  };
  auto other_name = setup.trainer(TrainerPipeline::Resident, "test-linear-b");
  expect_refused(*other_name, "model");
  SupervisedTrainerConfig longer = small_config();
  longer.window = 24;
  Fixture other_shape(longer);
  auto other_window = other_shape.trainer();
  expect_refused(*other_window, "describe()");  // the first field that differs
  SupervisedTrainerConfig more = small_config();
  more.horizon = 3;
  Fixture other_horizon(more);
  auto other_outputs = other_horizon.trainer();
  expect_refused(*other_outputs, "describe()");

  // Corrupt files change nothing either.
  auto reader = setup.trainer();
  const std::vector<float> before = download(*reader, nn::SlabPart::Params);
  std::filesystem::resize_file(dir / "t.ckpt", std::filesystem::file_size(dir / "t.ckpt") - 8);
  EXPECT_THROW(reader->load_checkpoint(dir / "t.ckpt"), Error);
  EXPECT_TRUE(same_bits(download(*reader, nn::SlabPart::Params), before));
}

TEST(SupervisedTrainer, NonFiniteLossNamesTheEpoch) {
  RESIDENT_REQUIRE_GPU();
  SupervisedTrainerConfig c = small_config();
  c.adamw.lr = 1e30;
  c.max_grad_norm = std::numeric_limits<float>::infinity();
  Fixture setup(c);
  auto trainer = setup.trainer();
  try {
    for (int e = 0; e < 3; ++e) trainer->train_epoch();
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "non-finite loss");
    EXPECT_NE(std::string(e.what()).find("epoch 1"), std::string::npos) << e.what();
  }
}

TEST(SupervisedTrainer, InvalidSetupsAreNamed) {
  RESIDENT_REQUIRE_GPU();
  Fixture setup(small_config());
  SupervisedTrainerConfig c = small_config();
  c.window = 8;  // the dataset was built for 16
  try {
    SupervisedTrainer t(c, setup.dataset,
                        test::make_linear_window_model(model_shape_for(c, setup.dataset), 1));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "dataset mismatch") << e.what();
  }
  c = small_config();
  ModelShape shape = model_shape_for(c, setup.dataset);
  shape.outputs += 1;
  try {
    SupervisedTrainer t(c, setup.dataset, test::make_linear_window_model(shape, 1));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape().outputs = 3, the dataset and config need 2"),
              std::string::npos)
        << e.what();
  }
  c.batch = setup.dataset.split().train_windows + 1;
  try {
    SupervisedTrainer t(c, setup.dataset,
                        test::make_linear_window_model(model_shape_for(c, setup.dataset), 1));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch = " + std::to_string(c.batch)), std::string::npos)
        << e.what();
  }
}

}  // namespace

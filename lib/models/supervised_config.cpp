#include "lib/models/supervised_config.h"

#include <cmath>
#include <sstream>
#include <string>

#include "kernels/core/error.h"

namespace resident::models {

namespace {

template <class T>
std::string text(T value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

template <class T>
void check(std::string& problems, bool ok, const char* field, T value, const char* allowed) {
  if (ok) return;
  if (!problems.empty()) problems += "; ";
  problems += std::string(field) + " = " + text(value) + ", allowed " + allowed;
}

}  // namespace

void validate(const SupervisedTrainerConfig& c) {
  std::string p;
  check(p, c.batch >= 1 && c.batch <= 65536, "batch", c.batch, "[1, 65536]");
  check(p, c.epochs >= 1 && c.epochs <= 1000000, "epochs", c.epochs, "[1, 1000000]");
  check(p, c.patience >= 1 && c.patience <= 1000000, "patience", c.patience, "[1, 1000000]");
  check(p, std::isfinite(c.adamw.lr) && c.adamw.lr >= 0.0, "adamw.lr", c.adamw.lr,
        "[0, inf), finite");
  check(p, c.adamw.beta1 >= 0.0 && c.adamw.beta1 < 1.0, "adamw.beta1", c.adamw.beta1, "[0, 1)");
  check(p, c.adamw.beta2 >= 0.0 && c.adamw.beta2 < 1.0, "adamw.beta2", c.adamw.beta2, "[0, 1)");
  check(p, std::isfinite(c.adamw.eps) && c.adamw.eps > 0.0, "adamw.eps", c.adamw.eps,
        "(0, inf), finite");
  check(p, std::isfinite(c.adamw.weight_decay) && c.adamw.weight_decay >= 0.0,
        "adamw.weight_decay", c.adamw.weight_decay, "[0, inf), finite");
  check(p, c.adamw.steps_per_group >= 1, "adamw.steps_per_group", c.adamw.steps_per_group, ">= 1");
  check(p, c.adamw.total_groups >= 1, "adamw.total_groups", c.adamw.total_groups, ">= 1");
  check(p, c.max_grad_norm > 0.0f, "max_grad_norm", c.max_grad_norm, "(0, inf] (inf: no clip)");
  check(p, std::isfinite(c.validation_fraction) && c.validation_fraction > 0.0 &&
               c.validation_fraction < 1.0,
        "validation_fraction", c.validation_fraction, "(0, 1)");
  check(p, c.window >= 1 && c.window <= 65536, "window", c.window, "[1, 65536]");
  check(p, c.horizon >= 1 && c.horizon <= 4096, "horizon", c.horizon, "[1, 4096]");
  check(p, std::isfinite(c.normalization_epsilon) && c.normalization_epsilon > 0.0,
        "normalization_epsilon", c.normalization_epsilon, "(0, inf), finite");
  check(p, std::isfinite(c.trend_threshold), "trend_threshold", c.trend_threshold,
        "finite (< 0: balanced classes on the training split)");
  if (!p.empty())
    throw Error("validate(SupervisedTrainerConfig)", "invalid SupervisedTrainerConfig", p,
                __FILE__, __LINE__);
}

data::WindowSpec window_spec(const SupervisedTrainerConfig& c) {
  data::WindowSpec spec;
  spec.window = c.window;
  spec.horizon = c.horizon;
  spec.validation_fraction = c.validation_fraction;
  spec.epsilon = c.normalization_epsilon;
  return spec;
}

const char* pipeline_name(TrainerPipeline pipeline) noexcept {
  return pipeline == TrainerPipeline::Resident ? "resident" : "host-fed";
}

}  // namespace resident::models

#include "lib/models/mamba2/mamba2_pipeline.h"

namespace resident::models::mamba2 {

namespace {

// Hands out 64-float (256-byte) aligned pieces of one arena; with base == nullptr it only counts.
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  float* take(std::size_t floats) {
    float* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += (floats + 63) / 64 * 64;
    return p;
  }
  std::size_t used() const { return used_; }

 private:
  float* base_;
  std::size_t used_ = 0;
};

}  // namespace

std::size_t layout_buffers(const Mamba2Dims& d, std::size_t conv_scratch_floats, float* base,
                           Buffers* out) {
  Carver c(base);
  const auto rows = static_cast<std::size_t>(d.max_batch) * static_cast<std::size_t>(d.L);
  const auto nb = static_cast<std::size_t>(km::norm_blocks(static_cast<int>(rows)));
  const auto B = static_cast<std::size_t>(d.max_batch);
  const auto D = static_cast<std::size_t>(d.D), di = static_cast<std::size_t>(d.di),
             W = static_cast<std::size_t>(d.W), C = static_cast<std::size_t>(d.C),
             H = static_cast<std::size_t>(d.H), P = static_cast<std::size_t>(d.P),
             N = static_cast<std::size_t>(d.N), O = static_cast<std::size_t>(d.O);
  const auto chunks = static_cast<std::size_t>(d.chunks());
  Buffers b;
  for (int l = 0; l < d.layers; ++l) {
    LayerBuffers lb{};
    lb.h = c.take(rows * D);
    lb.u = c.take(rows * D);
    lb.rstd = c.take(rows);
    lb.proj = c.take(rows * W);
    lb.xbc = c.take(rows * C);
    lb.y = c.take(rows * di);
    lb.yn = c.take(rows * di);
    lb.rstd_g = c.take(rows);
    lb.states = chunks > 1 ? c.take(B * H * (chunks - 1) * P * N) : nullptr;
    lb.part_norm = c.take(nb * D);
    lb.part_gnorm = c.take(nb * di);
    lb.part_ssd = c.take(3 * B * H);
    b.layers.push_back(lb);
  }
  b.out = c.take(rows * D);
  b.h_last = c.take(B * D);
  b.rstd_f = c.take(B);
  b.dh = c.take(rows * D);
  b.dyn = c.take(rows * di);
  b.dy = c.take(rows * di);
  b.dproj = c.take(rows * W);
  b.dxbc = c.take(rows * C);
  b.dbc_heads = c.take(H * rows * 2 * N);
  b.du = c.take(rows * D);
  b.conv_scratch = c.take(conv_scratch_floats);
  b.conv_scratch_floats = conv_scratch_floats;
  b.part_head_w = c.take(B * O * D);
  b.part_head_b = c.take(B * O);
  b.part_norm_f = c.take(B * D);
  b.part_embed_b = c.take(nb * D);
  if (out != nullptr) *out = std::move(b);
  return c.used();
}

}  // namespace resident::models::mamba2

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_draw.h"
#include "kernels/models/diffusion/diffusion_random.cuh"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 64;

// Block b: thread 0 draws t_b and the row's eps and x_t (in draw order), then every thread writes
// its share of the sinusoid.
__global__ void __launch_bounds__(kThreads)
    diffusion_draw(int* __restrict__ t, float* __restrict__ eps, float* __restrict__ x_t,
                   float* __restrict__ sinusoid, const float* __restrict__ y,
                   const float* __restrict__ sqrt_ab, const float* __restrict__ sqrt_1m_ab,
                   PhiloxKey key, const std::uint64_t* __restrict__ step, int outputs, int steps,
                   int time_dim) {
  __shared__ int row_t;
  const int b = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) {
    const PhiloxKey k{key.seed, *step * draw_stride(static_cast<std::size_t>(outputs))};
    curandStatePhilox4_32_10_t state = philox_state(k, static_cast<unsigned long long>(b));
    const int tb = timestep_from_bits(curand(&state), steps);
    const float sa = sqrt_ab[tb], s1 = sqrt_1m_ab[tb];
    for (int o = 0; o < outputs; ++o) {
      const unsigned d1 = curand(&state);
      const unsigned d2 = curand(&state);
      const float e = normal_from_bits(d1, d2);
      const std::size_t i = static_cast<std::size_t>(b) * outputs + o;
      eps[i] = e;
      x_t[i] = sa * y[i] + s1 * e;
    }
    t[b] = tb;
    row_t = tb;
  }
  __syncthreads();
  const int tb = row_t;
  for (int c = static_cast<int>(threadIdx.x); c < time_dim; c += kThreads)
    sinusoid[static_cast<std::size_t>(b) * time_dim + c] = time_sinusoid(tb, c, time_dim);
}

}  // namespace

void launch_diffusion_draw(int* t, float* eps, float* x_t, float* sinusoid, const float* y,
                           const float* sqrt_alpha_bar, const float* sqrt_one_minus_alpha_bar,
                           PhiloxKey key, const std::uint64_t* step, std::size_t batch,
                           std::size_t outputs, std::size_t steps, std::size_t time_dim,
                           cudaStream_t stream) {
  const NvtxRange range("diffusion/draw");
  if (batch == 0) return;
  diffusion_draw<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(
      t, eps, x_t, sinusoid, y, sqrt_alpha_bar, sqrt_one_minus_alpha_bar, key, step,
      static_cast<int>(outputs), static_cast<int>(steps), static_cast<int>(time_dim));
  RESIDENT_CHECK_LAUNCH("diffusion_draw");
}

}  // namespace resident::kernels::diffusion

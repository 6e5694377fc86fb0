// XlstmConfig: the configuration of the xLSTM supervised model (xlstm_model.h, MODELS.md section
// 2), its validation (a host function that needs no GPU), its tensors and their initial values.
// The defaults are the small reference configuration: D = 64, NH = 4, Di = 128 (2 D rounded up
// to a multiple of 64), DH = 32, 4 blocks, the sLSTM at block 1, FFN width 128 (1.3 D rounded up
// to a multiple of 64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

// Dynamic shared memory a block may opt into on sm_90 (H100, H200): the mLSTM cell keeps a whole
// window per (sample, head) in shared memory, which bounds L * DH.
inline constexpr std::size_t kXlstmMaxCellSharedBytes = 227 * 1024;

struct XlstmConfig {
  std::size_t d_model = 64;    // D, a multiple of heads, [1, 4096]
  std::size_t heads = 4;       // NH, [1, 64]
  std::size_t blocks = 4;      // [1, 64]
  long slstm_at = 1;           // the sLSTM block's index, [-1, blocks) (-1: mLSTM blocks only)
  std::size_t conv_kernel = 4; // K, [1, 8]
  float cell_eps = 1e-6f;      // the mLSTM cell's eps, >= 0

  std::size_t inner() const { return (2 * d_model + 63) / 64 * 64; }          // Di
  std::size_t ffn() const { return ((13 * d_model + 9) / 10 + 63) / 64 * 64; }  // Dff
  std::size_t mlstm_head_dim() const { return inner() / heads; }
  std::size_t slstm_head_dim() const { return d_model / heads; }
};

// Throws resident::Error naming the field, its value and the allowed range when `config` or
// `shape` is out of range (shape fields >= 1; window * max_batch within int; the mLSTM cell's
// shared memory within kXlstmMaxCellSharedBytes; the sLSTM head dim D / NH within 32; Di a
// multiple of heads).
void validate_xlstm_config(const XlstmConfig& config, const ModelShape& shape);

// "xlstm D=64 NH=4 Di=128 blocks 4 (sLSTM at 1) FFN 128".
std::string describe_xlstm(const XlstmConfig& config);

// The slab tensors in slab order (tests/reference/xlstm_reference.h lists the same names and
// shapes); weight decay on the projection and recurrent weights, not on biases, norm weights,
// skip or the conv.
struct XlstmTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay = false;
};
std::vector<XlstmTensorSpec> xlstm_tensor_specs(const XlstmConfig& config,
                                                const ModelShape& shape);

// Initial values (NX-AI/xlstm's init), made on the host in double from one std::mt19937_64 seeded
// with `seed`, in the order of xlstm_tensor_specs:
//   embed, readout: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch.nn.Linear's default)
//   up, q, k, v, sLSTM w, ffn_up: N(0, sqrt(2 / (5 D)))      (small init)
//   down, ffn_down: N(0, 2 / (blocks sqrt(D)))               (wang init)
//   conv weight and bias: U(-1/sqrt(K), 1/sqrt(K))
//   mLSTM gates: weight 0, input-gate bias N(0, 0.1), forget-gate bias linspace(3, 6, NH)
//   sLSTM: r 0; bias: i, z, o 0, f per head unit j: 5 - 12 (j / (DHs - 1))^(0.3 + 1.3 ratio)
//     with ratio = block / (blocks - 1) (0 for one block)
//   norm weights, skip: 1
std::vector<std::vector<float>> xlstm_initial_values(const XlstmConfig& config,
                                                     const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models

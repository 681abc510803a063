// The problems the CUDA attention benchmark (tests/bench_attn_cuda.cpp) and its PyTorch peers
// (harness/python/bench/attn_peers.py, which reads them from the benchmark's JSON) are timed on,
// and the FLOP count their TFLOPS are computed from.
//
// FlashAttention-3 paper's setting (Shah et al. 2024, arXiv 2407.08608, §4.1): 16k tokens per
// batch, hidden 2048 (heads = 2048 / head_dim), head dim 64 and 128, sequence lengths 512 ... 16k
// (batch = 16k / length), causal and not. Varlen packs: documents of a real length file drawn
// with replacement (seeded) and cut to fill exactly 16k tokens, the way a packed micro-batch of
// that data looks to the kernel.
// FLOPs as FlashAttention's benchmarks count them (benchmarks/benchmark_flash_attention.py,
// flops()): forward 4 * heads * head_dim * sum_j L_j^2, halved when causal; backward 2.5 x the
// forward (dQ, dK, dV, dP and the recomputed S: 5 matmuls against the forward's 2). So TFLOPS
// here compare directly with the paper's and FlashAttention's published numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dcp::attn {

struct AttnBenchCase {
  std::string name;              // e.g. "dense L=4096 d=128 causal", "varlen go.txt d=128 causal"
  std::vector<int32_t> lengths;  // sequences of the batch
  int heads = 16;
  int head_dim = 128;
  bool causal = true;
};

inline constexpr int64_t kBenchTokens = 16384;
inline constexpr int kBenchHidden = 2048;

// Every (head_dim, length, causal) of the paper's sweep.
std::vector<AttnBenchCase> fa3_paper_cases();

// Documents drawn from `docs` (with replacement, seeded), each cut to what is left of `budget`,
// until exactly `budget` tokens; zero-length documents are skipped. Throws InputError when `docs`
// holds no positive length or budget < 1.
std::vector<int32_t> pack_lengths(const std::vector<int64_t>& docs, int64_t budget, uint64_t seed);

// FlashAttention's FLOP count of the case (see top).
double attn_flops(const AttnBenchCase& c, bool backward);

}  // namespace dcp::attn

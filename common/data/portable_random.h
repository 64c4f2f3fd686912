// Random draws that give the same values with every standard library.
//
// std::mt19937_64 is fully specified by the standard, but the distributions
// (uniform_int_distribution, uniform_real_distribution) and std::shuffle are
// not, so libstdc++ and libc++ produce different sequences from the same seed.
// Everything that must agree across machines (shuffles every worker computes
// independently, synthetic data) uses these helpers instead.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace pstrain {

// SplitMix64 finaliser: a bijective 64-bit mix, used to derive seeds.
inline uint64_t MixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed for stream `stream` of `seed` (e.g. the epoch of a shuffle).
inline uint64_t DeriveSeed(uint64_t seed, uint64_t stream) { return MixBits(MixBits(seed) ^ stream); }

// Uniform integer in [0, n), n > 0, without modulo bias (rejection sampling).
inline uint64_t UniformInt(std::mt19937_64& gen, uint64_t n) {
  // Values below `threshold` would make some residues more likely; 2^64 - threshold is a multiple of n.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t x = gen();
    if (x >= threshold) return x % n;
  }
}

// Uniform float in [0, 1) from the top 24 bits of `bits`.
inline float UniformFloat01(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

// Fisher-Yates shuffle: the same permutation for the same generator state everywhere.
template <typename T>
void PortableShuffle(std::vector<T>& v, std::mt19937_64& gen) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(UniformInt(gen, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace pstrain

#pragma once
// The instantiation list of the cast kernels: every ordered pair of distinct dtypes. X(To, From)
// is expanded once per pair by cast.cpp and cast.cu.

#define MT_CAST_PAIRS(X) \
  X(float, double)       \
  X(float, BFloat16)     \
  X(float, Half)         \
  X(double, float)       \
  X(double, BFloat16)    \
  X(double, Half)        \
  X(BFloat16, float)     \
  X(BFloat16, double)    \
  X(BFloat16, Half)      \
  X(Half, float)         \
  X(Half, double)        \
  X(Half, BFloat16)

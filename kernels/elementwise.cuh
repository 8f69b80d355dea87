#pragma once
// Memory-bound element-wise kernels: the push-sum arithmetic, the fused SGD update, bias + ReLU.
// Each uses float4 loads/stores when every pointer it touches is 16-byte aligned (a scalar tail
// handles n % 4), and falls back to scalar accesses otherwise. Grid-stride loops throughout.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/launch.cuh"

namespace sgp::kernels {

cudaError_t fill(float* x, std::size_t n, float value, const Launch& launch);
cudaError_t scale(float* x, std::size_t n, float alpha, const Launch& launch);
// y += alpha * x
cudaError_t axpy(float alpha, const float* x, float* y, std::size_t n, const Launch& launch);
// z = x * inv_weight
cudaError_t debias(const float* x, float inv_weight, float* z, std::size_t n, const Launch& launch);
// x = max(x, 0), in place
cudaError_t relu_forward(float* x, std::size_t n, const Launch& launch);
// dy = y > 0 ? dy : 0
cudaError_t relu_backward(float* dy, const float* y, std::size_t n, const Launch& launch);
// g = grad + wd * p;  v = mu * v + g;  p -= lr * (nesterov ? g + mu * v : v)
cudaError_t sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                       float momentum, float weight_decay, bool nesterov, const Launch& launch);
// y[r, c] += bias_scale * bias[c], then max(y, 0) when relu; y is [rows x cols] row-major.
cudaError_t bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                                    float bias_scale, const Launch& launch);

}  // namespace sgp::kernels

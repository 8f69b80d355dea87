#include <cstdint>

#include "kernels/block_reduce.cuh"
#include "kernels/elementwise.cuh"

namespace sgp::kernels {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Applies op.vec(i) to float4 element i in [0, n_vec) and op.one(i) to float element i in
// [4 * n_vec, n). n_vec = 0 gives the all-scalar path for unaligned pointers.
template <class Op>
__global__ void __launch_bounds__(kThreads) map_kernel(Op op, std::size_t n_vec, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t i = tid; i < n_vec; i += stride) op.vec(i);
  for (std::size_t i = 4 * n_vec + tid; i < n; i += stride) op.one(i);
}

template <class Op>
cudaError_t run_map(const Op& op, std::size_t n, bool vectorise, const Launch& launch) {
  if (n == 0) return cudaSuccess;
  const std::size_t n_vec = vectorise ? n / 4 : 0;
  const std::size_t tail = n - 4 * n_vec;
  const std::size_t work = n_vec > tail ? n_vec : tail;
  map_kernel<<<grid_for(work, launch.max_blocks), kThreads, 0, launch.stream>>>(op, n_vec, n);
  return cudaGetLastError();
}

__device__ __forceinline__ float4 load4(const float* p, std::size_t i) {
  return reinterpret_cast<const float4*>(p)[i];
}
__device__ __forceinline__ void store4(float* p, std::size_t i, float4 v) {
  reinterpret_cast<float4*>(p)[i] = v;
}

struct FillOp {
  float* x;
  float value;
  __device__ void vec(std::size_t i) const {
    store4(x, i, make_float4(value, value, value, value));
  }
  __device__ void one(std::size_t i) const { x[i] = value; }
};

struct AxpyOp {
  float alpha;
  const float* x;
  float* y;
  __device__ void vec(std::size_t i) const {
    const float4 a = load4(x, i);
    float4 b = load4(y, i);
    b.x += alpha * a.x;
    b.y += alpha * a.y;
    b.z += alpha * a.z;
    b.w += alpha * a.w;
    store4(y, i, b);
  }
  __device__ void one(std::size_t i) const { y[i] += alpha * x[i]; }
};

// z = alpha * x; also in place (z == x) for scale().
struct ScaleIntoOp {
  const float* x;
  float alpha;
  float* z;
  __device__ void vec(std::size_t i) const {
    float4 v = load4(x, i);
    v.x *= alpha;
    v.y *= alpha;
    v.z *= alpha;
    v.w *= alpha;
    store4(z, i, v);
  }
  __device__ void one(std::size_t i) const { z[i] = x[i] * alpha; }
};

// Like std::max(v, 0.0f) of the CPU backend (NaN stays NaN there too: max keeps its first
// argument when the comparison is false).
__device__ __forceinline__ float relu(float v) { return 0.0f > v ? 0.0f : v; }

struct ReluOp {
  float* x;
  __device__ void vec(std::size_t i) const {
    float4 v = load4(x, i);
    v.x = relu(v.x);
    v.y = relu(v.y);
    v.z = relu(v.z);
    v.w = relu(v.w);
    store4(x, i, v);
  }
  __device__ void one(std::size_t i) const { x[i] = relu(x[i]); }
};

struct ReluBackwardOp {
  float* dy;
  const float* y;
  __device__ void vec(std::size_t i) const {
    const float4 a = load4(y, i);
    float4 d = load4(dy, i);
    d.x = a.x > 0.0f ? d.x : 0.0f;
    d.y = a.y > 0.0f ? d.y : 0.0f;
    d.z = a.z > 0.0f ? d.z : 0.0f;
    d.w = a.w > 0.0f ? d.w : 0.0f;
    store4(dy, i, d);
  }
  __device__ void one(std::size_t i) const { dy[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
};

struct SgdOp {
  float* p;
  const float* g;
  float* v;
  float lr, mu, wd;
  bool nesterov;
  // One parameter; returns nothing, updates p and v in registers.
  __device__ __forceinline__ void step(float& param, float grad, float& vel) const {
    const float gw = grad + wd * param;
    const float nv = mu * vel + gw;
    vel = nv;
    param -= lr * (nesterov ? gw + mu * nv : nv);
  }
  __device__ void vec(std::size_t i) const {
    float4 pp = load4(p, i);
    const float4 gg = load4(g, i);
    float4 vv = load4(v, i);
    step(pp.x, gg.x, vv.x);
    step(pp.y, gg.y, vv.y);
    step(pp.z, gg.z, vv.z);
    step(pp.w, gg.w, vv.w);
    store4(p, i, pp);
    store4(v, i, vv);
  }
  __device__ void one(std::size_t i) const {
    float pp = p[i], vv = v[i];
    step(pp, g[i], vv);
    p[i] = pp;
    v[i] = vv;
  }
};

template <bool kRelu>
__device__ __forceinline__ float bias_act(float y, float b, float scale) {
  const float s = y + scale * b;
  return kRelu && s < 0.0f ? 0.0f : s;  // like std::max(s, 0.0f) of the CPU backend
}

// y viewed as float4 [rows x cols4]; needs cols % 4 == 0 and y, bias 16-byte aligned.
template <bool kRelu>
__global__ void __launch_bounds__(kThreads)
    bias_act_vec_kernel(float* y, const float* bias, float scale, std::size_t total_vec,
                        unsigned cols_vec) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total_vec; i += stride) {
    float4 v = load4(y, i);
    const float4 b = load4(bias, i % cols_vec);
    v.x = bias_act<kRelu>(v.x, b.x, scale);
    v.y = bias_act<kRelu>(v.y, b.y, scale);
    v.z = bias_act<kRelu>(v.z, b.z, scale);
    v.w = bias_act<kRelu>(v.w, b.w, scale);
    store4(y, i, v);
  }
}

template <bool kRelu>
__global__ void __launch_bounds__(kThreads)
    bias_act_kernel(float* y, const float* bias, float scale, std::size_t total, unsigned cols) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    y[i] = bias_act<kRelu>(y[i], bias[i % cols], scale);
  }
}

}  // namespace

cudaError_t fill(float* x, std::size_t n, float value, const Launch& launch) {
  return run_map(FillOp{x, value}, n, aligned16(x), launch);
}

cudaError_t scale(float* x, std::size_t n, float alpha, const Launch& launch) {
  return run_map(ScaleIntoOp{x, alpha, x}, n, aligned16(x), launch);
}

cudaError_t axpy(float alpha, const float* x, float* y, std::size_t n, const Launch& launch) {
  return run_map(AxpyOp{alpha, x, y}, n, aligned16(x) && aligned16(y), launch);
}

cudaError_t debias(const float* x, float inv_weight, float* z, std::size_t n,
                   const Launch& launch) {
  return run_map(ScaleIntoOp{x, inv_weight, z}, n, aligned16(x) && aligned16(z), launch);
}

cudaError_t relu_forward(float* x, std::size_t n, const Launch& launch) {
  return run_map(ReluOp{x}, n, aligned16(x), launch);
}

cudaError_t relu_backward(float* dy, const float* y, std::size_t n, const Launch& launch) {
  return run_map(ReluBackwardOp{dy, y}, n, aligned16(dy) && aligned16(y), launch);
}

cudaError_t sgd_update(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                       float momentum, float weight_decay, bool nesterov, const Launch& launch) {
  const SgdOp op{params, grads, velocity, lr, momentum, weight_decay, nesterov};
  return run_map(op, n, aligned16(params) && aligned16(grads) && aligned16(velocity), launch);
}

cudaError_t bias_activation_forward(float* y, const float* bias, int rows, int cols, bool relu,
                                    float bias_scale, const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const std::size_t total = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const bool vectorise = cols % 4 == 0 && aligned16(y) && aligned16(bias);
  if (vectorise) {
    const std::size_t total_vec = total / 4;
    const unsigned cols_vec = static_cast<unsigned>(cols / 4);
    const int grid = grid_for(total_vec, launch.max_blocks);
    if (relu) {
      bias_act_vec_kernel<true>
          <<<grid, kThreads, 0, launch.stream>>>(y, bias, bias_scale, total_vec, cols_vec);
    } else {
      bias_act_vec_kernel<false>
          <<<grid, kThreads, 0, launch.stream>>>(y, bias, bias_scale, total_vec, cols_vec);
    }
  } else {
    const int grid = grid_for(total, launch.max_blocks);
    const unsigned ucols = static_cast<unsigned>(cols);
    if (relu) {
      bias_act_kernel<true>
          <<<grid, kThreads, 0, launch.stream>>>(y, bias, bias_scale, total, ucols);
    } else {
      bias_act_kernel<false>
          <<<grid, kThreads, 0, launch.stream>>>(y, bias, bias_scale, total, ucols);
    }
  }
  return cudaGetLastError();
}

}  // namespace sgp::kernels

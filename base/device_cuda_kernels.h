/* vrambench — the cuda backend's kernels (base/device_cuda_kernels.cu),
 * behind C launchers for base/device_cuda.c. Each launcher queues its
 * kernel(s) on `stream` and returns the launch's error (cudaGetLastError),
 * cudaSuccess when nothing had to be launched (a count of 0). */
#ifndef VB_DEVICE_CUDA_KERNELS_H
#define VB_DEVICE_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = a value in [-1, 1) hashed from (seed, i), for i < count. */
cudaError_t vb_cuda_launch_fill_random_f32(cudaStream_t stream, float *out, uint64_t count, uint64_t seed);

/* out[i] = max(in[i], 0) for i < count; out may equal in. */
cudaError_t vb_cuda_launch_relu_f32(cudaStream_t stream, float *out, const float *in, uint64_t count);

/* Byte o of [addr, addr+size) = byte (o % 8) of hash(seed, o / 8): the
 * pattern depends on the offset from addr, never on addr itself. */
cudaError_t vb_cuda_launch_fill_pattern(cudaStream_t stream, void *addr, uint64_t size, uint64_t seed);

/* Counts the bytes of [addr, addr+size) that differ from fill_pattern(seed),
 * then synchronizes `stream` and stores the count. Not reentrant: one
 * device-side counter serves every call. */
cudaError_t vb_cuda_verify_pattern(cudaStream_t stream, const void *addr, uint64_t size, uint64_t seed,
                                   uint64_t *mismatched_bytes);

/* One thread that spins for about `nanoseconds` of the GPU's global timer. */
cudaError_t vb_cuda_launch_busy(cudaStream_t stream, uint64_t nanoseconds);

#ifdef __cplusplus
}
#endif

#endif

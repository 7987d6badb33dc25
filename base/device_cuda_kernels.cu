// vrambench — the little device code the cuda backend needs: fills for
// scenarios (random floats, relu), the byte pattern the conformance suite
// writes and reads back (the "usable" property), and a busy kernel that keeps
// a stream occupied for a chosen time (stream-safety tests on a real GPU).
//
// Every kernel is a grid-stride loop over 64-bit indices, so any size is one
// launch with a bounded grid.
#include "device_cuda_kernels.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr uint64_t kMaxBlocks = 4096; // enough to fill an H100 (132 SMs x 2048 threads) several times

// Blocks for `items` work items (items > 0).
unsigned blocks_for(uint64_t items)
{
    uint64_t blocks = (items + kThreads - 1) / kThreads;
    return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// splitmix64's finalizer over (seed, index): neighbouring indices and seeds
// give unrelated words, so a misplaced or stale byte shows as a mismatch.
__device__ __forceinline__ uint64_t hash_word(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// The pattern's byte at offset `offset`.
__device__ __forceinline__ unsigned char pattern_byte(uint64_t seed, uint64_t offset)
{
    return (unsigned char)(hash_word(seed, offset >> 3) >> ((offset & 7) * 8));
}

__device__ __forceinline__ uint64_t global_index()
{
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ uint64_t grid_stride()
{
    return (uint64_t)gridDim.x * blockDim.x;
}

__global__ void fill_random_kernel(float *out, uint64_t count, uint64_t seed)
{
    for (uint64_t i = global_index(); i < count; i += grid_stride()) {
        // 24 bits scaled by 2^-23 lie exactly in [0, 2); minus 1 gives [-1, 1).
        uint64_t bits = hash_word(seed, i) >> 40;
        out[i] = (float)bits * (1.0f / 8388608.0f) - 1.0f;
    }
}

__global__ void relu_kernel(float *out, const float *in, uint64_t count)
{
    for (uint64_t i = global_index(); i < count; i += grid_stride()) out[i] = fmaxf(in[i], 0.0f);
}

// Whole 8-byte words at word-aligned `addr`: one store per word, which is
// byte (offset % 8) of the word on a little-endian GPU.
__global__ void fill_pattern_words(uint64_t *addr, uint64_t words, uint64_t seed)
{
    for (uint64_t w = global_index(); w < words; w += grid_stride()) addr[w] = hash_word(seed, w);
}

// Bytes [first, end) of the range one at a time (unaligned ranges, tails).
__global__ void fill_pattern_bytes(unsigned char *addr, uint64_t first, uint64_t end, uint64_t seed)
{
    for (uint64_t o = first + global_index(); o < end; o += grid_stride()) addr[o] = pattern_byte(seed, o);
}

__device__ unsigned long long mismatch_counter;

// Bytes that differ within one word: fold each byte's bits into its lowest
// bit, keep those, count them.
__device__ __forceinline__ unsigned differing_bytes(uint64_t x)
{
    x |= x >> 4;
    x |= x >> 2;
    x |= x >> 1;
    return (unsigned)__popcll(x & 0x0101010101010101ULL);
}

__global__ void verify_pattern_words(const uint64_t *addr, uint64_t words, uint64_t seed)
{
    unsigned long long local = 0;
    for (uint64_t w = global_index(); w < words; w += grid_stride())
        local += differing_bytes(addr[w] ^ hash_word(seed, w));
    if (local) atomicAdd(&mismatch_counter, local);
}

__global__ void verify_pattern_bytes(const unsigned char *addr, uint64_t first, uint64_t end, uint64_t seed)
{
    unsigned long long local = 0;
    for (uint64_t o = first + global_index(); o < end; o += grid_stride())
        local += addr[o] != pattern_byte(seed, o);
    if (local) atomicAdd(&mismatch_counter, local);
}

__device__ __forceinline__ uint64_t global_timer_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void busy_kernel(uint64_t nanoseconds)
{
    uint64_t start = global_timer_ns();
    while (global_timer_ns() - start < nanoseconds) {
    }
}

// Words that can be stored whole: all of them when addr is 8-byte aligned
// (every device allocation is 256-byte aligned), none otherwise.
uint64_t whole_words(const void *addr, uint64_t size)
{
    return ((uintptr_t)addr & 7) == 0 ? size / 8 : 0;
}

// The runtime's last error is per thread and shared with every library in the
// process (an external allocator's failed cudaMalloc leaves one behind, seen
// on an H100 as a kernel launch "failing" with out of memory): it is cleared
// before a launch, so what is read after it is the launch's own. A sticky
// error comes back at the launch itself.
void clear_stale_error()
{
    (void)cudaGetLastError();
}

} // namespace

extern "C" cudaError_t vb_cuda_launch_fill_random_f32(cudaStream_t stream, float *out, uint64_t count, uint64_t seed)
{
    if (count == 0) return cudaSuccess;
    clear_stale_error();
    fill_random_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, count, seed);
    return cudaGetLastError();
}

extern "C" cudaError_t vb_cuda_launch_relu_f32(cudaStream_t stream, float *out, const float *in, uint64_t count)
{
    if (count == 0) return cudaSuccess;
    clear_stale_error();
    relu_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count);
    return cudaGetLastError();
}

extern "C" cudaError_t vb_cuda_launch_fill_pattern(cudaStream_t stream, void *addr, uint64_t size, uint64_t seed)
{
    uint64_t words = whole_words(addr, size);
    clear_stale_error();
    if (words > 0) {
        fill_pattern_words<<<blocks_for(words), kThreads, 0, stream>>>((uint64_t *)addr, words, seed);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    if (words * 8 < size) {
        fill_pattern_bytes<<<blocks_for(size - words * 8), kThreads, 0, stream>>>((unsigned char *)addr, words * 8,
                                                                                  size, seed);
        return cudaGetLastError();
    }
    return cudaSuccess;
}

extern "C" cudaError_t vb_cuda_verify_pattern(cudaStream_t stream, const void *addr, uint64_t size, uint64_t seed,
                                              uint64_t *mismatched_bytes)
{
    void *counter = nullptr;
    clear_stale_error();
    cudaError_t err = cudaGetSymbolAddress(&counter, mismatch_counter);
    if (err == cudaSuccess) err = cudaMemsetAsync(counter, 0, sizeof(unsigned long long), stream);
    if (err != cudaSuccess) return err;
    uint64_t words = whole_words(addr, size);
    if (words > 0) {
        verify_pattern_words<<<blocks_for(words), kThreads, 0, stream>>>((const uint64_t *)addr, words, seed);
        err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    if (words * 8 < size) {
        verify_pattern_bytes<<<blocks_for(size - words * 8), kThreads, 0, stream>>>((const unsigned char *)addr,
                                                                                    words * 8, size, seed);
        err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    unsigned long long count = 0;
    err = cudaMemcpyAsync(&count, counter, sizeof count, cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) return err;
    *mismatched_bytes = count;
    return cudaSuccess;
}

extern "C" cudaError_t vb_cuda_launch_busy(cudaStream_t stream, uint64_t nanoseconds)
{
    clear_stale_error();
    busy_kernel<<<1, 1, 0, stream>>>(nanoseconds);
    return cudaGetLastError();
}

/* vrambench tests — a tiny external allocator with PyTorch's pluggable ABI
 * (allocators/external.c): cudaMalloc / cudaFree on every call, nothing
 * cached. Built as build/tests/libvb_external_test.so; `make test-gpu` runs
 * the conformance suite on it, `make test` checks that the sim refuses it.
 *
 * cudaMalloc and cudaFree are looked up at run time (the process that loads
 * it has libcudart loaded already; else libcudart.so is opened), so the
 * library builds without CUDA headers, as CI's sanitizer builds do. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

typedef int (*cuda_malloc_fn)(void **ptr, size_t size);
typedef int (*cuda_free_fn)(void *ptr);

/* Resolves `symbol` from the loaded CUDA runtime, or NULL. */
static void *cuda_symbol(const char *symbol)
{
    void *fn = dlsym(RTLD_DEFAULT, symbol);
    if (fn) return fn;
    void *runtime = dlopen("libcudart.so", RTLD_NOW | RTLD_GLOBAL);
    return runtime ? dlsym(runtime, symbol) : NULL;
}

/* cudaMalloc of `size` bytes; NULL when it fails or CUDA is not there. */
void *vb_torch_malloc(ssize_t size, int device, void *stream)
{
    (void)device;
    (void)stream;
    void *fn = cuda_symbol("cudaMalloc");
    cuda_malloc_fn cuda_malloc;
    void *ptr = NULL;
    if (!fn || size <= 0) return NULL;
    memcpy(&cuda_malloc, &fn, sizeof fn);
    return cuda_malloc(&ptr, (size_t)size) == 0 ? ptr : NULL;
}

/* cudaFree (which waits for the device, so stream order is kept). */
void vb_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    (void)device;
    (void)stream;
    void *fn = cuda_symbol("cudaFree");
    cuda_free_fn cuda_free;
    if (!fn) return;
    memcpy(&cuda_free, &fn, sizeof fn);
    cuda_free(ptr);
}

/*
** device.cu -- the device probe of a CUDA build (runtime API only).
**
** Every CUDA call is checked and turned into a return value plus a reason;
** nothing aborts, because "no usable GPU" is an ordinary answer on a build
** machine or a CPU-only node.
*/
#include "backend/device.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<const char *> g_reason{"no CUDA device probed yet"};

bool ok(cudaError_t e)
{
    if (e == cudaSuccess) return true;
    g_reason.store(cudaGetErrorString(e));
    (void)cudaGetLastError(); // do not let a non-sticky error leak into the next call
    return false;
}

bool valid_device(int dev)
{
    int n = 0;
    if (!ok(cudaGetDeviceCount(&n))) return false;
    if (dev < 0 || dev >= n) {
        g_reason.store("no such CUDA device");
        return false;
    }
    return true;
}

constexpr unsigned kSelftestN = 4096;

// A bijective integer map: a kernel that did not run, or ran on the wrong
// data, cannot produce the expected words by accident.
__host__ __device__ unsigned selftest_map(unsigned x, unsigned i)
{
    return x * 2654435761u + (i ^ 0x9e3779b9u);
}

__global__ void selftest_kernel(unsigned *x, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = selftest_map(x[i], i);
}

} // namespace

extern "C" int sq_device_count(void)
{
    int n = 0; // cudaGetDeviceCount leaves it untouched when there is no driver
    if (!ok(cudaGetDeviceCount(&n))) return 0;
    if (n <= 0) {
        g_reason.store("no CUDA device visible");
        return 0;
    }
    return n;
}

extern "C" int sq_device_name(int dev, char *buf, size_t len)
{
    if (!buf || len == 0) {
        g_reason.store("no buffer for the device name");
        return SQ_ERR_ARG;
    }
    buf[0] = '\0';
    if (!valid_device(dev)) return SQ_ERR_ARG;
    cudaDeviceProp prop;
    if (!ok(cudaGetDeviceProperties(&prop, dev))) return SQ_ERR_DEVICE;
    size_t n = strnlen(prop.name, sizeof prop.name);
    if (n >= len) n = len - 1;
    memcpy(buf, prop.name, n);
    buf[n] = '\0';
    return 0;
}

extern "C" const char *sq_device_unavailable_reason(void)
{
    return g_reason.load();
}

extern "C" int sq_device_selftest(int dev)
{
    if (!valid_device(dev)) return SQ_ERR_ARG;
    int prev = 0;
    if (!ok(cudaGetDevice(&prev))) return SQ_ERR_DEVICE;
    if (!ok(cudaSetDevice(dev))) return SQ_ERR_DEVICE;

    const size_t bytes = kSelftestN * sizeof(unsigned);
    unsigned *host = static_cast<unsigned *>(malloc(bytes));
    if (!host) {
        g_reason.store("out of host memory");
        (void)cudaSetDevice(prev);
        return SQ_ERR_NOMEM;
    }
    for (unsigned i = 0; i < kSelftestN; i++) host[i] = i;

    int rc = SQ_ERR_DEVICE;
    unsigned *d = nullptr;
    if (ok(cudaMalloc(reinterpret_cast<void **>(&d), bytes)) &&
        ok(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice))) {
        selftest_kernel<<<(kSelftestN + 255) / 256, 256>>>(d, kSelftestN);
        if (ok(cudaGetLastError()) && ok(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost))) {
            rc = 0;
            for (unsigned i = 0; i < kSelftestN; i++) {
                if (host[i] != selftest_map(i, i)) {
                    g_reason.store("device self-test read back wrong data");
                    rc = SQ_ERR_DEVICE;
                    break;
                }
            }
        }
    }
    if (d && !ok(cudaFree(d))) rc = SQ_ERR_DEVICE;
    free(host);
    if (!ok(cudaSetDevice(prev))) rc = SQ_ERR_DEVICE;
    return rc;
}

/*
** cuda_sim.h -- runs the CUDA kernels of kernels/ on the CPU, for the tests.
**
** CI machines have no GPU, yet the kernels' logic (which thread holds which
** element, the shuffle trees, partial tiles, grid-stride loops, the two-pass
** path) is where bugs hide. So the tests compile the kernel sources a second
** time with g++ and this header, which supplies the small part of CUDA they
** use: one fiber (ucontext) per thread of a block, blocks one after another;
** __syncthreads() is a barrier of the fibers; __shfl_xor_sync() exchanges
** through a table between two barriers; shared memory is one buffer (filled
** with garbage before each block, as real shared memory is); atomics are
** plain read-modify-writes, since fibers only switch at barriers.
**
** It is strict where CUDA is undefined: every thread of a block must reach
** the same sequence of barriers and shuffles (a divergent barrier aborts),
** shuffles need a full mask, a lane offset below 32 and whole warps.
**
** What it cannot show is the hardware: rounding (the same IEEE operations,
** with FMA contraction off on both sides), memory ordering and speed. The
** GPU test (tests/check_gpu_codec.c) runs the same kernels on a device.
*/
#ifndef SQK_CUDA_SIM_H
#define SQK_CUDA_SIM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SQK_SIM_ASAN 1
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__

struct dim3 {
    unsigned x, y, z;
};

struct float4 {
    float x, y, z, w;
};

inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

struct uint4 {
    unsigned x, y, z, w;
};

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

/* The built-in variables: one set, updated at every switch of fibers. */
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace sqk_sim {

enum { TAG_SYNC = 1, TAG_SHUFFLE = 2 };
const size_t STACK_BYTES = 256 * 1024;

/* Switching fibers: on x86-64 a few instructions that swap the callee-saved
** registers and the stack pointer; elsewhere ucontext, which also saves the
** signal mask with a system call per switch (several times slower). */
#if defined(__x86_64__) && defined(__linux__)
#define SQK_SIM_FAST_SWITCH 1
extern "C" void sqk_sim_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl sqk_sim_switch\n"
        ".type sqk_sim_switch,@function\n"
        "sqk_sim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size sqk_sim_switch,.-sqk_sim_switch\n");
struct Context {
    void *sp;
};
#else
struct Context {
    ucontext_t uc;
};
#endif

struct Fiber {
    Context ctx;
    char *stack;
    bool done;
};

struct Runtime {
    Context main;
    std::vector<Fiber> fibers;
    unsigned nthreads = 0, cur = 0, arrived = 0, done = 0;
    unsigned long generation = 0;
    int tag = 0;
    const std::function<void()> *body = nullptr;
    std::vector<uint32_t> exchange; /* two tables of one word per thread */
    std::vector<unsigned> shuffles; /* shuffles each thread has done */
    std::vector<unsigned char> smem;
#ifdef SQK_SIM_ASAN
    const void *main_bottom = nullptr;
    size_t main_size = 0;
#endif
    ~Runtime()
    {
        for (Fiber &f : fibers) free(f.stack);
    }
};

inline Runtime rt;

[[noreturn]] inline void fail(const char *what)
{
    fprintf(stderr, "cuda_sim: block %u thread %u: %s\n", blockIdx.x, threadIdx.x, what);
    abort();
}

/* Switches from the running fiber (or main, from < 0) to fiber `to` (or
** main, to < 0). A fiber that will never run again passes dying. */
inline void switch_to(int from, int to, bool dying = false)
{
    Context *src = from < 0 ? &rt.main : &rt.fibers[(size_t)from].ctx;
    Context *dst = to < 0 ? &rt.main : &rt.fibers[(size_t)to].ctx;
#ifdef SQK_SIM_ASAN
    void *fake = nullptr;
    const void *bottom = to < 0 ? rt.main_bottom : rt.fibers[(size_t)to].stack;
    size_t size = to < 0 ? rt.main_size : STACK_BYTES;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, bottom, size);
#else
    (void)dying;
#endif
    if (to >= 0) {
        rt.cur = (unsigned)to;
        threadIdx.x = (unsigned)to;
    }
#ifdef SQK_SIM_FAST_SWITCH
    sqk_sim_switch(&src->sp, dst->sp);
#else
    if (swapcontext(&src->uc, &dst->uc) != 0) fail("swapcontext failed");
#endif
#ifdef SQK_SIM_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    if (from >= 0) {
        rt.cur = (unsigned)from;
        threadIdx.x = (unsigned)from;
    }
}

/* The next fiber after cur that has not finished, round robin. */
inline int next_fiber()
{
    for (unsigned i = 1; i <= rt.nthreads; i++) {
        unsigned f = (rt.cur + i) % rt.nthreads;
        if (!rt.fibers[f].done) return (int)f;
    }
    return -1;
}

inline void barrier(int tag)
{
    if (rt.arrived == 0)
        rt.tag = tag;
    else if (rt.tag != tag)
        fail("threads of one block wait at different barriers (__syncthreads against a shuffle)");
    if (++rt.arrived == rt.nthreads) { /* the last to arrive releases the others */
        rt.arrived = 0;
        rt.generation++;
        return;
    }
    const unsigned long gen = rt.generation;
    while (rt.generation == gen) {
        int next = next_fiber();
        if (next < 0 || next == (int)rt.cur) fail("deadlock at a barrier");
        switch_to((int)rt.cur, next);
    }
}

inline void fiber_entry()
{
#ifdef SQK_SIM_ASAN
    const void *from_bottom = nullptr;
    size_t from_size = 0;
    __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
    if (rt.cur == 0 && !rt.main_bottom) { /* fiber 0 is entered from main */
        rt.main_bottom = from_bottom;
        rt.main_size = from_size;
    }
#endif
    (*rt.body)();
    const unsigned me = rt.cur;
    if (rt.arrived != 0) fail("a thread exited while others wait at a barrier");
    rt.fibers[me].done = true;
    rt.done++;
    int next = next_fiber();
    switch_to((int)me, next, true); /* never returns */
    fail("a finished fiber was resumed");
}

#ifdef SQK_SIM_FAST_SWITCH
/* A new fiber's stack holds what sqk_sim_switch pops: six registers, then
** fiber_entry as the return address, placed so that fiber_entry starts
** with the stack aligned as after a call. */
inline void start_fiber(Fiber &f)
{
#ifdef SQK_SIM_ASAN
    /* the frames of the stack's last fiber never returned: clear their
    ** redzones, as ASan's makecontext interceptor does */
    __asan_unpoison_memory_region(f.stack, STACK_BYTES);
#endif
    void **top = reinterpret_cast<void **>(f.stack + STACK_BYTES);
    top -= 2;        /* 16-byte aligned; top[1] is a return address never used */
    top[1] = nullptr;
    top[0] = reinterpret_cast<void *>(&fiber_entry);
    top -= 6;
    for (int i = 0; i < 6; i++) top[i] = nullptr;
    f.ctx.sp = top;
    f.done = false;
}
#else
/* getcontext returns twice, so it lives alone in a function whose locals
** nothing can clobber. */
__attribute__((noinline)) inline void start_fiber(Fiber &f)
{
    if (getcontext(&f.ctx.uc) != 0) fail("getcontext failed");
    f.ctx.uc.uc_stack.ss_sp = f.stack;
    f.ctx.uc.uc_stack.ss_size = STACK_BYTES;
    f.ctx.uc.uc_link = nullptr;
    makecontext(&f.ctx.uc, fiber_entry, 0);
    f.done = false;
}
#endif

/* A shuffle writes its value into one of two tables, waits for the block,
** and reads its partner's. The next shuffle uses the other table, and the
** one after that can reuse this one only once every thread has passed the
** next barrier, so one barrier per shuffle suffices. */
inline uint32_t shuffle_xor(unsigned mask, uint32_t v, int lane_mask)
{
    if (mask != 0xffffffffu) fail("__shfl_xor_sync with a partial mask");
    if (lane_mask <= 0 || lane_mask >= 32) fail("__shfl_xor_sync lane mask outside 1..31");
    if (rt.nthreads % 32) fail("__shfl_xor_sync in a block of partial warps");
    const unsigned t = threadIdx.x;
    uint32_t *table = rt.exchange.data() + (rt.shuffles[t]++ % 2) * rt.nthreads;
    table[t] = v;
    barrier(TAG_SHUFFLE);
    return table[t ^ (unsigned)lane_mask];
}

} /* namespace sqk_sim */

inline void __syncthreads() { sqk_sim::barrier(sqk_sim::TAG_SYNC); }

inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask)
{
    return sqk_sim::shuffle_xor(mask, v, lane_mask);
}

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u = sqk_sim::shuffle_xor(mask, u, lane_mask);
    memcpy(&v, &u, 4);
    return v;
}

inline unsigned atomicOr(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p = old | v;
    return old;
}

inline unsigned atomicMax(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p = old > v ? old : v;
    return old;
}

inline unsigned atomicMin(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p = old < v ? old : v;
    return old;
}

/* Stores with a cache hint: on the CPU, plain stores. */
template <class T> inline void __stcs(T *p, T v) { *p = v; }

inline void *sqk_sim_dynamic_smem() { return sqk_sim::rt.smem.data(); }

/* kernel<<<grid, block, smem>>>: runs body for every thread of every block. */
template <class F>
void sqk_sim_launch(unsigned grid, unsigned block, uint64_t smem, F body_fn)
{
    using namespace sqk_sim;
    if (grid == 0 || block == 0 || block > 1024) fail("launch with an invalid shape");
    if (smem > 48 * 1024) fail("launch with more than 48 KiB of dynamic shared memory");
    std::function<void()> body = body_fn;
    rt.body = &body;
    rt.nthreads = block;
    rt.exchange.assign(2 * (size_t)block, 0);
    while (rt.fibers.size() < block) {
        Fiber f;
        f.stack = static_cast<char *>(malloc(STACK_BYTES));
        if (!f.stack) fail("out of memory for fiber stacks");
        f.done = true;
        rt.fibers.push_back(f);
    }
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = dim3{b, 0, 0};
        /* shared memory starts with whatever was there: never zeros */
        rt.smem.assign((size_t)smem + 16, 0xa5);
        rt.shuffles.assign(block, 0);
        for (unsigned i = 0; i < block; i++) start_fiber(rt.fibers[i]);
        rt.done = 0;
        rt.arrived = 0;
        rt.cur = 0;
        switch_to(-1, 0);
        if (rt.done != block) fail("a block returned before all its threads finished");
    }
    threadIdx = dim3{0, 0, 0};
    rt.body = nullptr;
}

#endif

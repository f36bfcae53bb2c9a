// cuda_emu.h: runs CUDA C++ kernels on the CPU, for testing without a GPU.
//
// The emulated device (runtime/device/device_emu.c) compiles a module's CUDA
// source with the host C++ compiler, this header included first, plus one
// TLM_EMU_EXPORT(kernel) line per kernel, which defines the entry points
//
//   extern "C" int tlm_emu_launch_<kernel>(const unsigned grid[3], const unsigned block[3],
//                                         unsigned shared_bytes, void **args, char *err, size_t errlen);
//   extern "C" int tlm_emu_arg_sizes_<kernel>(size_t *sizes, int cap);
//
// args[i] points to the value of the kernel's i-th parameter (the types are
// deduced from the kernel's own declaration; the second entry point gives
// their sizes, which a graph capture copies). The first returns 0, or non-zero with
// a one-line message in err: bad launch dimensions, or a failure found while
// running (a warp operation that can never complete, __trap).
//
// What it models, and checks:
//   - Every CUDA thread of a block is a fiber on the calling OS thread: a
//     user-mode context with its own stack (a 64 KiB slot: a guard page,
//     about 57 KiB of stack, the fiber's own record), reused across launches.
//     A fiber runs until it waits (barrier, warp operation) or returns; the
//     block's fibers take turns, switched by a few instructions of assembly
//     (x86-64, AArch64; swapcontext elsewhere), in one of four orders, block
//     by block in turn: round-robin in ascending thread order, round-robin
//     in descending order, and warp by warp (a warp's threads take turns
//     until all of them wait at a barrier or have returned, then the next
//     warp's) in ascending and in descending warp order. So a missing
//     barrier shows up whichever neighbour a thread reads, and so does one
//     that only a warp running ahead of the others exposes (a buffer
//     refilled while another warp still reads it). The launch returns when
//     every block has run (it is synchronous).
//   - Blocks run one after another, in a fixed pseudo-random order (not 0,
//     1, 2, ...), so a kernel that wrongly depends on the order of its blocks
//     gets wrong results here too.
//   - threadIdx, blockIdx, blockDim, gridDim in three dimensions, read-only.
//   - Two OS threads may launch at once (even the same kernel): each has its
//     own fibers and its own copy of the __shared__ variables.
//   - __syncthreads (and _count/_and/_or): a barrier over the block; threads
//     that have returned count as arrived, as on Volta and later.
//   - Warps are 32 consecutive linear thread ids (blockDim.x must be a
//     multiple of 32). __shfl_sync/_up/_down/_xor (any 1..8-byte type, with
//     width), __ballot_sync, __any_sync, __all_sync, __syncwarp wait until
//     every lane of the mask arrives. A lane in the mask that has returned,
//     waits at __syncthreads, or uses another mask is reported as an error
//     (hardware would hang or return garbage), naming lane, warp and block.
//     No __activemask: which lanes run converged is the GPU's to say.
//   - __shared__ variables: one copy per OS thread (static thread_local),
//     shared by the block's fibers; blocks run one at a time, so that is one
//     copy per block. Before each block every byte of them is set to 0xff
//     (a float NaN, an int -1; with glibc), so that a read of shared memory
//     the block has not written shows up. A missing barrier
//     shows up as wrong results when the round-robin order exposes it (a
//     thread runs on to its next barrier before the next thread starts).
//   - Dynamic shared memory (the launch's shared_bytes): one buffer per OS
//     thread, as large as the launch asks, poisoned the same way before
//     each block; tlm_emu_dynamic_shared() is its address (common.cuh's
//     tlm::dynamic_shared(), which on a GPU is an extern __shared__ array)
//     and tlm_emu_dynamic_shared_size() its size (%dynamic_smem_size).
//   - The tensor cores' warp-matrix instructions, as runtime/gpu/mma.cuh
//     uses them: mma.sync m16n8k16 (bf16 in, fp32 accumulate) and ldmatrix
//     m8n8.x4 (.trans), as collectives of all 32 lanes with the PTX ISA's
//     fragment layouts (warp_matrix, below): a value in the wrong lane's
//     register gives a wrong product; a missing lane, a misaligned row or
//     one outside shared memory is an error.
//   - cp.async (16 bytes, global to shared, with its zero fill), commit and
//     wait_group, as mma.cuh uses them. A copy may land any time between
//     its issue and the wait that covers its group; the emulator takes the
//     two extremes in turn. In the blocks that run their threads in
//     ascending order each copy is made at that wait, so a read of the
//     destination before it, or by another thread before the barrier after
//     it, sees the old contents (the block's poison, or the previous tile).
//     In the others each copy is made as it is issued, so one that
//     overwrites what a thread may still be reading (a stage refilled
//     before the barrier that ends its readers, two stages that overlap)
//     gives wrong results there. A destination outside shared memory or a
//     misaligned address is an error.
//   - __nv_bfloat16 / __nv_bfloat162 with CUDA's conversions, bit for bit
//     (round to nearest even, NaN to 0x7fff, subnormals kept).
//   - the C math functions and CUDA's fast variants (__expf = expf, ...),
//     computed with the host's libm, so results can differ from the GPU's in
//     the last bits.
//
// What only a real GPU checks: timing and occupancy, memory coalescing,
// shared-memory bank conflicts, register and shared-memory limits (a kernel
// over 48 KiB of static shared memory runs here), true concurrency between
// blocks and between warps (threads switch only at barriers and warp
// operations, in the four orders above, so a race that needs another
// interleaving stays hidden), atomics (not provided: kernels must not use
// them), when asynchronous copies land (here: as issued, or at the wait:
// the two extremes), the tensor cores' own summation order and rounding
// (mma is computed in double here, rounded once), and the exact bits of the
// device's math functions.
// Out-of-bounds accesses are host accesses here (a crash or silent
// corruption, not a CUDA error); so is a fiber's stack overflow (the guard
// page: a crash).
#pragma once

#include <errno.h>
#include <link.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cxxabi.h>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#define TLM_CUDA_EMULATED 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __constant__ // a global, as __device__ variables (device memory is host memory here)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(8))) int2 {
    int x, y;
};
struct __attribute__((aligned(16))) int4 {
    int x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
    unsigned x, y;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

constexpr int warpSize = 32;

namespace tlm_emu {
namespace {

enum : unsigned {
    MAX_THREADS = 1024,
    // Each fiber owns an aligned slot of this size: a guard page at the
    // bottom, the stack, and the Fiber itself near the top, so that a fiber
    // finds itself from its stack pointer without thread-local lookups.
    SLOT_BYTES = 64 * 1024,
    WARP = 32,
    // cp.async copies a thread may have in flight (the kernels stage a
    // tile with a few each; more is a kernel that never waits; the message
    // in cp_async says 64)
    MAX_ASYNC = 64,
};

// What a fiber is doing, seen from the scheduler.
enum class Wait : unsigned char { running, barrier, warp, done };
// The kinds of warp operation (lanes of one warp must all be at the same kind).
// mma and ldmatrix are the warp-matrix collectives (warp_matrix, below).
enum class WarpOp : unsigned char { none, shuffle, vote, sync, mma, ldmatrix };

struct State;

// A saved execution context: the stack pointer, registers pushed below it
// (x86-64, AArch64: a switch costs a few nanoseconds), or a ucontext
// elsewhere or with TLM_EMU_UCONTEXT defined (swapcontext also saves the
// signal mask, a system call per switch: launches were 50x slower here).
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(TLM_EMU_UCONTEXT)
#define TLM_EMU_ASM_SWITCH 1
struct Context {
    void *sp;
};
#else
struct Context {
    ucontext_t uc;
};
#endif

// What a fiber itself reads; what the scheduler scans is in State's arrays.
struct Fiber {
    Context context; // where it resumes (valid while it is switched out)
    State *state;
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
    unsigned linear; // linear thread id within the block
    bool parked;     // at the top of its loop: can start the next block's thread
};
// Slots are aligned to 64 KiB, so at one fixed offset every Fiber would use
// the same cache set: its place in the top FIBER_AREA bytes varies with the
// slot's address. (FIBER_AREA is 2 KiB, 16 KiB with TLM_EMU_UCONTEXT.)
constexpr size_t FIBER_BYTES = (sizeof(Fiber) + 63) & ~(size_t)63, FIBER_AREA = 16 * FIBER_BYTES;

inline Fiber &fiber_in_slot(uintptr_t slot) {
    return *reinterpret_cast<Fiber *>(slot + SLOT_BYTES - FIBER_BYTES * (1 + slot / SLOT_BYTES % 16));
}

struct Warp {
    unsigned mask;       // lanes of the warp operation in progress, 0 if none
    unsigned arrived;    // of those, the ones waiting at it
    unsigned exited;     // lanes that have returned
    unsigned at_barrier; // lanes waiting at __syncthreads
    WarpOp op;
};

// A cp.async copy not yet made (cp_async, cp_async_wait).
struct AsyncCopy {
    void *dst;
    const void *src;
    unsigned src_bytes, group;
};

// Everything about an OS thread's launches: its fibers, the launch and
// the block in progress.
struct State {
    char *slots[MAX_THREADS]; // each fiber's slot, mapped when first needed
    unsigned n_ready;         // fibers [0, n_ready) have slots and are parked
    bool active;              // a launch is running
    bool tls_found;           // tls_data and tls_size are known
    char *tls_data;           // this module's thread-local block for the thread
    size_t tls_size;
    unsigned char *dynamic_shared; // the launch's dynamic shared memory (dynamic_capacity bytes allocated)
    size_t dynamic_capacity;
    unsigned dynamic_size;         // the launch's shared_bytes
    Context scheduler; // the launch's own context
    Fiber *fibers[MAX_THREADS];
    // The launch.
    const char *kernel;
    void (*body)(void *);
    void *body_args;
    char *err;
    size_t errlen;
    bool failed;
    // The block.
    unsigned threads, live, runnable, at_barrier, barrier_votes;
    bool descending; // the order of the turns: threads (or warps) backwards
    bool by_warp;    // a warp's threads take turns until none can run, then the next warp's
    Warp warps[MAX_THREADS / WARP];
    // Per thread of the block: its state, and its warp operation's or
    // barrier's operand and outcome.
    Wait wait[MAX_THREADS];
    unsigned char src_lane[MAX_THREADS];
    uint64_t value[MAX_THREADS], result[MAX_THREADS];
    // Per thread: its cp.async copies not yet made, and the groups it has
    // committed (the copies issued since form group `async_committed`).
    AsyncCopy async_copies[MAX_THREADS][MAX_ASYNC];
    unsigned async_pending[MAX_THREADS], async_committed[MAX_THREADS];
};
// The calling OS thread's State, allocated at its first launch. The
// module's only thread-local variable besides the kernels' __shared__
// ones, which poison_shared relies on.
thread_local State *this_thread;

#if defined(TLM_EMU_ASM_SWITCH) && defined(__x86_64__)
// tlm_emu_switch(save, to): pushes the callee-saved registers, stores the
// stack pointer in *save, loads `to` and pops the registers saved there.
__asm__(".text\n"
        ".p2align 4\n"
        ".type tlm_emu_switch, @function\n"
        "tlm_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size tlm_emu_switch, .-tlm_emu_switch\n");
#elif defined(TLM_EMU_ASM_SWITCH) && defined(__aarch64__)
__asm__(".text\n"
        ".p2align 4\n"
        ".type tlm_emu_switch, %function\n"
        "tlm_emu_switch:\n"
        "    sub sp, sp, #160\n"
        "    stp x19, x20, [sp, #0]\n"
        "    stp x21, x22, [sp, #16]\n"
        "    stp x23, x24, [sp, #32]\n"
        "    stp x25, x26, [sp, #48]\n"
        "    stp x27, x28, [sp, #64]\n"
        "    stp x29, x30, [sp, #80]\n"
        "    stp d8, d9, [sp, #96]\n"
        "    stp d10, d11, [sp, #112]\n"
        "    stp d12, d13, [sp, #128]\n"
        "    stp d14, d15, [sp, #144]\n"
        "    mov x2, sp\n"
        "    str x2, [x0]\n"
        "    mov sp, x1\n"
        "    ldp x19, x20, [sp, #0]\n"
        "    ldp x21, x22, [sp, #16]\n"
        "    ldp x23, x24, [sp, #32]\n"
        "    ldp x25, x26, [sp, #48]\n"
        "    ldp x27, x28, [sp, #64]\n"
        "    ldp x29, x30, [sp, #80]\n"
        "    ldp d8, d9, [sp, #96]\n"
        "    ldp d10, d11, [sp, #112]\n"
        "    ldp d12, d13, [sp, #128]\n"
        "    ldp d14, d15, [sp, #144]\n"
        "    add sp, sp, #160\n"
        "    ret\n"
        ".size tlm_emu_switch, .-tlm_emu_switch\n");
#endif
#ifdef TLM_EMU_ASM_SWITCH
extern "C" __attribute__((visibility("hidden"))) void tlm_emu_switch(void **save, void *to);
#endif

// Saves the running context into `from` and resumes `to`. The asm keeps the
// compiler from caching shared memory across the switch.
inline void switch_context(Context &from, Context &to) {
    __asm__ __volatile__("" ::: "memory");
#ifdef TLM_EMU_ASM_SWITCH
    tlm_emu_switch(&from.sp, to.sp);
#else
    swapcontext(&from.uc, &to.uc);
#endif
    __asm__ __volatile__("" ::: "memory");
}

// The fiber running this code: its slot holds the frame.
inline Fiber &self() { return fiber_in_slot((uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)(SLOT_BYTES - 1)); }

const char *op_name(WarpOp op) {
    switch (op) {
    case WarpOp::shuffle: return "warp shuffle";
    case WarpOp::vote: return "warp vote";
    case WarpOp::mma: return "mma.sync";
    case WarpOp::ldmatrix: return "ldmatrix";
    default: return "__syncwarp";
    }
}

// Ends the launch with a message; called on a fiber, which is abandoned
// (restarted from the top before the next launch).
[[noreturn]] __attribute__((format(printf, 2, 3))) void fail(Fiber &me, const char *fmt, ...) {
    State &s = *me.state;
    if (s.errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s.err, s.errlen, fmt, ap);
        va_end(ap);
    }
    s.failed = true;
    switch_context(me.context, s.scheduler);
    __builtin_unreachable();
}

[[noreturn]] void fail_lane(Fiber &me, const char *what, unsigned warp, unsigned lane, const char *why) {
    fail(me, "%s in kernel %s: lane %u of warp %u of block (%u,%u,%u) %s", what, me.state->kernel, lane, warp,
         me.block_idx.x, me.block_idx.y, me.block_idx.z, why);
}

// Switches from fiber `me` (no longer running) to the next runnable one in
// round-robin order, or back to the scheduler when none is (the block has
// finished, or is stuck). Returns when `me` is resumed. Not inlined, to keep
// the kernels' own code small.
__attribute__((noinline)) void switch_away(Fiber &me) {
    State &s = *me.state;
    if (!s.runnable) {
        switch_context(me.context, s.scheduler);
        return;
    }
    if (s.by_warp) {
        // the warp's other lanes first, in the block's order
        unsigned first = me.linear / WARP * WARP, lane = me.linear - first;
        for (unsigned k = 1; k < WARP; k++) {
            unsigned l = first + (s.descending ? lane + WARP - k : lane + k) % WARP;
            if (s.wait[l] == Wait::running) {
                switch_context(me.context, s.fibers[l]->context);
                return;
            }
        }
        // none: on to the next warp's threads, below
    }
    unsigned next = me.linear;
    if (s.descending) {
        do next = (next ? next : s.threads) - 1;
        while (s.wait[next] != Wait::running);
    } else {
        do {
            if (++next == s.threads) next = 0;
        } while (s.wait[next] != Wait::running);
    }
    switch_context(me.context, s.fibers[next]->context);
}

// Releases the threads waiting at __syncthreads; returns what each of them
// gets: the true votes (low half) and the arrivals (high half).
uint64_t release_barrier(State &s) {
    uint64_t outcome = s.barrier_votes | (uint64_t)s.at_barrier << 32;
    for (unsigned i = 0; i < s.threads; i++) {
        if (s.wait[i] == Wait::barrier) {
            s.wait[i] = Wait::running;
            s.result[i] = outcome;
            s.runnable++;
        }
    }
    for (unsigned w = 0; w < s.threads / WARP; w++) s.warps[w].at_barrier = 0;
    s.at_barrier = 0;
    s.barrier_votes = 0;
    return outcome;
}

// __syncthreads with a predicate: returns release_barrier's outcome.
inline uint64_t barrier(bool vote) {
    Fiber &me = self();
    State &s = *me.state;
    unsigned lane = me.linear % WARP, warp = me.linear / WARP;
    Warp &w = s.warps[warp];
    if (w.mask >> lane & 1) fail_lane(me, op_name(w.op), warp, lane, "waits at __syncthreads");
    s.barrier_votes += vote;
    if (++s.at_barrier == s.live) return release_barrier(s); // the last to arrive goes on
    w.at_barrier |= 1u << lane;
    s.wait[me.linear] = Wait::barrier;
    s.runnable--;
    switch_away(me);
    return s.result[me.linear];
}

// Adds the calling lane to the warp operation over `mask` (its operand in
// value, the lane it reads in src_lane), after checking that it can
// complete; true when it is the last lane of the mask to arrive.
inline bool warp_arrive(Fiber &me, WarpOp op, unsigned mask, uint64_t value, unsigned src_lane) {
    State &s = *me.state;
    unsigned lane = me.linear % WARP, warp = me.linear / WARP, bit = 1u << lane;
    Warp &w = s.warps[warp];
    if (!(mask & bit)) fail_lane(me, op_name(op), warp, lane, "is not in the mask it passes");
    if (w.mask && (w.mask != mask || w.op != op)) {
        fail(me,
             "%s in kernel %s: lanes of warp %u of block (%u,%u,%u) are at different warp operations (%s with mask "
             "0x%08x and %s with mask 0x%08x)",
             op_name(op), s.kernel, warp, me.block_idx.x, me.block_idx.y, me.block_idx.z, op_name(w.op), w.mask,
             op_name(op), mask);
    }
    if (unsigned gone = mask & w.exited) fail_lane(me, op_name(op), warp, (unsigned)__builtin_ctz(gone), "has exited");
    if (unsigned waiting = mask & w.at_barrier)
        fail_lane(me, op_name(op), warp, (unsigned)__builtin_ctz(waiting), "waits at __syncthreads");
    s.value[me.linear] = value;
    s.src_lane[me.linear] = (unsigned char)src_lane;
    w.mask = mask;
    w.op = op;
    w.arrived |= bit;
    return w.arrived == mask;
}

// Parks the calling lane until the last lane of its warp operation
// completes it.
inline void warp_wait(Fiber &me) {
    State &s = *me.state;
    s.wait[me.linear] = Wait::warp;
    s.runnable--;
    switch_away(me);
}

// Called by the last lane to arrive, once the operation's results are
// written: the other lanes run again, and the warp is free.
inline void warp_release(Fiber &me) {
    State &s = *me.state;
    unsigned warp = me.linear / WARP, first = warp * WARP;
    Warp &w = s.warps[warp];
    for (unsigned m = w.mask & ~(1u << me.linear % WARP); m; m &= m - 1) {
        s.wait[first + __builtin_ctz(m)] = Wait::running;
        s.runnable++;
    }
    w.mask = w.arrived = 0;
    w.op = WarpOp::none;
}

// Gives the calling lane's value (and the lane it reads) to a warp
// operation over `mask`, waits until every lane of the mask is there, and
// returns the lane's result: the value of its source lane (shuffle) or the
// mask of lanes that voted true (vote, sync).
inline uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t value, unsigned src_lane) {
    Fiber &me = self();
    State &s = *me.state;
    if (!warp_arrive(me, op, mask, value, src_lane)) {
        warp_wait(me);
        return s.result[me.linear];
    }
    // The last lane to arrive completes the operation for all of them.
    unsigned warp = me.linear / WARP, first = warp * WARP;
    if (op == WarpOp::shuffle) {
        for (unsigned m = mask; m; m &= m - 1) {
            unsigned l = (unsigned)__builtin_ctz(m);
            if (!(mask >> s.src_lane[first + l] & 1))
                fail_lane(me, "warp shuffle", warp, l, "reads a lane outside the mask");
        }
        for (unsigned m = mask; m; m &= m - 1) {
            unsigned t = first + (unsigned)__builtin_ctz(m);
            s.result[t] = s.value[first + s.src_lane[t]];
        }
    } else {
        uint64_t votes = 0;
        for (unsigned m = mask; m; m &= m - 1)
            if (s.value[first + __builtin_ctz(m)]) votes |= 1u << __builtin_ctz(m);
        for (unsigned m = mask; m; m &= m - 1) s.result[first + __builtin_ctz(m)] = votes;
    }
    warp_release(me);
    return s.result[me.linear];
}

// ---- The warp-matrix collectives: mma.sync and ldmatrix ----
// On a GPU these are single instructions of the whole warp (.sync.aligned:
// all 32 lanes execute the same one), each lane holding a fixed part of
// each matrix in its registers. Here the last lane to arrive gathers every
// lane's registers, builds the matrices by the PTX ISA's fragment layouts,
// computes, and scatters each lane's part of the result, so a kernel that
// puts an element in the wrong lane's register computes a wrong product
// here as on the hardware. A lane missing (returned, at __syncthreads, at
// another warp operation) is an error, as for the shuffles.

// One lane's operands of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"):
// with groupID g = lane >> 2 and threadID_in_group t = lane % 4,
//   A (16x16, row): a0..a7, two per .b32 register, the lower index in the
//     lower half: row g + 8 (i / 2 % 2), column 2t + i % 2 + 8 (i / 4);
//   B (16x8, col): b0..b3: row 2t + i % 2 + 8 (i / 2), column g;
//   C, D (16x8): c0..c3: row g + 8 (i / 2), column 2t + i % 2.
struct MmaLane {
    const uint32_t *a; // 4 registers
    const uint32_t *b; // 2 registers
    const float *c;    // 4
    float *d;          // 4
};
inline unsigned mma_a_row(unsigned lane, unsigned i) { return lane / 4 + 8 * (i / 2 % 2); }
inline unsigned mma_a_col(unsigned lane, unsigned i) { return 2 * (lane % 4) + i % 2 + 8 * (i / 4); }
inline unsigned mma_b_row(unsigned lane, unsigned i) { return 2 * (lane % 4) + i % 2 + 8 * (i / 2); }
inline unsigned mma_cd_row(unsigned lane, unsigned i) { return lane / 4 + 8 * (i / 2); }
inline unsigned mma_cd_col(unsigned lane, unsigned i) { return 2 * (lane % 4) + i % 2; }
inline float bf16_half(uint32_t reg, unsigned i) {
    uint32_t bits = (i % 2 ? reg >> 16 : reg & 0xffffu) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// D = A B + C. Each element: the 16 products (exact: bf16 times bf16 fits
// a double, as it fits a float) summed in double in k order, C added, and
// the sum rounded once to fp32 (nearest even). The hardware's tensor cores
// add in their own order and internal precision (not IEEE fp32 step by
// step): the results agree to a few fp32 roundings of sum |a b| + |c|, not
// bit for bit (docs/gpu.md, "Tensor cores").
void complete_mma(Fiber &me) {
    State &s = *me.state;
    unsigned first = me.linear / WARP * WARP;
    float A[16][16], B[16][8], C[16][8];
    for (unsigned l = 0; l < WARP; l++) {
        const MmaLane &x = *reinterpret_cast<const MmaLane *>((uintptr_t)s.value[first + l]);
        for (unsigned i = 0; i < 8; i++) A[mma_a_row(l, i)][mma_a_col(l, i)] = bf16_half(x.a[i / 2], i);
        for (unsigned i = 0; i < 4; i++) B[mma_b_row(l, i)][l / 4] = bf16_half(x.b[i / 2], i);
        for (unsigned i = 0; i < 4; i++) C[mma_cd_row(l, i)][mma_cd_col(l, i)] = x.c[i];
    }
    float D[16][8];
    for (unsigned r = 0; r < 16; r++)
        for (unsigned c = 0; c < 8; c++) {
            double sum = 0.0;
            for (unsigned k = 0; k < 16; k++) sum += (double)A[r][k] * (double)B[k][c];
            D[r][c] = (float)(sum + (double)C[r][c]);
        }
    for (unsigned l = 0; l < WARP; l++) {
        const MmaLane &x = *reinterpret_cast<const MmaLane *>((uintptr_t)s.value[first + l]);
        for (unsigned i = 0; i < 4; i++) x.d[i] = D[mma_cd_row(l, i)][mma_cd_col(l, i)];
    }
}

// Whether [p, p + n) lies in shared memory: the launch's dynamic shared
// memory, or the kernels' __shared__ variables (this module's thread-local
// block, poison_shared; true where that is unknown).
inline bool in_shared(const State &s, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p, dyn = (uintptr_t)s.dynamic_shared;
    if (s.dynamic_size && a >= dyn && a + n <= dyn + s.dynamic_size) return true;
    return !s.tls_data || (a >= (uintptr_t)s.tls_data && a + n <= (uintptr_t)s.tls_data + s.tls_size);
}

// One lane's part of ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 (PTX
// ISA, "Warp-level matrix load instruction: ldmatrix"): lane 8 i + r gives
// the address of row r of matrix i (8 rows of 8 b16, 16 bytes each, 16-byte
// aligned, in shared memory); register i of lane l receives matrix i's row
// l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (the lower column in the lower
// half), or with .trans its column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
struct LdmatrixLane {
    const void *row;
    uint32_t *r; // 4 registers
    bool trans;
};

void complete_ldmatrix(Fiber &me) {
    State &s = *me.state;
    unsigned warp = me.linear / WARP, first = warp * WARP;
    auto lane = [&](unsigned l) -> const LdmatrixLane & {
        return *reinterpret_cast<const LdmatrixLane *>((uintptr_t)s.value[first + l]);
    };
    uint16_t M[4][8][8];
    for (unsigned l = 0; l < WARP; l++) {
        if (lane(l).trans != lane(0).trans) fail_lane(me, "ldmatrix", warp, l, "disagrees with lane 0 on .trans");
        uintptr_t row = (uintptr_t)lane(l).row;
        if (row % 16) fail_lane(me, "ldmatrix", warp, l, "gives a row address that is not 16-byte aligned");
        if (!in_shared(s, lane(l).row, 16))
            fail_lane(me, "ldmatrix", warp, l, "gives a row address outside shared memory");
        memcpy(M[l / 8][l % 8], lane(l).row, 16);
    }
    for (unsigned l = 0; l < WARP; l++) {
        unsigned g = l / 4, t = l % 4;
        for (unsigned i = 0; i < 4; i++) {
            uint32_t lo = lane(l).trans ? M[i][2 * t][g] : M[i][g][2 * t];
            uint32_t hi = lane(l).trans ? M[i][2 * t + 1][g] : M[i][g][2 * t + 1];
            lane(l).r[i] = lo | hi << 16;
        }
    }
}

// The calling lane's part of a warp-matrix operation (record: its
// MmaLane or LdmatrixLane, alive on its stack until all have arrived).
inline void warp_matrix(WarpOp op, void *record) {
    Fiber &me = self();
    if (!warp_arrive(me, op, 0xffffffffu, (uint64_t)(uintptr_t)record, 0)) {
        warp_wait(me);
        return;
    }
    if (op == WarpOp::mma) complete_mma(me);
    else complete_ldmatrix(me);
    warp_release(me);
}

// ---- cp.async: each copy waits in its thread's queue until a wait_group
// covers its group, and is made then ----

inline void make_copy(const AsyncCopy &c) {
    memcpy(c.dst, c.src, c.src_bytes);
    memset(static_cast<char *>(c.dst) + c.src_bytes, 0, 16 - c.src_bytes);
}

void cp_async(void *dst, const void *src, unsigned src_bytes) {
    Fiber &me = self();
    State &s = *me.state;
    const char *why = nullptr;
    unsigned t = me.linear;
    if ((uintptr_t)dst % 16 || (uintptr_t)src % 16) why = "gives an address that is not 16-byte aligned";
    else if (!in_shared(s, dst, 16)) why = "gives a destination outside shared memory";
    else if (src_bytes > 16) why = "copies more than 16 bytes";
    else if (s.async_pending[t] == MAX_ASYNC) why = "has 64 copies in flight (no wait_group)";
    if (why)
        fail(me, "cp.async in kernel %s: thread %u of block (%u,%u,%u) %s", s.kernel, t, me.block_idx.x, me.block_idx.y,
             me.block_idx.z, why);
    AsyncCopy c{dst, src, src_bytes, s.async_committed[t]};
    if (s.descending) make_copy(c); // landing at once (the comment at the top)
    else s.async_copies[t][s.async_pending[t]++] = c;
}

// cp.async.wait_group n: makes the copies of every committed group but the
// newest n, in the order issued.
void cp_async_wait(unsigned n) {
    Fiber &me = self();
    State &s = *me.state;
    unsigned t = me.linear, kept = 0;
    unsigned done_below = s.async_committed[t] > n ? s.async_committed[t] - n : 0;
    for (unsigned i = 0; i < s.async_pending[t]; i++) {
        AsyncCopy c = s.async_copies[t][i];
        if (c.group >= done_below) {
            s.async_copies[t][kept++] = c;
            continue;
        }
        make_copy(c);
    }
    s.async_pending[t] = kept;
}

// Fiber `me`'s thread has returned.
void thread_exit(Fiber &me) {
    State &s = *me.state;
    unsigned lane = me.linear % WARP, warp = me.linear / WARP;
    Warp &w = s.warps[warp];
    if (w.mask >> lane & 1) fail_lane(me, op_name(w.op), warp, lane, "has exited");
    w.exited |= 1u << lane;
    s.wait[me.linear] = Wait::done;
    s.live--;
    s.runnable--;
    if (s.at_barrier && s.at_barrier == s.live) release_barrier(s);
}

// Every fiber runs this: one CUDA thread per resumption.
[[noreturn]] void fiber_main() {
    for (;;) {
        Fiber &me = self();
        me.parked = false;
        me.state->body(me.state->body_args);
        thread_exit(me);
        me.parked = true;
        switch_away(me);
    }
}

// Makes fiber i (its slot writable) start at the top of fiber_main when
// next resumed.
void start_fiber(State &s, unsigned i) {
    char *slot = s.slots[i];
    Fiber &f = fiber_in_slot((uintptr_t)slot);
    f.state = &s;
    f.parked = true;
    s.fibers[i] = &f;
    // Below the Fibers; the stack tops too differ by a few cache lines, so
    // that the same frames of consecutive fibers use different cache sets.
    uintptr_t top = ((uintptr_t)slot + SLOT_BYTES - FIBER_AREA - (i % 16) * 64) & ~(uintptr_t)15;
#if defined(TLM_EMU_ASM_SWITCH) && defined(__x86_64__)
    void **sp = reinterpret_cast<void **>(top);
    *--sp = nullptr;                                  // fiber_main's return address: none
    *--sp = reinterpret_cast<void *>(&fiber_main);    // where tlm_emu_switch returns to
    for (int r = 0; r < 6; r++) *--sp = nullptr;      // rbp, rbx, r12-r15
    f.context.sp = sp;
#elif defined(TLM_EMU_ASM_SWITCH) && defined(__aarch64__)
    void **sp = reinterpret_cast<void **>(top - 160); // the frame tlm_emu_switch pops
    memset(sp, 0, 160);
    sp[11] = reinterpret_cast<void *>(&fiber_main); // x30
    f.context.sp = sp;
#else
    long page = sysconf(_SC_PAGESIZE);
    getcontext(&f.context.uc);
    f.context.uc.uc_stack.ss_sp = slot + page;
    f.context.uc.uc_stack.ss_size = top - (uintptr_t)(slot + page);
    f.context.uc.uc_link = nullptr;
    makecontext(&f.context.uc, fiber_main, 0);
#endif
}

void free_state(void *p) {
    State *st = static_cast<State *>(p);
    for (unsigned i = 0; i < st->n_ready; i++) munmap(st->slots[i], SLOT_BYTES);
    free(st->dynamic_shared);
    free(st);
}

} // namespace
} // namespace tlm_emu
extern "C" __attribute__((visibility("hidden"))) void *__dso_handle;
namespace tlm_emu {
namespace {

// The calling thread's State, or null when memory runs out. Freed when the
// thread exits (which keeps this module loaded until then).
State *thread_state() {
    if (this_thread) return this_thread;
    State *st = static_cast<State *>(calloc(1, sizeof(State)));
    if (st && __cxxabiv1::__cxa_thread_atexit(free_state, st, &__dso_handle) != 0) {
        free(st);
        st = nullptr;
    }
    return this_thread = st;
}

#ifdef __GLIBC__
struct TlsSearch {
    uintptr_t code; // an address inside this module
    char *data;
    size_t size;
};
int find_module_tls(struct dl_phdr_info *info, size_t, void *p) {
    TlsSearch &search = *static_cast<TlsSearch *>(p);
    bool ours = false;
    size_t size = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && search.code >= start && search.code < start + ph.p_memsz) ours = true;
        if (ph.p_type == PT_TLS) size = ph.p_memsz;
    }
    if (!ours) return 0;
    search.data = static_cast<char *>(info->dlpi_tls_data);
    search.size = size;
    return 1;
}
#endif

// Sets every byte of the kernels' __shared__ variables to 0xff (a float
// NaN, an int -1) before each block, as a GPU's shared memory holds garbage
// when a block starts: a read before the block's own write shows up. They
// are this module's thread-local block, less this_thread.
void poison_shared(State &st) {
    if (st.dynamic_size) memset(st.dynamic_shared, 0xff, st.dynamic_size);
#ifdef __GLIBC__
    if (!st.tls_found) {
        TlsSearch search{(uintptr_t)&poison_shared, nullptr, 0};
        dl_iterate_phdr(find_module_tls, &search);
        st.tls_data = search.data;
        st.tls_size = search.size;
        st.tls_found = true;
    }
    if (st.tls_data) {
        memset(st.tls_data, 0xff, st.tls_size);
        this_thread = &st;
    }
#else
    (void)st;
#endif
}

// Maps a slot aligned to its size (from a mapping twice as large, trimmed),
// all but its lowest page writable: the guard, which an overflow hits.
char *map_slot() {
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(nullptr, 2 * SLOT_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    uintptr_t start = (uintptr_t)p, slot = (start + SLOT_BYTES - 1) & ~(uintptr_t)(SLOT_BYTES - 1);
    if (slot > start) munmap(p, slot - start);
    if (start + 2 * SLOT_BYTES > slot + SLOT_BYTES)
        munmap(reinterpret_cast<void *>(slot + SLOT_BYTES), start + 2 * SLOT_BYTES - (slot + SLOT_BYTES));
    char *s = reinterpret_cast<char *>(slot);
    if (mprotect(s + page, SLOT_BYTES - (size_t)page, PROT_READ | PROT_WRITE)) {
        munmap(s, SLOT_BYTES);
        return nullptr;
    }
    return s;
}

// Makes fibers [0, n) ready; false (with the message) when memory runs out.
bool ready_fibers(State &st, unsigned n) {
    for (; st.n_ready < n; st.n_ready++) {
        st.slots[st.n_ready] = map_slot();
        if (!st.slots[st.n_ready]) {
            snprintf(st.err, st.errlen, "kernel %s: cannot map the emulator's thread stacks (%s)", st.kernel,
                     strerror(errno));
            return false;
        }
        start_fiber(st, st.n_ready);
    }
    return true;
}

// Runs one block; false when the launch failed (st.err says why).
bool run_block(State &st, const uint3 &block_idx, bool descending, bool by_warp) {
    poison_shared(st);
    for (unsigned i = 0; i < st.threads; i++) {
        st.wait[i] = Wait::running;
        st.fibers[i]->block_idx = block_idx;
        st.async_pending[i] = st.async_committed[i] = 0; // a block's copies left in flight are dropped
    }
    for (unsigned w = 0; w < st.threads / WARP; w++) st.warps[w] = Warp{};
    st.live = st.runnable = st.threads;
    st.at_barrier = st.barrier_votes = 0;
    st.descending = descending;
    st.by_warp = by_warp;
    switch_context(st.scheduler, st.fibers[descending ? st.threads - 1 : 0]->context);
    if (st.failed) return false;
    if (st.live) {
        // Not reached while every stuck case is reported where it arises; kept
        // so that a missed case is an error, never a hang.
        snprintf(st.err, st.errlen, "kernel %s: block (%u,%u,%u) cannot finish: %u threads wait forever", st.kernel,
                 block_idx.x, block_idx.y, block_idx.z, st.live);
        return false;
    }
    return true;
}

bool dims_ok(const char *kernel, const unsigned grid[3], const unsigned block[3], char *err, size_t errlen) {
    const char *why = nullptr;
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2]) why = "has a zero dimension";
    else if (threads > MAX_THREADS) why = "has more than 1024 threads per block";
    else if (block[0] % WARP) why = "has a blockDim.x that is not a multiple of 32";
    else if (grid[0] > 0x7fffffffu || grid[1] > 65535 || grid[2] > 65535)
        why = "has a grid over CUDA's limits (2^31-1, 65535, 65535)";
    if (!why) return true;
    if (errlen)
        snprintf(err, errlen, "kernel %s: launch of grid (%u,%u,%u) and block (%u,%u,%u) %s", kernel, grid[0], grid[1],
                 grid[2], block[0], block[1], block[2], why);
    return false;
}

// A step coprime with `blocks`, near blocks / golden ratio: walking the
// blocks by it visits each once, in an order far from 0, 1, 2, ...
uint64_t block_step(uint64_t blocks) {
    if (blocks <= 2) return 1;
    uint64_t s = (uint64_t)((double)blocks * 0.6180339887498949) | 1;
    for (;; s--) {
        uint64_t a = blocks, b = s;
        while (b) {
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        if (a == 1) return s;
    }
}

// Makes the thread's dynamic shared memory `bytes` long (16-byte aligned,
// as CUDA's; kept for later launches); false when memory runs out.
bool size_dynamic_shared(State &st, unsigned bytes) {
    if (bytes > st.dynamic_capacity) {
        size_t capacity = ((size_t)bytes + 4095) & ~(size_t)4095;
        void *p = aligned_alloc(128, capacity);
        if (!p) return false;
        free(st.dynamic_shared);
        st.dynamic_shared = static_cast<unsigned char *>(p);
        st.dynamic_capacity = capacity;
    }
    st.dynamic_size = bytes;
    return true;
}

int run_grid(const char *kernel, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
             void (*body)(void *), void *body_args, char *err, size_t errlen) {
    if (!dims_ok(kernel, grid, block, err, errlen)) return 1;
    State *state = thread_state();
    if (!state) {
        if (errlen) snprintf(err, errlen, "kernel %s: out of memory for the emulator's state", kernel);
        return 1;
    }
    State &st = *state;
    if (st.active) {
        if (errlen) snprintf(err, errlen, "kernel %s: launched from inside a running kernel", kernel);
        return 1;
    }
    st.kernel = kernel;
    st.err = err;
    st.errlen = errlen;
    st.failed = false;
    unsigned threads = block[0] * block[1] * block[2];
    if (!ready_fibers(st, threads)) return 1;
    if (!size_dynamic_shared(st, shared_bytes)) {
        if (errlen)
            snprintf(err, errlen, "kernel %s: out of memory for %u bytes of dynamic shared memory", kernel,
                     shared_bytes);
        return 1;
    }
    for (unsigned i = 0; i < threads; i++) {
        Fiber &f = *st.fibers[i];
        f.linear = i;
        f.thread_idx = uint3{i % block[0], i / block[0] % block[1], i / (block[0] * block[1])};
        f.block_dim = dim3(block[0], block[1], block[2]);
        f.grid_dim = dim3(grid[0], grid[1], grid[2]);
    }
    st.active = true;
    st.body = body;
    st.body_args = body_args;
    st.threads = threads;
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2], step = block_step(blocks), b = blocks - 1;
    bool ok = true;
    for (uint64_t i = 0; i < blocks && ok; i++) {
        uint3 idx{(unsigned)(b % grid[0]), (unsigned)(b / grid[0] % grid[1]),
                  (unsigned)(b / ((uint64_t)grid[0] * grid[1]))};
        ok = run_block(st, idx, i % 2 == 1, i % 4 >= 2); // the four orders in turn (the comment at the top)
        b = b >= step ? b - step : b + blocks - step;
    }
    if (!ok) {
        // The fibers left inside the kernel start over from the top.
        for (unsigned i = 0; i < threads; i++)
            if (!st.fibers[i]->parked) start_fiber(st, i);
    }
    st.active = false;
    return ok ? 0 : 1;
}

template <class... A, size_t... I>
int launch_with(const char *kernel, void (*fn)(A...), const unsigned grid[3], const unsigned block[3],
                unsigned shared_bytes, void **args, char *err, size_t errlen, std::index_sequence<I...>) {
    struct Call {
        void (*fn)(A...);
        std::tuple<std::decay_t<A>...> values;
        static void run(void *p) {
            Call *c = static_cast<Call *>(p);
            std::apply(c->fn, c->values);
        }
    };
    (void)args;
    Call call{fn, std::tuple<std::decay_t<A>...>(*static_cast<const std::decay_t<A> *>(args[I])...)};
    return run_grid(kernel, grid, block, shared_bytes, &Call::run, &call, err, errlen);
}

template <class... A>
int launch(const char *kernel, void (*fn)(A...), const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
           void **args, char *err, size_t errlen) {
    return launch_with(kernel, fn, grid, block, shared_bytes, args, err, errlen, std::index_sequence_for<A...>{});
}

// The sizes of a kernel's parameters, in order: what the emulated device
// copies when it records a launch in a graph capture (CUDA copies the
// parameter values at capture, too). Returns their count.
template <class... A> int arg_sizes(void (*)(A...), size_t *sizes, int cap) {
    const size_t each[] = {sizeof(std::decay_t<A>)..., 0};
    const int n = (int)sizeof...(A);
    for (int i = 0; i < n && i < cap; i++) sizes[i] = each[i];
    return n;
}

template <class T> uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move up to 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T> T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

inline unsigned lane_id() { return self().linear % WARP; }

inline unsigned segment_width(int width) {
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail(self(), "warp shuffle in kernel %s: width %d is not a power of two in 1..32", self().state->kernel, width);
    return (unsigned)width;
}

} // namespace
} // namespace tlm_emu

// Read-only, as in CUDA; each fiber holds its own copy.
#define threadIdx (static_cast<const uint3 &>(::tlm_emu::self().thread_idx))
#define blockIdx (static_cast<const uint3 &>(::tlm_emu::self().block_idx))
#define blockDim (static_cast<const dim3 &>(::tlm_emu::self().block_dim))
#define gridDim (static_cast<const dim3 &>(::tlm_emu::self().grid_dim))

#define TLM_EMU_EXPORT(name)                                                                                 \
    extern "C" __attribute__((visibility("default"))) int tlm_emu_launch_##name(                             \
        const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void **args, char *err,      \
        size_t errlen);                                                                                      \
    extern "C" __attribute__((visibility("default"))) int tlm_emu_launch_##name(                             \
        const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void **args, char *err,      \
        size_t errlen) {                                                                                     \
        return ::tlm_emu::launch(#name, &name, grid, block, shared_bytes, args, err, errlen);                \
    }                                                                                                        \
    extern "C" __attribute__((visibility("default"))) int tlm_emu_arg_sizes_##name(size_t *sizes, int cap) { \
        return ::tlm_emu::arg_sizes(&name, sizes, cap);                                                      \
    }

// Synchronisation.
inline void __syncthreads() { tlm_emu::barrier(false); }
// The _and/_or/_count votes are over the threads that arrive (not those
// that have returned).
inline int __syncthreads_count(int predicate) { return (int)(uint32_t)tlm_emu::barrier(predicate != 0); }
inline int __syncthreads_and(int predicate) {
    uint64_t outcome = tlm_emu::barrier(predicate != 0);
    return (uint32_t)outcome == outcome >> 32;
}
inline int __syncthreads_or(int predicate) { return (uint32_t)tlm_emu::barrier(predicate != 0) != 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { tlm_emu::warp_exchange(tlm_emu::WarpOp::sync, mask, 1, 0); }
inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
[[noreturn]] inline void __trap() {
    tlm_emu::fail(tlm_emu::self(), "kernel %s: __trap in thread (%u,%u,%u) of block (%u,%u,%u)",
                  tlm_emu::self().state->kernel, threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y,
                  blockIdx.z);
}

// Warp shuffles: the value of another lane, as CUDA defines them for width
// segments (a source outside the range gives the caller's own value).
template <class T> inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
    unsigned w = tlm_emu::segment_width(width), lane = tlm_emu::lane_id();
    unsigned src = (lane & ~(w - 1)) + ((unsigned)src_lane & (w - 1));
    return tlm_emu::from_bits<T>(tlm_emu::warp_exchange(tlm_emu::WarpOp::shuffle, mask, tlm_emu::to_bits(var), src));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    unsigned w = tlm_emu::segment_width(width), lane = tlm_emu::lane_id();
    unsigned src = (lane & (w - 1)) >= delta ? lane - delta : lane;
    return tlm_emu::from_bits<T>(tlm_emu::warp_exchange(tlm_emu::WarpOp::shuffle, mask, tlm_emu::to_bits(var), src));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    unsigned w = tlm_emu::segment_width(width), lane = tlm_emu::lane_id();
    unsigned src = (uint64_t)(lane & (w - 1)) + delta < w ? lane + delta : lane;
    return tlm_emu::from_bits<T>(tlm_emu::warp_exchange(tlm_emu::WarpOp::shuffle, mask, tlm_emu::to_bits(var), src));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    unsigned w = tlm_emu::segment_width(width), lane = tlm_emu::lane_id();
    unsigned src = lane ^ ((unsigned)lane_mask & 31u);
    if (src > (lane | (w - 1))) src = lane; // a later segment: own value
    return tlm_emu::from_bits<T>(tlm_emu::warp_exchange(tlm_emu::WarpOp::shuffle, mask, tlm_emu::to_bits(var), src));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return (unsigned)tlm_emu::warp_exchange(tlm_emu::WarpOp::vote, mask, predicate != 0, 0);
}
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }

// The warp-matrix instructions as runtime/gpu/mma.cuh calls them on the
// emulated device (on a GPU it emits the PTX instructions instead).
inline void tlm_emu_mma_m16n8k16_bf16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    float out[4];
    tlm_emu::MmaLane lane{a, b, c, out};
    tlm_emu::warp_matrix(tlm_emu::WarpOp::mma, &lane);
    for (int i = 0; i < 4; i++) d[i] = out[i]; // d may be c: written after every lane has read
}
inline void tlm_emu_ldmatrix_x4(unsigned r[4], const void *row, bool trans) {
    tlm_emu::LdmatrixLane lane{row, r, trans};
    tlm_emu::warp_matrix(tlm_emu::WarpOp::ldmatrix, &lane);
}

// cp.async as runtime/gpu/mma.cuh calls it on the emulated device.
inline void tlm_emu_cp_async_16(void *dst, const void *src, unsigned src_bytes) {
    tlm_emu::cp_async(dst, src, src_bytes);
}
inline void tlm_emu_cp_async_commit() {
    tlm_emu::Fiber &me = tlm_emu::self();
    me.state->async_committed[me.linear]++;
}
inline void tlm_emu_cp_async_wait(unsigned n) { tlm_emu::cp_async_wait(n); }

// The launch's dynamic shared memory, as common.cuh's tlm::dynamic_shared
// and tlm::dynamic_shared_size call them on the emulated device.
inline unsigned char *tlm_emu_dynamic_shared() { return tlm_emu::self().state->dynamic_shared; }
inline unsigned tlm_emu_dynamic_shared_size() { return tlm_emu::self().state->dynamic_size; }

// Math beyond <cmath>: CUDA's fast and reinterpreting functions.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
// Float to int as the device converts: rounded (to nearest even, or toward
// zero), NaN to 0, out of range to the nearest end.
inline int __float2int_rz(float x) {
    return x != x ? 0 : x >= 2147483648.0f ? 2147483647 : x < -2147483648.0f ? (-2147483647 - 1) : (int)x;
}
inline int __float2int_rn(float x) { return __float2int_rz(nearbyintf(x)); }
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : x > 0.0f ? x : 0.0f; }
inline float __int_as_float(int x) { return tlm_emu::from_bits<float>((uint32_t)x); }
inline int __float_as_int(float x) { return (int)(uint32_t)tlm_emu::to_bits(x); }
inline float __uint_as_float(unsigned x) { return tlm_emu::from_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return (unsigned)tlm_emu::to_bits(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T> inline T __ldg(const T *p) { return *p; }

// CUDA's min and max overloads (the host has only std::min/std::max).
#define TLM_EMU_MIN_MAX(T)                           \
    inline T min(T a, T b) { return b < a ? b : a; } \
    inline T max(T a, T b) { return a < b ? b : a; }
TLM_EMU_MIN_MAX(int)
TLM_EMU_MIN_MAX(unsigned)
TLM_EMU_MIN_MAX(long)
TLM_EMU_MIN_MAX(unsigned long)
TLM_EMU_MIN_MAX(long long)
TLM_EMU_MIN_MAX(unsigned long long)
#undef TLM_EMU_MIN_MAX
inline long long min(int a, long long b) { return min((long long)a, b); }
inline long long min(long long a, int b) { return min(a, (long long)b); }
inline long long max(int a, long long b) { return max((long long)a, b); }
inline long long max(long long a, int b) { return max(a, (long long)b); }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// bfloat16 as cuda_bf16.h spells it, with the conversions of its host code
// (which match the device's cvt.rn.bf16.f32 bit for bit).
struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __nv_bfloat16;
inline __nv_bfloat16 __float2bfloat16_rn(float f);
inline __nv_bfloat16 __double2bfloat16(double d);
inline float __bfloat162float(__nv_bfloat16 b);
struct __attribute__((aligned(2))) __nv_bfloat16 {
  protected:
    unsigned short __x;

  public:
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x) {}
    __nv_bfloat16(double d) : __x(static_cast<__nv_bfloat16_raw>(__double2bfloat16(d)).x) {}
    constexpr operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
    operator float() const { return __bfloat162float(*this); }
    __nv_bfloat16 &operator=(float f) { return *this = __nv_bfloat16(f); }
    __nv_bfloat16 &operator=(double d) { return *this = __nv_bfloat16(d); }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return static_cast<__nv_bfloat16_raw>(b).x; }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return (short)static_cast<__nv_bfloat16_raw>(b).x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s}); }

// Round to nearest even; every NaN becomes the canonical 0x7fff.
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t x = (uint32_t)tlm_emu::to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(0x7fff);
    uint32_t rest = x << 16, r = x >> 16;
    if (rest > 0x80000000u || (rest == 0x80000000u && (r & 1))) r++;
    return __ushort_as_bfloat16((unsigned short)r);
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
// Toward zero (NaN to 0x7fff, as CUDA's host code).
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    uint32_t x = (uint32_t)tlm_emu::to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(0x7fff);
    return __ushort_as_bfloat16((unsigned short)(x >> 16));
}
// Double to float rounding to odd, then to bf16 to nearest even: one correct
// rounding of the double, as cuda_bf16.hpp's host code does.
inline __nv_bfloat16 __double2bfloat16(double d) {
    float f = (float)d;
    double back = (double)f;
    uint32_t u = (uint32_t)tlm_emu::to_bits(f);
    bool not_nan = (u << 1) <= 0xff000000u;
    if (d > 0.0 && back > d) u--;
    if (d < 0.0 && back < d) u--;
    if (back != d && not_nan) u |= 1u;
    return __float2bfloat16_rn(tlm_emu::from_bits<float>(u));
}
inline float __bfloat162float(__nv_bfloat16 b) {
    return tlm_emu::from_bits<float>((uint32_t)__bfloat16_as_ushort(b) << 16);
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
}
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __floats2bfloat162_rn(a, a); }
inline __nv_bfloat162 __float22bfloat162_rn(float2 a) { return __floats2bfloat162_rn(a.x, a.y); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162(lo, hi); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return float2{__bfloat162float(v.x), __bfloat162float(v.y)}; }

// bf16 arithmetic rounds once, as the device's bf16 instructions: the exact
// result rounded to double is rounded innocuously again to bf16 (53 bits are
// more than 2 * 8 + 2).
#define TLM_EMU_BF16_OP(op)                                                                   \
    inline __nv_bfloat16 operator op(const __nv_bfloat16 &a, const __nv_bfloat16 &b) {        \
        return __double2bfloat16((double)__bfloat162float(a) op(double) __bfloat162float(b)); \
    }                                                                                         \
    inline __nv_bfloat16 &operator op##=(__nv_bfloat16 & a, const __nv_bfloat16 & b) { return a = a op b; }
TLM_EMU_BF16_OP(+)
TLM_EMU_BF16_OP(-)
TLM_EMU_BF16_OP(*)
TLM_EMU_BF16_OP(/)
#undef TLM_EMU_BF16_OP
#define TLM_EMU_BF16_CMP(op)                                                  \
    inline bool operator op(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { \
        return __bfloat162float(a) op __bfloat162float(b);                    \
    }
TLM_EMU_BF16_CMP(==)
TLM_EMU_BF16_CMP(!=)
TLM_EMU_BF16_CMP(<)
TLM_EMU_BF16_CMP(<=)
TLM_EMU_BF16_CMP(>)
TLM_EMU_BF16_CMP(>=)
#undef TLM_EMU_BF16_CMP
inline __nv_bfloat16 operator-(const __nv_bfloat16 &a) {
    return __ushort_as_bfloat16((unsigned short)(__bfloat16_as_ushort(a) ^ 0x8000u));
}
inline __nv_bfloat16 operator+(const __nv_bfloat16 &a) { return a; }

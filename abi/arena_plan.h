/* The memory planner shared by tlmc (which stores a plan for the default
 * sizes in model.so) and the runtime (which plans again for other sizes):
 * every activation buffer gets an offset in one arena, and buffers whose
 * lifetimes (the ops that touch them) do not overlap share memory. */
#ifndef TLM_ARENA_PLAN_H
#define TLM_ARENA_PLAN_H

#include <stdint.h>
#include "tlm_abi.h"

enum { TLM_ARENA_ALIGN = 64 };

/* Bytes of buffer b for batch B and sequence length T (0 if it overflows). */
int64_t tlm_buffer_bytes(const tlm_abi_buffer *b, int64_t B, int64_t T);

/* Plans the buffers used by ops [0, nops): writes offsets[i] (bytes; -1 for a
 * buffer no op uses) and returns the arena size in bytes, or -1 on overflow
 * or out of memory. first/last (may be NULL) receive each buffer's
 * lifetime in op indices. */
int64_t tlm_plan_arena(const tlm_abi_buffer *buffers, int nbuffers, const tlm_abi_op *ops, int nops, int64_t B,
                       int64_t T, int64_t *offsets, int *first, int *last);

#endif

/*
** tracedir_internal.h -- what the trace reader (tracedir.c) and writer
** (tracewrite.c) share: the names of a trace's files and shape arithmetic.
*/
#ifndef SQ_TRACE_TRACEDIR_INTERNAL_H
#define SQ_TRACE_TRACEDIR_INTERNAL_H

#include <stdint.h>

/* dir/step-NNNNNN/weights.safetensors (worker < 0) or .../grads-wWW.safetensors,
** malloc'd; NULL when out of memory. */
char *sq_trace_step_file(const char *dir, uint32_t step, int worker);
/* dir/name, malloc'd. */
char *sq_trace_join(const char *dir, const char *name);
/* The product of shape[0..ndim) into *n; SQ_ERR_RANGE when it overflows 64
** bits. */
int sq_trace_shape_product(const uint64_t *shape, int ndim, uint64_t *n);

#endif

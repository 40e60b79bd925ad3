/*
** costmodel.h -- one training iteration of sharded data-parallel training at
** cluster scale: how long it takes under each quantization scheme, phase by
** phase, from the model's FLOPs, the platform's rates and the bytes the
** emulated world counts (README, "The cost model", explains every formula).
**
** Nothing here is fitted to a result: a platform is a handful of hardware
** figures (GPUs per node, link bandwidths and latencies, the achieved FLOP/s
** of one GPU, the quantization kernels' throughput), a model is its shape,
** and the bytes of each collective come from a dry sq_world of the data-
** parallel group's real topology, so the model and the harness can never
** disagree about what a scheme sends.
**
** Ranks are laid out as Megatron lays them out: tensor-parallel ranks
** innermost (consecutive GPUs of a node), then data-parallel, then pipeline
** stages. So a node holds k = min(TP, G) data-parallel groups with g = G/k
** GPUs each, and those k groups share the node's network cards.
*/
#ifndef SQ_COSTMODEL_H
#define SQ_COSTMODEL_H

#include "world/world.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A cluster. Bandwidths in bytes/s per direction, latencies in seconds. */
typedef struct sq_platform {
    char name[64];
    int nodes;             /* the cluster's size when no GPU count is given */
    int gpus_per_node;     /* G */
    double achieved_flops; /* FLOP/s one GPU reaches on the model's matrix products */
    double hbm_bw;         /* device memory bandwidth (the optimizer step) */
    double quant_bw;       /* quantization kernels, bytes read + written per second */
    double intra_bw;       /* one GPU's NVLink/NVSwitch bandwidth as a collective sees it */
    double intra_latency;  /* per step of an intra-node collective */
    int nics_per_node;
    double nic_bw;          /* line rate of one network card */
    double net_efficiency;  /* the fraction of the line rate all cards of a node reach together */
    double communicator_bw; /* the most one communicator moves through one node's cards; 0: no cap */
    double inter_latency;   /* per step of a collective across nodes */
} sq_platform;

/* A GPT-style decoder (Megatron's FLOP and parameter accounting). */
typedef struct sq_model_shape {
    char name[64];
    int layers, hidden, heads, vocab, seq;
} sq_model_shape;

typedef struct sq_parallel {
    int gpus;        /* every GPU of the job */
    int tp, pp;      /* tensor and pipeline parallel degrees */
    int micro_batch; /* sequences per micro-batch per data-parallel rank */
    int accum;       /* micro-batches per iteration (gradient accumulation) */
    int overlap;     /* 1: collectives overlap compute (Megatron's overlap-grad-reduce
                     ** and overlap-param-gather); 0: they run after it */
} sq_parallel;

/* One iteration, seconds per phase. compute + tp + bubble is the forward
** and backward pass; weight and grad are the exposed collective times
** (all of their time without overlap); iteration is the sum of all. */
typedef struct sq_cost {
    double compute, tp, bubble, weight, grad, quant, optimizer, iteration;
    double weight_comm, grad_comm; /* collective time before overlap */
    double tflops;                 /* model TFLOP/s per GPU (Megatron's throughput metric) */
    double model_flops;            /* FLOPs of one iteration's global batch */
    uint64_t params;               /* of the whole model */
    uint64_t params_per_rank;      /* the largest pipeline stage's share of one TP rank */
    int dp, dp_nodes, dp_per_node, groups_per_node;
    uint64_t inter_bytes_per_node; /* both collectives, sent through one node's cards */
    uint64_t intra_bytes_per_gpu;  /* both collectives, sent by the busiest GPU over NVLink */
    uint64_t quant_bytes_per_gpu;  /* read + written by the quantization kernels */
    sq_grad_mode grad_path;        /* what the gradient collective really ran */
} sq_cost;

/* Parameters of the model (vocabulary padded as Megatron pads it, to a
** multiple of 128 x tp) and of the largest stage's tensor-parallel rank. */
uint64_t sq_model_params(const sq_model_shape *m, int tp);
uint64_t sq_model_params_per_rank(const sq_model_shape *m, int tp, int pp);
/* Model FLOPs of one sequence, forward and backward (Megatron's formula). */
double sq_model_flops_per_seq(const sq_model_shape *m);

/* The figures a platform and a model must hold; 0 if fine, else -1 with the
** field at fault named in err. */
int sq_platform_validate(const sq_platform *p, char *err, size_t errlen);
int sq_model_shape_validate(const sq_model_shape *m, char *err, size_t errlen);

/* Predicts one iteration of m on p with par under scheme s. Returns 0, or
** -1 with a sentence in err (a layout that does not divide, TP across nodes). */
int sq_cost_iteration(const sq_platform *p, const sq_model_shape *m, const sq_parallel *par,
                      const sq_scheme *s, sq_cost *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

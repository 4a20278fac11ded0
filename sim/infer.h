/* SPDX-License-Identifier: Apache-2.0 */
/*
 * infer.h -- the inference cost model of libusim (`ulysses-sim infer`):
 * time to first token (prefill with context parallelism over C groups of W
 * tensor-parallel GPUs), time per output token (weights and KV cache read
 * from HBM, the merge collectives of decode context parallelism, the
 * tensor-parallel all-reduces), memory and KV-cache capacity per GPU.
 * doc/simulator.md, section "Inference", gives the equations.
 *
 * Times are integer picoseconds (collectives as the network simulation runs
 * them; kernels as sim/compute.c prices them, rounded to the picosecond).
 */
#ifndef USIM_INFER_H
#define USIM_INFER_H

#include "usim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decode schemes: tensor parallelism (KV heads split, replicated beyond
 * the KV heads); TP with decode context parallelism of degree D inside the
 * TP group (vLLM DCP: the KV replicas shard the tokens instead); Helix (KV
 * heads split T ways, tokens D ways; the T x D GPUs are then TP for the
 * output projection and the MLP). */
enum { USIM_INF_TP = 0, USIM_INF_TP_DCP, USIM_INF_HELIX, USIM_INF_NSCHEME };
const char *usim_inf_scheme_name(int s);   /* "tp", "tp-dcp", "helix" */
int usim_inf_scheme_parse(const char *s, int *scheme);

/* Context-parallel prefill methods. */
enum { USIM_PF_RING = 0, USIM_PF_ALLGATHER, USIM_PF_ULYSSES, USIM_PF_NMETHOD };
const char *usim_pf_method_name(int m);    /* "ring", "allgather", "ulysses" */
int usim_pf_method_parse(const char *s, int *m);

typedef struct usim_infer_job {
    int scheme;          /* USIM_INF_* */
    int tp;              /* T: TP degree (helix: attention TP, T <= KV heads) */
    int dcp;             /* D: tp-dcp: DCP degree inside the TP group; helix: KV-parallel degree */
    int prefill_cp;      /* C: context-parallel degree of the prefill (1: none) */
    int prefill_method;  /* USIM_PF_* */
    int64_t prompt;      /* tokens of the prompt */
    int64_t output;      /* tokens generated */
    int64_t batch;       /* sequences decoded together (concurrency) */
    int gpus;            /* all GPUs (a multiple of the instance's C x W); 0: one instance */
    int fp8_weights;     /* 1: linear layers in FP8 (one byte per weight and GEMM input, GEMMs at
                            twice the model dtype's peak); attention and the KV cache stay in it */
} usim_infer_job;

/* Decode merge collectives. */
enum { USIM_MG_Q_AG = 0, USIM_MG_LSE_AG, USIM_MG_O_RS, USIM_MG_OL_A2A, USIM_MG_CP, USIM_NMERGE };

enum { USIM_LIM_HBM_CAP = 0, USIM_LIM_HBM_BW, USIM_LIM_COMPUTE, USIM_LIM_NETWORK, USIM_NLIMIT };
const char *usim_limit_name(int l);        /* "HBM capacity", "HBM bandwidth", "compute", "network" */

typedef struct usim_infer_result {
    usim_infer_job job;
    int W;               /* GPUs of one tensor-parallel (weight) group: tp T, helix T x D */
    int kvp;             /* KV-parallel degree of decode: D (tp-dcp, helix) x C, else C */
    int inst_gpus;       /* GPUs of one instance: C x W */
    int replicas;        /* instances: gpus / inst_gpus */
    int64_t hq_l, hkv_l; /* query heads a GPU attends with in prefill and decode (tp-dcp: before
                            the q all-gather), KV heads it holds */
    int64_t context;     /* tokens in the cache at the decode step priced: prompt + output / 2 */
    /* prefill, one layer (ps) and the whole prompt */
    usim_time pf_gemm, pf_attn, pf_cp, pf_ar, pf_layer, pf_head, ttft;
    uint64_t pf_cp_bytes, pf_ar_bytes;  /* per GPU per layer sent (max over GPUs) */
    double pf_flops;                    /* per GPU, whole prefill */
    int pf_limit;                       /* USIM_LIM_COMPUTE or USIM_LIM_NETWORK */
    /* decode step, one layer (ps) and the whole step */
    usim_time dec_gemm, dec_attn, dec_merge[USIM_NMERGE], dec_ar, dec_layer, dec_head, tpot;
    usim_time dec_gemm_flop_ps, dec_gemm_byte_ps;  /* the GEMMs' compute and HBM terms, summed */
    uint64_t dec_merge_bytes[USIM_NMERGE];         /* per GPU per layer sent */
    uint64_t dec_ar_bytes;
    double dec_weight_bytes, dec_kv_bytes;         /* per GPU per step read from HBM */
    int dec_limit;                                 /* USIM_LIM_*: largest term of the step */
    double tokens_per_s_gpu;                       /* batch / tpot / inst_gpus */
    /* memory per GPU, bytes */
    double weights, kv, activations, reserved, total, hbm;
    double kv_bytes_per_token;          /* one token of context, one GPU's shard (averaged) */
    int64_t kv_capacity;                /* tokens of context the instance caches */
    int64_t max_context;                /* longest context per sequence at this batch */
    int fits;
    int mem_limit;                      /* 0 weights, 1 KV cache, 2 activations: the largest */
    int nwarn;
    char warn[4][240];
} usim_infer_result;

/* Validate the job against model and platform (EINVAL with a one-line
 * message naming the rule) and price it. */
int usim_infer_simulate(const usim_platform *p, const usim_model *m, const usim_infer_job *j,
                        usim_infer_result *r);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_train.h -- training a GPT-2 model with DeepSpeed-Ulysses sequence
 * parallelism over a DP x SP grid of MPI ranks (doc/train.md).
 *
 * World rank w is data-parallel rank w / SP and sequence-parallel rank
 * w % SP.  The global batch of `batch` rows of `seq` tokens is split into
 * contiguous row groups over DP ranks and contiguous token shards over SP
 * ranks (uneven splits allowed).  Everything but attention is local to the
 * shard; attention goes through uly_dist_* on the SP group.  The loss is the
 * sum over non-ignored tokens divided by their global count.
 *
 * Exact mode (the default): parameter gradients and the loss are summed in a
 * canonical order that does not depend on DP or SP, so losses and parameters
 * are bitwise identical for every grid with the same global batch (SP <=
 * canon_sp).  Fast mode: one MPI_Allreduce of each rank's local sums.
 *
 * All calls are collective over the communicator and return a uly_status;
 * messages via uly_last_error().
 */
#ifndef ULYSSES_TRAIN_H
#define ULYSSES_TRAIN_H

#include <mpi.h>
#include "ulysses.h"
#include "ulysses_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uly_gpt_config {
    int64_t vocab;     /* V */
    int64_t seq;       /* N: tokens per row, also the size of the position table */
    int64_t layers;    /* L */
    int64_t channels;  /* C, a multiple of heads */
    int64_t heads;     /* H query heads; head dim d = C / H */
    int64_t kv_heads;  /* Hkv key/value heads (GQA), H % Hkv == 0 */
} uly_gpt_config;

typedef struct uly_train_opts {
    int dp, sp;            /* grid, dp * sp = ranks (0, 0: dp 1, sp = ranks) */
    int64_t batch;         /* global rows per step, >= dp (0: dp) */
    int fast;              /* 1: MPI_Allreduce of local sums (not partition independent) */
    int canon_sp;          /* exact mode: token chunks cut at the shard boundaries of every
                              SP degree 1..canon_sp (0: 4); must be >= sp */
    double lr;             /* AdamW learning rate */
    double beta1, beta2, eps, weight_decay; /* 0, 0, 0, <0: 0.9, 0.95, 1e-8, 0 (wd 0 is allowed) */
    double grad_clip;      /* clip the global gradient norm to this (0: no clipping) */
    uint64_t seed;         /* parameter initialisation */
    uly_kernel_opts kernel;/* attention block sizes and threads */
    /* Memory-lean training (doc/train.md, "Memory-lean training"); exact
     * mode only, the losses and parameters stay bitwise those of the
     * untiled run.  Tiles and shards are whole canonical segments (row,
     * chunk) of this rank, in their order. */
    int tiled_loss;        /* 1: LM head and cross-entropy one segment at a time: the (tokens x
                              vocab) logits and their gradient are never whole */
    int tiled_mlp;         /* K > 0: MLP forward and backward in K shards of the rank's segments
                              (split as uly_split(segments, K, j); a rank with fewer segments uses
                              one shard each), the MLP hidden recomputed per shard in the backward;
                              0: untiled.  K > seq is refused. */
} uly_train_opts;

/* Defaults of the fields above (lr 1e-3, betas 0.9/0.95, eps 1e-8, wd 0.1, clip 1.0). */
void uly_train_opts_default(uly_train_opts *o);

typedef struct uly_train uly_train;

/* Create a trainer and initialise the parameters from opts->seed (GPT-2
 * init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, LN
 * weights 1).  Checks that every rank passed the same configuration. */
int uly_train_create(MPI_Comm comm, const uly_gpt_config *c, const uly_train_opts *o, uly_train **out);
void uly_train_free(uly_train *T);
/* Why the layers' attention contexts do not use every all-to-all mode (the
 * first layer's uly_dist_a2a_note that is not NULL: no shared-memory window
 * where /dev/shm or the address space cannot hold it, no cma), or NULL. */
const char *uly_train_a2a_note(const uly_train *T);
/* What uly_train_create allocates on rank `rank` of `size`, buffer by
 * buffer, appended to *out: the context, the parameters, gradients and
 * AdamW moments, the partial gradients and their exchange buffers, the
 * token losses, the activations and the gradient scratch (each by name),
 * the communicator and every layer's attention context (uly_dist_memory;
 * its shared-memory window as ULY_BUF_WINDOW).  The ULY_BUF_HEAP entries
 * sum to the bytes uly_train_create asks the allocation hooks for.  Not
 * counted: the document offsets a step with documents allocates.  Local,
 * no MPI; the same checks of the configuration as uly_train_create. */
int uly_train_memory_table(const uly_gpt_config *c, const uly_train_opts *o, int rank, int size, uly_bufs *out);
/* The total of that table (heap and window), for a memory check before creating. */
int uly_train_memory(const uly_gpt_config *c, const uly_train_opts *o, int rank, int size, uint64_t *bytes);

/* The MLP shards this rank uses: min(tiled_mlp, its segments), 0 when the
 * MLP is not tiled. */
int64_t uly_train_mlp_shards(const uly_train *T);

/* Rows [*row_begin, +*rows) and tokens [*tok_begin, +*toks) of this rank. */
void uly_train_shard(const uly_train *T, int64_t *row_begin, int64_t *rows, int64_t *tok_begin,
                     int64_t *toks);

typedef struct uly_train_stats {
    double loss;        /* sum of token losses / count (0 when count is 0) */
    int64_t count;      /* non-ignored tokens in the global batch */
    double grad_norm;   /* global gradient norm before clipping */
    double t_total, t_attn, t_a2a, t_reduce; /* seconds of this step on this rank */
} uly_train_stats;

/*
 * One step on this rank's shard.  tok, target, pos: (rows, toks) each, as
 * uly_shard_labels makes them (target -1: ignored).  doc_off: NULL, or
 * (batch, docs + 1) document offsets of every row of the global batch (the
 * same on all ranks; docs may change from step to step): attention stays
 * inside documents (the kernels' document mask).  update = 0 computes loss
 * and gradients only (uly_train_grads) and leaves the parameters.
 */
int uly_train_step(uly_train *T, const int32_t *tok, const int32_t *target, const int32_t *pos,
                   const int64_t *doc_off, int64_t docs, int update, uly_train_stats *st);

/* Per-token losses of the last step in global order (batch, seq): 0 for
 * ignored tokens.  Exact mode only (the fast mode does not gather them). */
int uly_train_token_losses(const uly_train *T, double *out);

/* This rank's part of an activation of the last step: (rows, toks, *width)
 * floats.  Names: "enc" (embedding output), per layer ("ln1", "q", "k",
 * "v", "atty", "res2", "ln2", "fch", "fchg", "res3"), and "lnf", "logits".
 * layer is ignored for the names without one.  Not kept (ULY_EINVAL):
 * "logits" with tiled_loss, "fch" and "fchg" with tiled_mlp. */
int uly_train_activation(const uly_train *T, const char *name, int64_t layer, const float **data,
                         int64_t *width);

/* Parameters, gradients of the last step, AdamW moments (all ranks hold
 * the full replicated vectors of uly_train_nparams floats). */
int64_t uly_train_nparams(const uly_train *T);
float *uly_train_params(uly_train *T);
const float *uly_train_grads(const uly_train *T);
/* Completed updates. */
int64_t uly_train_steps_done(const uly_train *T);

/* Named parameter tensors: 16 of them (wte, wpe, ln1_w, ..., lnf_b). */
int uly_train_param_count(void);
/* Name, rank and shape (up to 3 dims) and offset (in floats) of tensor i. */
int uly_train_param_info(const uly_train *T, int i, const char **name, int *ndim, int64_t shape[3],
                         int64_t *offset);

/* Checkpoint: a self-describing byte image (doc/train.md): magic, version,
 * configuration, step, parameters and AdamW moments, FNV-1a 64 checksum.
 * uly_train_checkpoint_write refuses (ULY_ENONFINITE, buf untouched) when a
 * parameter or moment is NaN or Inf. */
size_t uly_train_checkpoint_size(const uly_train *T);
int uly_train_checkpoint_write(const uly_train *T, void *buf, size_t len);
/* Restore from an image: checks magic, version, checksum and that the model
 * configuration matches (collective: every rank passes the same image). */
int uly_train_checkpoint_read(uly_train *T, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_TRAIN_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_infer.c -- `ulysses infer`: sequence-parallel inference on P MPI
 * ranks (P = 1 without mpirun): a prefill of a prompt of N tokens by any SP
 * method (--method), which leaves every rank its shard of the KV cache in
 * the chosen layout (--kv-layout), then T decode steps of one new token per
 * sequence by a decode scheme (--scheme dcp|helix: the partial outputs over
 * the KV shards merged in rank order, ulysses_infer.h, doc/inference.md).
 *
 * A numerics harness, not a language model: the inputs are random (seeded,
 * the same whatever P), the rows of one (B, N + T, H|Hkv, d) tensor of q, k
 * and v each -- the prompt's rows first, then one row per decode step (its
 * values set by the seed and the step's position).  Every rank fills only
 * the rows it holds.  Or they are the files of --q, --k, --v (attn_io.h:
 * .npy or .safetensors, bshd or bhsd), the whole sequences: rank 0 opens
 * them, takes the shape from them (the rows are N + T), reads every rank's
 * prompt tokens and sends them, and in each step sends every rank the
 * step's query heads and k, v; with --check rank 0 holds the whole inputs
 * and compares every rank's cache with them.  Rank 0 prints the phase times (prefill: the method's;
 * decode: query gather, attention, merge comm, merge, and the per-token
 * time), the bytes per decode step measured and planned
 * (uly_plan_decode_volume), the KV move of the prefill
 * (uly_plan_prefill_kv_volume) and the cache rows per rank; with --check it
 * recomputes every decode step in one process (uly_decode_emulate: bitwise)
 * and the whole sequence in float64 (uly_ref_fwd: within tolerance), and
 * every rank compares its cache with the layout.
 *
 * The steps, each agreed by every rank (drv_sync), as in cmd_attn.c:
 *   parse -> agree -> BLAS warm-up -> resolve (rank 0: the files' shapes)
 *   -> share the shape -> shape (description, plan, layout) -> plan (memory
 *   preflight, --out prepared) -> allocate -> create -> load -> prefill ->
 *   decode -> measure -> finite results -> gather -> check -> write (--out)
 *   -> report -> verdict.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <mpi.h>

#include "args.h"
#include "attn_io.h"
#include "base/base_json.h"
#include "base/base_progress.h"
#include "cli.h"
#include "drv.h"
#include "timing.h"
#include "ulysses_dist.h"
#include "ulysses_infer.h"

/* ---------------------------------------------------------------- options */

enum { T_Q, T_K, T_V, NIN };  /* the input tensors: which of input_value */

struct infer_cfg {
    int64_t prompt, generate, batch, heads, kv_heads, head_dim, window, seed, threads, udeg;
    int method, scheme, dtype, check, json, quiet, force, kv_kind;
    int seen_kv, seen_udeg, seen_prompt, seen_generate, seen_batch, seen_heads, seen_dim, seen_dtype, seen_layout, seen_seed;
    int64_t kv_block;
    const char *method_s, *layout_s;
    const char *fin[NIN], *fout;   /* --q, --k, --v (all or none), --out */
    int layout;                    /* ATTN_BSHD or ATTN_BHSD */
};

static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const method_names[] = {"ulysses", "ring", "zigzag", "allgather", "usp", NULL}; /* = ULY_METHOD_* */
static const char *const scheme_names[] = {"dcp", "helix", NULL};                                  /* = ULY_DECODE_* */
static const char *const layout_names[] = {"bshd", "bhsd", NULL};                                  /* = ATTN_BSHD, ATTN_BHSD */
static const char *const in_name[NIN] = {"--q", "--k", "--v"};

static const char synopsis[] =
    "infer [--prompt N] [--generate T] [--method M [--ulysses-degree U]] [--scheme dcp|helix]\n"
    "            [--kv-layout contiguous|round-robin:B] [--batch B] [--heads H] [--kv-heads Hkv] [--head-dim d]\n"
    "            [--window W] [--dtype f32|f64] [--seed S] [--threads T] [--check] [--json] [--quiet] [--force]\n"
    "            [--q F --k F --v F [--layout bshd|bhsd]] [--out F]\n"
    "Run under 'mpirun -np P' for P ranks.  A prefill of the prompt's N tokens by the sequence-parallel method M\n"
    "(causal attention) leaves each rank its shard of the KV cache in the layout of --kv-layout (contiguous: the\n"
    "prompt split in P parts, every generated token on the last rank; round-robin:B: blocks of B tokens dealt to\n"
    "the ranks in turn); then T decode steps of one new token per sequence: each rank attends the token's query\n"
    "over its shard, and the partial outputs are merged in rank order on the ranks owning the heads (dcp: the\n"
    "query and the LSEs all-gathered, the scaled partials reduce-scattered; helix: partials and LSEs in one\n"
    "all-to-all).  The inputs are random (seeded; the same for every P): a numerics harness, not a model; or the\n"
    "files of --q, --k, --v, each the whole sequence, prompt then generated tokens: q (B, N+T, H, d), k and v\n"
    "(B, N+T, Hkv, d), read by rank 0, which sends every rank its prompt tokens and each step's new token; B, H,\n"
    "Hkv, d and the dtype come from the files, and N + T is their rows: give --prompt N (T is the rest) or\n"
    "--generate T (N is the rest), or both adding up to the rows.\n"
    "--check: every decode step must be bitwise equal to one process (uly_decode_emulate), the prefill and every\n"
    "step within atol + rtol |ref| of the fp64 reference over the whole sequence, and every rank's cache must\n"
    "hold the layout's tokens.\n"
    "Exit status: 0 success, 1 run-time failure (memory, MPI, non-finite results, bytes moved unlike the plan,\n"
    "--check failed), 2 bad input (options, shapes, not enough memory, ranks started with different options).\n"
    "Every row and column of the output (phase, min/median/max, measured == expected, cache rows per rank,\n"
    "bitwise, max abs/rel err) is defined in doc/glossary.md.";

enum { NOPTS = 30 };

static void infer_options(struct infer_cfg *c, arg_opt *o)
{
    const arg_opt t[] = {
        {"prompt", ARG_INT, &c->prompt, 1, DRV_SEQ_MAX, "N", "tokens of the prompt per sequence, K/M/G suffixes allowed (default 256; with --q/--k/--v: the files' rows less --generate)", NULL, &c->seen_prompt},
        {"generate", ARG_INT, &c->generate, 1, DRV_SEQ_MAX, "T", "decode steps: tokens generated per sequence (default 16; with --q/--k/--v: the files' rows less --prompt)", NULL, &c->seen_generate},
        {"method", ARG_STR, &c->method_s, 0, 0, "M", "the prefill's method: ulysses (default), ring, zigzag, allgather or usp (doc/methods.md)", NULL, NULL},
        {"ulysses-degree", ARG_INT, &c->udeg, 1, 1 << 20, "U", "usp: ranks per all-to-all group, dividing P (default: the largest divisor of P that is <= H, printed)", NULL, &c->seen_udeg},
        {"scheme", ARG_CHOICE, &c->scheme, 0, 0, "S", "decode scheme: dcp (default; vLLM's decode context parallelism) or helix (TensorRT-LLM's)", scheme_names, NULL},
        {"kv-layout", ARG_STR, &c->layout_s, 0, 0, "L", "how the KV cache is sharded over the ranks: contiguous (default) or round-robin:B (blocks of B tokens in turn)", NULL, NULL},
        {"batch", ARG_INT, &c->batch, 1, 1 << 20, "B", "sequences decoded together (default 1; with files: theirs)", NULL, &c->seen_batch},
        {"heads", ARG_INT, &c->heads, 1, 1 << 20, "H", "query heads (default 8; with files: theirs)", NULL, &c->seen_heads},
        {"kv-heads", ARG_INT, &c->kv_heads, 1, 1 << 20, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, &c->seen_kv},
        {"head-dim", ARG_INT, &c->head_dim, 1, 1 << 16, "d", "head dimension (default 64; with files: theirs)", NULL, &c->seen_dim},
        {"window", ARG_INT, &c->window, 1, DRV_SEQ_MAX, "W", "sliding window: every token sees the W most recent keys, itself included", NULL, NULL},
        {"dtype", ARG_CHOICE, &c->dtype, 0, 0, "T", "element type, f32 (default; with files: f64 for f64 files, else f32) or f64", dtype_names, &c->seen_dtype},
        {"seed", ARG_INT, &c->seed, 0, INT64_MAX, "S", "seed of the random inputs (default 1; not with --q/--k/--v)", NULL, &c->seen_seed},
        {"threads", ARG_INT, &c->threads, 1, 1024, "T", "OpenMP threads per rank (default: OMP_NUM_THREADS, clamped to 4 per usable core and 1024)", NULL, NULL},
        {"q", ARG_STR, &c->fin[T_Q], 0, 0, "F.npy", "queries of the whole sequence, f16/bf16/f32/f64 (B, N+T, H, d) or (N+T, H, d) (see --layout), .npy or FILE.safetensors[:NAME]; read by rank 0", NULL, NULL},
        {"k", ARG_STR, &c->fin[T_K], 0, 0, "F.npy", "keys (B, N+T, Hkv, d), as --q", NULL, NULL},
        {"v", ARG_STR, &c->fin[T_V], 0, 0, "F.npy", "values (B, N+T, Hkv, d), as --q", NULL, NULL},
        {"layout", ARG_CHOICE, &c->layout, 0, 0, "L", "layout of the input and output tensors: bshd (B, N, H, d), default; bhsd (B, H, N, d), PyTorch's", layout_names, &c->seen_layout},
        {"out", ARG_STR, &c->fout, 0, 0, "F.npy", "write the decode outputs (B, T, H, d) (see --layout) as .npy or .safetensors (tensor o, the configuration in __metadata__)", NULL, NULL},
        {"check", ARG_FLAG, &c->check, 0, 0, NULL, "compare every decode step with one process (bitwise) and everything with the fp64 reference", NULL, NULL},
        {"quiet", ARG_FLAG, &c->quiet, 0, 0, NULL, "no progress line on stderr (drawn only when it is a terminal)", NULL, NULL},
        {"force", ARG_FLAG, &c->force, 0, 0, NULL, "run even when the memory preflight says it will not fit", NULL, NULL},
        {"json", ARG_FLAG, &c->json, 0, 0, NULL, "print one JSON object instead of tables", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    memcpy(o, t, sizeof t);
}

/* ---------------------------------------------------------------- the job */

/* Prefill phases (uly_sp_times' forward slots), by method; NULL: not used. */
#define NPP 4
static const char *const prefill_names[ULY_METHOD_COUNT][NPP] = {
    {"prefill a2a in (q,k,v)", "prefill attention", NULL, "prefill a2a out (o)"},
    {NULL, "prefill attention", "prefill ring wait", NULL},
    {NULL, "prefill attention", "prefill ring wait", NULL},
    {"prefill all-gather (k,v)", "prefill attention", NULL, NULL},
    {"prefill a2a in (q,k,v)", "prefill ring attention", "prefill ring wait", "prefill a2a out (o)"}};
/* Per rank: the prefill's phases, its wall time and the rest of it (the KV move). */
enum { PF_WALL = NPP, PF_REST, NPF };
/* Per rank and decode step: uly_infer_times and the step's wall time. */
enum { DC_QG, DC_ATTN, DC_MCOMM, DC_MERGE, DC_WALL, NDC };
static const char *const decode_names[NDC] = {"decode q gather", "decode attention", "decode merge comm",
                                              "decode merge", "decode token"};
static const char *const decode_keys[NDC] = {"q gather", "attention", "merge comm", "merge", "token"};

typedef struct errstat {
    double max_abs, max_ref, worst_tol;
    size_t nonfinite;
} errstat;
enum { E_PO, E_DO, E_DL, NERR };   /* prefill O, decode O, decode LSE */
static const char *const err_name[NERR] = {"prefill O", "decode O", "decode LSE"};
static const char *const err_key[NERR] = {"prefill_o", "decode_o", "decode_lse"};

typedef struct infer_job {
    struct infer_cfg c;
    uly_attn_desc a;                /* the prompt: seq = N */
    uly_attn_desc af;               /* the whole sequence: seq = N + T (the reference) */
    uly_sp_plan plan;
    uly_kv_layout L;
    uly_infer_opts io;
    int rank, P;
    int64_t N, T, Ntot;
    int ns;                         /* the prefill's token segments of this rank */
    int64_t tb[2], tc[2], n;
    int64_t h0, hn;                 /* this rank's heads (the decode's output) */
    size_t es;
    void *x[NIN], *o;               /* the prompt shards (B, n, H|Hkv, d), the prefill's output */
    void *tq, *tqr, *tk, *tv;       /* one step: q (B, H, d), this rank's heads (B, hn, d), k, v (B, Hkv, d) */
    void *dout, *dlse;              /* every step's output (T, B, hn, d), LSE (T, B, hn) */
    double *pf, *dc;                /* this rank's times: NPF; (T, NDC) */
    double *pall, *dall, *col;      /* rank 0: every rank's, and one column of them */
    char *stage;                    /* rank 0 with --check: one rank's results on their way */
    uly_infer *S;
    /* the input files (rank 0) */
    int files;                      /* --q, --k, --v given */
    int full_read;                  /* rank 0: the inputs read so far are whole in full_in */
    attn_in in[NIN];
    char fpath[NIN][4096];
    const char *fname[NIN];
    double *rd;                     /* rank 0: rows read from a file, as doubles (nrd rows of H d) */
    int64_t nrd;
    void *pack;                     /* rank 0: what one rank is sent */
    drv_out out[1];                 /* --out */
    /* measured */
    uly_decode_volume vol, want;
    uint64_t kv_sent, kv_recv, kv_want_sent, kv_want_recv;
    int vol_bad, rows_bad, cache_bad;   /* on some rank */
    int64_t *rows;                  /* rank 0: every rank's cache rows */
    stats pst[NPF], dst[NDC];
    /* rank 0, --check */
    void *full_in[NIN];             /* (B, Ntot, H|Hkv, d) */
    void *fpo, *fdo, *fdl;          /* gathered: prefill O (B, N, H, d), decode O (T, B, H, d), LSE (T, B, H) */
    int checked, bitwise, tol_ok;
    int64_t first_diff;             /* the first decode step not bitwise equal (-1: none) */
    errstat err[NERR];
    double atol, rtol;
} infer_job;

static void job_free(infer_job *J)
{
    for (int i = 0; i < NIN; i++) {
        attn_in_close(&J->in[i]);
        drv_free(J->x[i]);
        drv_free(J->full_in[i]);
    }
    drv_free(J->o); drv_free(J->tq); drv_free(J->tqr); drv_free(J->tk); drv_free(J->tv);
    drv_free(J->dout); drv_free(J->dlse); drv_free(J->pf); drv_free(J->dc); drv_free(J->rows);
    drv_free(J->fpo); drv_free(J->fdo); drv_free(J->fdl);
    drv_free(J->pall); drv_free(J->dall); drv_free(J->col); drv_free(J->stage);
    drv_free(J->rd); drv_free(J->pack);
    drv_out_discard(J->out, 1);
    uly_infer_free(J->S);
}

/* ------------------------------------------------------------------ parse */

static int infer_parse(infer_job *J, drv *d, int argc, char **argv)
{
    struct infer_cfg *c = &J->c;
    memset(c, 0, sizeof *c);
    c->prompt = 256; c->generate = 16; c->batch = 1; c->heads = 8; c->head_dim = 64; c->seed = 1;
    arg_opt opts[NOPTS];
    infer_options(c, opts);
    int prc = drv_parse(d, argc, argv, opts);
    if (prc != DRV_PARSE_OK)
        return prc;
    if (!c->seen_kv)
        c->kv_heads = c->heads;
    const int nfiles = (c->fin[T_Q] != NULL) + (c->fin[T_K] != NULL) + (c->fin[T_V] != NULL);
    J->files = nfiles == NIN;
    char missing[32] = "";
    for (int i = 0; i < NIN; i++)
        if (!c->fin[i])
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? " and " : "",
                     in_name[i]);
    for (int i = 0; i < NIN && J->files; i++)
        if (attn_spec_split(c->fin[i], J->fpath[i], sizeof J->fpath[i], &J->fname[i])) {
            drv_fail(d, DRV_BADINPUT, "%s: the file name is too long", in_name[i]);
            return DRV_PARSE_ERROR;
        }
    if (nfiles != 0 && nfiles != NIN)
        drv_fail(d, DRV_BADINPUT, "--q, --k and --v must be given together (missing: %s)", missing);
    else if (J->files && c->seen_seed)
        drv_fail(d, DRV_BADINPUT, "--seed sets the random inputs: with --q, --k and --v the inputs are the files'");
    else if (c->seen_layout && !J->files && !c->fout)
        drv_fail(d, DRV_BADINPUT, "--layout applies to the tensor files (--q, --k, --v, --out)");
    else if (J->files && !c->seen_prompt && !c->seen_generate)
        drv_fail(d, DRV_BADINPUT, "with --q, --k and --v give --prompt N (the files' other rows are generated) or "
                 "--generate T (the rows before them are the prompt)");
    else if (c->method_s && uly_method_parse(c->method_s, &c->method))
        drv_fail(d, DRV_BADINPUT, "--method: %s", uly_last_error());
    else if (c->seen_udeg && c->method != ULY_METHOD_USP)
        drv_fail(d, DRV_BADINPUT, "--ulysses-degree applies to --method usp only (%s has %s)", method_names[c->method],
                 c->method == ULY_METHOD_ULYSSES ? "one all-to-all over all ranks" : "no all-to-all");
    else if (c->layout_s && uly_kv_layout_parse(c->layout_s, &c->kv_kind, &c->kv_block))
        drv_fail(d, DRV_BADINPUT, "--kv-layout: %s", uly_last_error());
    else if (c->prompt > DRV_SEQ_MAX - c->generate)
        drv_fail(d, DRV_BADINPUT, "--prompt %lld + --generate %lld: the cache would hold more than %lld tokens per "
                 "sequence", (long long)c->prompt, (long long)c->generate, (long long)DRV_SEQ_MAX);
    else
        return DRV_PARSE_OK;
    return DRV_PARSE_ERROR;
}

/* Every option that changes control flow, collectives or results. */
static int infer_fields(const infer_job *J, drv_field *f)
{
    const struct infer_cfg *c = &J->c;
    int n = 0;
#define FI(nm, v) f[n++] = (drv_field){nm, DRV_F_INT, (int64_t)(v), NULL, 0, NULL}
#define FF(nm, v) f[n++] = (drv_field){nm, DRV_F_FLAG, (int64_t)(v), NULL, 0, NULL}
#define FC(nm, v, ch) f[n++] = (drv_field){nm, DRV_F_CHOICE, (int64_t)(v), NULL, 0, ch}
    FI("--prompt", c->prompt); FI("--generate", c->generate); FC("--method", c->method, method_names);
    FC("--ulysses-degree", c->seen_udeg ? c->udeg : -1, NULL); FC("--scheme", c->scheme, scheme_names);
    FI("--kv-layout", c->kv_kind ? c->kv_block : 0); FI("--batch", c->batch); FI("--heads", c->heads);
    FI("--kv-heads", c->kv_heads); FI("--head-dim", c->head_dim); FI("--window", c->window);
    FC("--dtype", c->dtype, dtype_names); FI("--seed", c->seed); FI("--threads", c->threads);
    FF("--check", c->check); FF("--quiet", c->quiet); FF("--force", c->force); FF("--json", c->json);
    for (int i = 0; i < NIN; i++)
        f[n++] = (drv_field){in_name[i], DRV_F_STR, 0, c->fin[i], 0, NULL};
    f[n++] = (drv_field){"--out", DRV_F_STR, 0, c->fout, 0, NULL};
    FC("--layout", c->layout, layout_names);
#undef FI
#undef FF
#undef FC
    return n;
}

/* ---------------------------------------------------------------- resolve */

/* Rank 0: open the input files (headers only) and take the shape from them,
 * as `ulysses attn` does: q fixes B, the rows N + T, H and d; v fixes Hkv;
 * k must match.  The rows are the prompt then the generated tokens. */
static int infer_resolve(infer_job *J, drv *d)
{
    struct infer_cfg *c = &J->c;
    if (d->rank != 0 || !J->files)
        return 0;
    static const char *const defaults[NIN][2] = {{"q", NULL}, {"k", NULL}, {"v", NULL}};
    for (int i = 0; i < NIN; i++)
        if (attn_in_open(d, &J->in[i], in_name[i], J->fpath[i], J->fname[i], defaults[i], c->layout))
            return d->code;
    int64_t shp[NIN][4];
    for (int i = 0; i < NIN; i++)
        memcpy(shp[i], J->in[i].shp, sizeof shp[i]);
    for (int e = 0; e < NIN * 4; e++)
        if (shp[e / 4][e % 4] < 1)
            return drv_fail(d, DRV_BADINPUT, "%s %s: every dimension must be >= 1 (dimension %d is %lld)",
                            in_name[e / 4], c->fin[e / 4], e % 4, (long long)shp[e / 4][e % 4]);
    const char *hint = c->layout == ATTN_BSHD && J->in[T_Q].ndim == 4
                           ? "; if your tensors are (B, H, N, d), use --layout bhsd" : "";
    /* q fixes B, H, d, v fixes Hkv: an option given must say the same */
    struct { const char *name; int64_t *opt; int seen; int64_t file; } fix[] = {
        {"batch", &c->batch, c->seen_batch, shp[T_Q][0]}, {"heads", &c->heads, c->seen_heads, shp[T_Q][2]},
        {"kv-heads", &c->kv_heads, c->seen_kv, shp[T_V][2]}, {"head-dim", &c->head_dim, c->seen_dim, shp[T_Q][3]}};
    for (size_t i = 0; i < sizeof fix / sizeof fix[0]; i++) {
        if (fix[i].seen && *fix[i].opt != fix[i].file)
            return drv_fail(d, DRV_BADINPUT, "--%s %lld disagrees with the input files (%lld)%s", fix[i].name,
                            (long long)*fix[i].opt, (long long)fix[i].file, hint);
        *fix[i].opt = fix[i].file;
    }
    const int64_t rows = shp[T_Q][1];
    const int64_t wk[4] = {c->batch, rows, c->kv_heads, c->head_dim};
    if (memcmp(shp[T_K], wk, sizeof wk) != 0)
        return attn_in_mismatch(d, &J->in[T_K], "--k", wk, 0, hint);
    if (shp[T_V][0] != c->batch || shp[T_V][1] != rows || shp[T_V][3] != c->head_dim)
        return attn_in_mismatch(d, &J->in[T_V], "--v", wk, 1, hint);
    if (c->seen_prompt && c->seen_generate && c->prompt + c->generate != rows)
        return drv_fail(d, DRV_BADINPUT, "--prompt %lld + --generate %lld = %lld tokens disagrees with the input files "
                        "(%lld per sequence)", (long long)c->prompt, (long long)c->generate,
                        (long long)(c->prompt + c->generate), (long long)rows);
    if (!c->seen_generate && rows - c->prompt < 1)
        return drv_fail(d, DRV_BADINPUT, "--prompt %lld leaves no token to generate: the input files hold %lld per "
                        "sequence", (long long)c->prompt, (long long)rows);
    if (!c->seen_prompt && rows - c->generate < 1)
        return drv_fail(d, DRV_BADINPUT, "--generate %lld leaves no prompt: the input files hold %lld tokens per "
                        "sequence", (long long)c->generate, (long long)rows);
    if (!c->seen_generate)
        c->generate = rows - c->prompt;
    if (!c->seen_prompt)
        c->prompt = rows - c->generate;
    if (!c->seen_dtype)
        c->dtype = J->in[T_Q].elem == ULY_ELEM_F64 ? ULY_F64 : ULY_F32;
    return 0;
}

/* Collective: rank 0's resolved shape to everyone. */
static int infer_share_shape(infer_job *J, drv *d)
{
    struct infer_cfg *c = &J->c;
    if (!J->files || d->size == 1)
        return 0;
    int64_t v[7] = {c->batch, c->prompt, c->generate, c->heads, c->kv_heads, c->head_dim, c->dtype};
    if (drv_mpi(d, MPI_Bcast(v, 7, MPI_INT64_T, 0, d->comm), "MPI_Bcast (shape)"))
        return DRV_RUNTIME;
    c->batch = v[0]; c->prompt = v[1]; c->generate = v[2]; c->heads = v[3]; c->kv_heads = v[4]; c->head_dim = v[5];
    c->dtype = (int)v[6];
    return 0;
}

/* ------------------------------------------------------------------ shape */

/* The descriptions, the prefill's plan, the layout and the options (local,
 * the same on every rank: they follow from the agreed options and P). */
static int infer_shape(infer_job *J, drv *d)
{
    const struct infer_cfg *c = &J->c;
    J->rank = d->rank;
    J->P = d->size;
    J->N = c->prompt;
    J->T = c->generate;
    J->Ntot = J->N + J->T;
    uly_attn_desc *a = &J->a;
    memset(a, 0, sizeof *a);
    a->batch = c->batch; a->seq = J->N; a->heads = c->heads; a->kv_heads = c->kv_heads; a->head_dim = c->head_dim;
    a->causal = 1; a->window = c->window; a->dtype = (uly_dtype)c->dtype;
    J->af = *a;
    J->af.seq = J->Ntot;
    int st = uly_attn_desc_check(&J->af);
    if (st)
        return drv_lib(d, st, DRV_BADINPUT, NULL);
    if (c->method == ULY_METHOD_ULYSSES && d->size > a->heads)
        return drv_fail(d, DRV_BADINPUT, "ulysses: SP degree %d exceeds the %lld attention heads (use --method usp: "
                        "Ulysses in groups of at most %lld ranks, a ring across the groups)", d->size,
                        (long long)a->heads, (long long)a->heads);
    int U = c->method == ULY_METHOD_USP ? (int)c->udeg : 0;
    if (c->method == ULY_METHOD_USP && !c->seen_udeg) {
        U = uly_plan_usp_degree(a->heads, d->size);
        drv_say(d, "usp: ulysses degree %d chosen (the largest divisor of %d ranks that is <= %lld heads), "
                "ring degree %d", U, d->size, (long long)a->heads, d->size / U);
    }
    if ((st = uly_sp_plan_init(&J->plan, c->method, d->size, U, 0)))
        return drv_lib(d, st, DRV_BADINPUT, c->method == ULY_METHOD_USP ? "--ulysses-degree" : "--method");
    if ((st = uly_kv_layout_init(&J->L, c->kv_kind, d->size, c->kv_block, J->N)))
        return drv_lib(d, st, DRV_BADINPUT, "--kv-layout");
    uly_infer_opts *o = &J->io;
    memset(o, 0, sizeof *o);
    o->prefill.dist.kernel.threads = (int)c->threads;
    o->prefill.dist.a2a_mode = ULY_A2A_PACK; /* one prefill: nothing for auto to choose between */
    o->prefill.method = J->plan.method;
    o->prefill.ulysses_degree = J->plan.method == ULY_METHOD_USP ? J->plan.U : 0;
    o->scheme = c->scheme;
    o->kv_kind = c->kv_kind;
    o->kv_block = c->kv_block;
    o->capacity = J->Ntot;
    o->threads = (int)c->threads;
    return 0;
}

/* ------------------------------------------------------------------- plan */

/* Whether rank 0 gathers the results: --check, --out. */
static int need_gather(const infer_job *J)
{
    return J->c.check || J->c.fout;
}

/* The most prompt tokens a rank holds (at least 1: a step's token). */
static int64_t most_rows(const infer_job *J)
{
    int64_t m = 1;
    for (int r = 0; r < J->P; r++) {
        int64_t tb[2], tc[2];
        const int ns = uly_plan_tokens(&J->plan, J->N, r, tb, tc);
        m = tc[0] + (ns > 1 ? tc[1] : 0) > m ? tc[0] + (ns > 1 ? tc[1] : 0) : m;
    }
    return m;
}

static uint64_t bsum(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t bmul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* This rank's memory: the library's (uly_infer_memory: the cache shard, the
 * prefill context, the decode buffers) and the driver's (the prompt shards
 * and output, one step's tokens, every step's output; rank 0 with --check:
 * the whole inputs, their fp64 copies and reference, the gathered results,
 * the one-process run's cache copy; with --out: the gathered results and
 * their (B, T, H, d) copy; with files: a rank's rows as read and as sent). */
static int infer_plan(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const struct infer_cfg *c = &J->c;
    J->es = uly_dtype_size(a->dtype);
    J->ns = uly_plan_tokens(&J->plan, J->N, d->rank, J->tb, J->tc);
    J->n = J->tc[0] + (J->ns > 1 ? J->tc[1] : 0);
    uly_split(a->heads, d->size, d->rank, &J->h0, &J->hn);
    uly_bufs t = {0};
    int st = uly_infer_memory(a, &J->io, d->size, d->rank, &t);
    /* a refusal here is the create's: say it before any allocation */
    if (st)
        drv_lib(d, st, 0, NULL);
    const uint64_t es = J->es, B = (uint64_t)a->batch, H = (uint64_t)a->heads, Hk = (uint64_t)a->kv_heads;
    const uint64_t dd = (uint64_t)a->head_dim, n = (uint64_t)J->n, T = (uint64_t)J->T, Nt = (uint64_t)J->Ntot;
    const uint64_t lib = st ? 0 : t.total;
    uint64_t own = bmul(bmul(B * n, 2 * H + 2 * Hk), dd * es);              /* q, o, k, v of the prompt */
    own = bsum(own, bmul(B * (2 * H + 2 * Hk), dd * es));                   /* one step's tokens */
    own = bsum(own, bmul(bmul(T * B, (uint64_t)J->hn), (dd + 1) * es));     /* every step's output, LSE */
    uint64_t r0 = 0;
    if (d->rank == 0 && c->check) {
        const uint64_t NQ = bmul(B * Nt, H * dd), NK = bmul(B * Nt, Hk * dd);
        r0 = bmul(bsum(NQ, 2 * NK), es + 8);                                /* the inputs, their fp64 copies */
        r0 = bsum(r0, bmul(bsum(NQ, B * H * Nt), 8));                       /* the reference O, LSE */
        r0 = bsum(r0, bmul(2 * NK + B * H * (dd + 1), es));                 /* the one-process step */
    }
    if (d->rank == 0 && need_gather(J))                                     /* gathered */
        r0 = bsum(r0, bmul(bsum(bmul(B * (uint64_t)J->N, H * dd), bmul(T * B, H * (dd + 1))), es));
    if (d->rank == 0 && c->fout)                                            /* the output's (B, T, H, d) */
        r0 = bsum(r0, bmul(bmul(T * B, H * dd), es));
    if (d->rank == 0 && J->files)                                           /* rows read, rows sent */
        r0 = bsum(r0, bmul(bmul((uint64_t)most_rows(J), H * dd), 8 + B * es));
    char why[256], s1[32], s2[32], s3[32];
    snprintf(why, sizeof why, "the library's cache shard and buffers %s, the driver's shards %s%s%s",
             drv_bytes(s1, sizeof s1, lib), drv_bytes(s2, sizeof s2, own), r0 ? ", rank 0 --check " : "",
             r0 ? drv_bytes(s3, sizeof s3, r0) : "");
    /* every rank takes part in the preflight, even after a local failure */
    if (drv_preflight(d, bsum(lib, bsum(own, r0)), 0, why, c->force))
        return d->code;
    if (d->rank == 0 && c->fout) {
        /* the output against the inputs, before any computing */
        J->out[0].path = c->fout;
        J->out[0].what = "--out";
        drv_in ins[NIN];
        for (int i = 0; i < NIN; i++)
            ins[i] = (drv_in){J->files ? J->fpath[i] : NULL, in_name[i], NULL};
        return drv_out_prepare(d, J->out, 1, ins, NIN);
    }
    return d->code;
}

/* --------------------------------------------------------------- allocate */

static int infer_alloc(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const size_t es = J->es, B = (size_t)a->batch, H = (size_t)a->heads, Hk = (size_t)a->kv_heads;
    const size_t dd = (size_t)a->head_dim, n = (size_t)J->n, T = (size_t)J->T, hn = (size_t)J->hn;
    for (int i = 0; i < NIN && !d->code; i++)
        J->x[i] = drv_alloc_n(d, B * n * (i == T_Q ? H : Hk) * dd + 1, es, "a prompt shard");
    if (!d->code) J->o = drv_alloc_n(d, B * n * H * dd + 1, es, "the prefill's output");
    if (!d->code) J->tq = drv_alloc_n(d, B * H * dd, es, "a decode step's tokens");
    if (!d->code) J->tqr = drv_alloc_n(d, B * hn * dd + 1, es, "a decode step's tokens");
    if (!d->code) J->tk = drv_alloc_n(d, B * Hk * dd, es, "a decode step's tokens");
    if (!d->code) J->tv = drv_alloc_n(d, B * Hk * dd, es, "a decode step's tokens");
    if (!d->code) J->dout = drv_alloc_n(d, T * B * hn * dd + 1, es, "the decode outputs");
    if (!d->code) J->dlse = drv_alloc_n(d, T * B * hn + 1, es, "the decode outputs");
    if (!d->code) J->pf = drv_calloc_n(d, NPF, sizeof(double), "the phase times");
    if (!d->code) J->dc = drv_calloc_n(d, T * NDC, sizeof(double), "the phase times");
    if (d->rank == 0 && !d->code)
        J->rows = drv_alloc_n(d, (size_t)d->size, sizeof *J->rows, "the cache rows");
    const size_t P = (size_t)d->size;
    if (d->rank == 0 && !d->code)
        J->pall = drv_alloc_n(d, P * NPF, sizeof(double), "the phase times of all ranks");
    if (d->rank == 0 && !d->code)
        J->dall = drv_alloc_n(d, P * T * NDC, sizeof(double), "the phase times of all ranks");
    if (d->rank == 0 && !d->code)
        J->col = drv_alloc_n(d, P * T, sizeof(double), "the phase times");
    if (d->rank == 0 && J->files && !d->code) {
        J->nrd = most_rows(J);
        J->rd = drv_alloc_n(d, (size_t)J->nrd * H * dd, sizeof(double), "reading the input files");
        if (!d->code) J->pack = drv_alloc_n(d, B * (size_t)J->nrd * H * dd, es, "sending the inputs");
    }
    if (d->rank == 0 && J->c.check) {
        const size_t Nt = (size_t)J->Ntot;
        for (int i = 0; i < NIN && !d->code; i++)
            J->full_in[i] = drv_alloc_n(d, B * Nt * (i == T_Q ? H : Hk) * dd, es, "the whole inputs (--check)");
    }
    if (d->rank == 0 && need_gather(J)) {
        if (!d->code) J->fpo = drv_alloc_n(d, B * (size_t)J->N * H * dd, es, "the gathered results");
        if (!d->code) J->fdo = drv_alloc_n(d, T * B * H * dd, es, "the gathered results");
        if (!d->code) J->fdl = drv_alloc_n(d, T * B * H, es, "the gathered results");
        size_t most = 0; /* the largest part of a rank: its prompt output, or its decode outputs and LSEs */
        for (int r = 0; r < d->size; r++) {
            int64_t tb[2], tc[2], h0, hc;
            const int ns = uly_plan_tokens(&J->plan, J->N, r, tb, tc);
            uly_split(a->heads, d->size, r, &h0, &hc);
            const size_t x = B * (size_t)(tc[0] + (ns > 1 ? tc[1] : 0)) * H * dd * es, y = T * B * (size_t)hc * (dd + 1) * es;
            most = x > most ? x : most;
            most = y > most ? y : most;
            /* with files, --check: one sequence's cache rows of a rank */
            const size_t z = J->files && J->c.check ? (size_t)uly_kv_count(&J->L, r, J->Ntot) * Hk * dd * es : 0;
            most = z > most ? z : most;
        }
        if (!d->code) J->stage = drv_alloc_n(d, most + 1, 1, "the gathered results");
    }
    return d->code;
}

static int infer_create(infer_job *J, drv *d)
{
    return drv_lib(d, uly_infer_create(d->comm, &J->a, &J->io, &J->S), 0, NULL);
}

/* ------------------------------------------------------------------- load */

/* Rows [t0, t0 + cnt) of every sequence of input `which`, (B, cnt, Hx, d),
 * the values of the whole (B, Ntot, Hx, d) tensor. */
static void fill_rows(const infer_job *J, void *x, int which, int64_t t0, int64_t cnt)
{
    const uly_attn_desc *a = &J->a;
    const int64_t Hx = which == T_Q ? a->heads : a->kv_heads;
    const size_t per = (size_t)(cnt * Hx * a->head_dim) * J->es;
    for (int64_t b = 0; b < a->batch; b++)
        fill_shard((char *)x + (size_t)b * per, a->dtype, (uint64_t)J->c.seed, which, 1, J->Ntot, b * J->Ntot + t0,
                   cnt, Hx, a->head_dim);
}

enum { CHUNK = 1 << 30, TAG_LOAD = 11, TAG_GATHER = 12 };

/* bytes from rank 0 to rank `to` (rank 0 itself: nothing), in chunks */
static int from_root(drv *d, int to, const void *src, void *dst, size_t bytes)
{
    for (size_t off = 0; to != 0 && off < bytes; off += CHUNK) {
        int cnt = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        int e = d->rank == 0 ? MPI_Send((const char *)src + off, cnt, MPI_BYTE, to, TAG_LOAD, d->comm)
                             : MPI_Recv((char *)dst + off, cnt, MPI_BYTE, 0, TAG_LOAD, d->comm, MPI_STATUS_IGNORE);
        if (drv_mpi(d, e, d->rank == 0 ? "MPI_Send" : "MPI_Recv"))
            return DRV_RUNTIME;
    }
    return 0;
}

/* Rank 0: rows [t0, t0 + cnt) of sequence b of input `which` into dst
 * (cnt, Hx, d) of the run's type: from the whole inputs when --check holds
 * them, else from the file (J->nrd rows at a time, every value finite and
 * representable).  A failure is recorded; the caller's sends go on. */
static int read_rows(infer_job *J, drv *d, int which, int64_t b, int64_t t0, int64_t cnt, void *dst)
{
    const uly_attn_desc *a = &J->a;
    const size_t row = (size_t)((which == T_Q ? a->heads : a->kv_heads) * a->head_dim);
    if (J->full_read) {
        memcpy(dst, (char *)J->full_in[which] + (size_t)(b * J->Ntot + t0) * row * J->es, (size_t)cnt * row * J->es);
        return 0;
    }
    for (int64_t t = 0; t < cnt && !d->code; t += J->nrd) {
        const int64_t k = cnt - t < J->nrd ? cnt - t : J->nrd;
        if (attn_in_read(d, &J->in[which], in_name[which], b, t0 + t, k, J->rd))
            break;
        for (size_t e = 0; e < (size_t)k * row; e++) {
            const double v = J->rd[e];
            const size_t at = (size_t)(b * J->Ntot + t0 + t) * row + e;
            if (!isfinite(v))
                return drv_fail(d, DRV_BADINPUT, "%s %s: element %zu is %s", in_name[which], J->c.fin[which], at,
                                isnan(v) ? "NaN" : "Inf");
            if (a->dtype == ULY_F32 && fabs(v) > FLT_MAX)
                return drv_fail(d, DRV_BADINPUT, "%s %s: element %zu is %.17g, beyond the float32 range (largest %g); "
                                "use --dtype f64", in_name[which], J->c.fin[which], at, v, (double)FLT_MAX);
            if (a->dtype == ULY_F32)
                ((float *)dst)[(size_t)t * row + e] = (float)v;
            else
                ((double *)dst)[(size_t)t * row + e] = v;
        }
    }
    return d->code;
}

/* With files: rank 0 reads every rank's prompt tokens (the prefill method's
 * segments) and sends them, one message per rank and input, as `ulysses
 * attn` does; with --check it first reads the whole inputs. */
static int load_files(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    for (int i = 0; i < NIN; i++) {
        const size_t row = (size_t)((i == T_Q ? a->heads : a->kv_heads) * a->head_dim) * J->es;
        J->full_read = 0;
        for (int64_t b = 0; d->rank == 0 && J->full_in[i] && b < a->batch && !d->code; b++)
            read_rows(J, d, i, b, 0, J->Ntot, (char *)J->full_in[i] + (size_t)(b * J->Ntot) * row);
        J->full_read = J->full_in[i] != NULL;
        for (int r = 0; r < d->size; r++) {
            if (d->rank != 0 && d->rank != r)
                continue;
            int64_t tb[2], tc[2];
            const int ns = uly_plan_tokens(&J->plan, J->N, r, tb, tc);
            const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
            char *dst = r == 0 ? J->x[i] : J->pack;
            for (int64_t b = 0; d->rank == 0 && b < a->batch; b++) {
                int64_t r0 = 0;
                for (int sg = 0; sg < ns; sg++) {
                    if (!d->code)
                        read_rows(J, d, i, b, tb[sg], tc[sg], dst + (size_t)(b * n + r0) * row);
                    r0 += tc[sg];
                }
            }
            if (from_root(d, r, J->pack, J->x[i], (size_t)(a->batch * n) * row))
                return DRV_RUNTIME;
        }
    }
    return d->code;
}

/* This rank's prompt tokens (the prefill method's segments, in order). */
static int infer_load(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    if (J->files)
        return load_files(J, d);
    for (int i = 0; i < NIN; i++) {
        const int64_t Hx = i == T_Q ? a->heads : a->kv_heads, row = Hx * a->head_dim;
        for (int64_t b = 0; b < a->batch; b++) {
            int64_t r0 = 0;
            for (int sg = 0; sg < J->ns; sg++) {
                fill_shard((char *)J->x[i] + (size_t)((b * J->n + r0) * row) * J->es, a->dtype, (uint64_t)J->c.seed,
                           i, 1, J->Ntot, b * J->Ntot + J->tb[sg], J->tc[sg], Hx, a->head_dim);
                r0 += J->tc[sg];
            }
        }
        if (J->full_in[i])
            fill_rows(J, J->full_in[i], i, 0, J->Ntot);
    }
    return d->code;
}

/* ---------------------------------------------------------------- prefill */

static int infer_prefill(infer_job *J, drv *d)
{
    if (d->size > 1 && drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier"))
        return DRV_RUNTIME;
    const double t0 = now_seconds();
    int st = uly_infer_prefill(J->S, J->x[T_Q], J->x[T_K], J->x[T_V], J->o);
    J->pf[PF_WALL] = now_seconds() - t0;
    if (drv_lib(d, st, 0, "prefill"))
        return d->code;
    uly_sp_times t;
    uly_sp_times_get(uly_infer_prefill_ctx(J->S), &t);
    J->pf[0] = t.fwd_in; J->pf[1] = t.fwd_attn; J->pf[2] = t.fwd_wait; J->pf[3] = t.fwd_out;
    J->pf[PF_REST] = fmax(0, J->pf[PF_WALL] - (t.fwd_in + t.fwd_attn + t.fwd_wait + t.fwd_out));
    return 0;
}

/* ----------------------------------------------------------------- decode */

/* With files: rank 0 reads step s's token of every sequence and sends each
 * rank the query heads the scheme gives it (dcp: its heads; helix: every
 * head) and the token's k, v. */
static int step_files(infer_job *J, drv *d, int64_t s)
{
    const uly_attn_desc *a = &J->a;
    const int64_t pos = J->N + s, B = a->batch, H = a->heads;
    const size_t dr = (size_t)a->head_dim * J->es, kv = (size_t)(B * a->kv_heads) * dr;
    void *const tok[NIN] = {J->tq, J->tk, J->tv};
    for (int i = 0; i < NIN && d->rank == 0; i++)
        for (int64_t b = 0; b < B && !d->code; b++)
            read_rows(J, d, i, b, pos, 1, (char *)tok[i] + (size_t)(b * (i == T_Q ? H : a->kv_heads)) * dr);
    for (int r = 1; r < d->size; r++) {
        if (d->rank != 0 && d->rank != r)
            continue;
        const void *q = J->tq;
        void *into = J->tq;
        size_t qn = (size_t)(B * H) * dr;
        if (J->c.scheme == ULY_DECODE_DCP) {
            int64_t h0, hn;
            uly_split(H, d->size, r, &h0, &hn);
            for (int64_t b = 0; d->rank == 0 && b < B; b++)
                memcpy((char *)J->pack + (size_t)(b * hn) * dr, (char *)J->tq + (size_t)(b * H + h0) * dr,
                       (size_t)hn * dr);
            q = J->pack;
            into = J->tqr;
            qn = (size_t)(B * hn) * dr;
        }
        if (from_root(d, r, q, into, qn) || from_root(d, r, J->tk, J->tk, kv) || from_root(d, r, J->tv, J->tv, kv))
            return DRV_RUNTIME;
    }
    return d->code;
}

/* Step s: the token at position N + s of every sequence, its query (every
 * head; dcp: this rank's heads) and its k, v. */
static void step_tokens(infer_job *J, drv *d, int64_t s)
{
    const uly_attn_desc *a = &J->a;
    const int64_t pos = J->N + s;
    if (J->files) {
        step_files(J, d, s);
        if (d->rank != 0)
            return;
    } else {
        fill_rows(J, J->tq, T_Q, pos, 1);
        fill_rows(J, J->tk, T_K, pos, 1);
        fill_rows(J, J->tv, T_V, pos, 1);
    }
    if (J->c.scheme == ULY_DECODE_DCP) {
        const size_t row = (size_t)a->head_dim * J->es;
        for (int64_t b = 0; b < a->batch; b++)
            memcpy((char *)J->tqr + (size_t)(b * J->hn) * row, (char *)J->tq + (size_t)(b * a->heads + J->h0) * row,
                   (size_t)J->hn * row);
    }
}

/* One decode step (its agreement: the caller's); the progress line on rank 0. */
static int infer_decode(infer_job *J, drv *d, int64_t s, uly_progress *pl)
{
    const uly_attn_desc *a = &J->a;
    const size_t on = (size_t)(a->batch * J->hn * a->head_dim) * J->es, ln = (size_t)(a->batch * J->hn) * J->es;
    uly_progress_show(pl, (double)s, (double)J->T, "decode step %lld of %lld", (long long)s + 1, (long long)J->T);
    d->line_open = pl->open;
    step_tokens(J, d, s);
    if (d->size > 1 && drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier"))
        return DRV_RUNTIME;
    const double t0 = now_seconds();
    int st = uly_infer_decode(J->S, J->c.scheme == ULY_DECODE_DCP ? J->tqr : J->tq, J->tk, J->tv,
                              (char *)J->dout + (size_t)s * on, (char *)J->dlse + (size_t)s * ln);
    double *row = J->dc + s * NDC;
    row[DC_WALL] = now_seconds() - t0;
    uly_infer_times t;
    uly_infer_times_get(J->S, &t);
    row[DC_QG] = t.q_gather; row[DC_ATTN] = t.attn; row[DC_MCOMM] = t.merge_comm; row[DC_MERGE] = t.merge;
    return drv_lib(d, st, 0, "decode");
}

/* ---------------------------------------------------------------- measure */

/* Stats of column k of a (m, stride) table. */
static stats column_stats(double *all, double *col, size_t m, size_t stride, size_t k)
{
    for (size_t i = 0; i < m; i++)
        col[i] = all[i * stride + k];
    return stats_of(col, m);
}

static int infer_measure(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    /* bytes: every decode step as planned, the KV move as planned */
    uly_infer_volume(J->S, &J->vol, &J->kv_sent, &J->kv_recv);
    int bad = uly_plan_decode_volume(a, J->c.scheme, d->size, d->rank, &J->want) != ULY_OK;
    bad |= uly_plan_prefill_kv_volume(a, &J->plan, &J->L, d->rank, &J->kv_want_sent, &J->kv_want_recv) != ULY_OK;
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        if (J->vol.sent[w] != J->want.sent[w] * (uint64_t)J->T || J->vol.recv[w] != J->want.recv[w] * (uint64_t)J->T)
            bad = 1;
    bad |= J->kv_sent != J->kv_want_sent || J->kv_recv != J->kv_want_recv;
    /* the cache: the layout's rows, all tokens in it */
    const void *ck, *cv;
    int64_t rows;
    uly_infer_cache(J->S, &ck, &cv, &rows);
    int rbad = rows != uly_kv_count(&J->L, d->rank, J->Ntot) || uly_infer_length(J->S) != J->Ntot;
    int flags[2] = {bad, rbad}, any[2] = {bad, rbad};
    if (d->size > 1 && drv_mpi(d, MPI_Allreduce(flags, any, 2, MPI_INT, MPI_MAX, d->comm), "MPI_Allreduce (volumes)"))
        return DRV_RUNTIME;
    J->vol_bad = any[0];
    J->rows_bad = any[1];
    if (d->size > 1) {
        if (drv_mpi(d, MPI_Gather(&rows, 1, MPI_INT64_T, J->rows, 1, MPI_INT64_T, 0, d->comm), "MPI_Gather (rows)"))
            return DRV_RUNTIME;
    } else {
        J->rows[0] = rows;
    }
    /* times: every rank's to rank 0 */
    const size_t P = (size_t)d->size, T = (size_t)J->T;
    double *pall = J->pall, *dall = J->dall, *col = J->col;
    if (drv_mpi(d, MPI_Gather(J->pf, NPF, MPI_DOUBLE, pall, NPF, MPI_DOUBLE, 0, d->comm), "MPI_Gather (times)") ||
        drv_mpi(d, MPI_Gather(J->dc, (int)(T * NDC), MPI_DOUBLE, dall, (int)(T * NDC), MPI_DOUBLE, 0, d->comm),
                "MPI_Gather (times)"))
        return DRV_RUNTIME;
    if (d->rank == 0) {
        for (int k = 0; k < NPF; k++)
            J->pst[k] = column_stats(pall, col, P, NPF, (size_t)k);
        for (int k = 0; k < DC_WALL; k++)
            J->dst[k] = column_stats(dall, col, P * T, NDC, (size_t)k);
        /* a step takes as long as its slowest rank */
        for (size_t s = 0; s < T; s++) {
            col[s] = 0;
            for (size_t r = 0; r < P; r++)
                col[s] = fmax(col[s], dall[(r * T + s) * NDC + DC_WALL]);
        }
        J->dst[DC_WALL] = stats_of(col, T);
    }
    return d->code;
}

/* ------------------------------------------------------------ finite results */

/* Whether x[0..n) holds a NaN or an infinity (an LSE too: every token sees
 * itself, so no merged LSE is -inf). */
static int any_nonfinite(const void *x, uly_dtype t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i]))
            return 1;
    return 0;
}

static int infer_finite(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const size_t po = (size_t)(a->batch * J->n * a->heads * a->head_dim);
    const size_t dn = (size_t)(J->T * a->batch * J->hn);
    if (any_nonfinite(J->o, a->dtype, po))
        return drv_fail(d, DRV_RUNTIME, "the prefill's output O has non-finite elements on rank %d", d->rank);
    if (any_nonfinite(J->dout, a->dtype, dn * (size_t)a->head_dim) || any_nonfinite(J->dlse, a->dtype, dn))
        return drv_fail(d, DRV_RUNTIME, "a decode step's output has non-finite elements on rank %d", d->rank);
    return 0;
}

/* ----------------------------------------------------------------- gather */

/* bytes from rank `from` to rank 0 (rank 0 itself: a copy), in chunks */
static int to_root(drv *d, int from, const void *src, void *dst, size_t bytes)
{
    if (d->rank == 0 && from == 0) {
        memcpy(dst, src, bytes);
        return 0;
    }
    for (size_t off = 0; off < bytes; off += CHUNK) {
        int cnt = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        int e = d->rank == 0 ? MPI_Recv((char *)dst + off, cnt, MPI_BYTE, from, TAG_GATHER, d->comm, MPI_STATUS_IGNORE)
                             : MPI_Send((const char *)src + off, cnt, MPI_BYTE, 0, TAG_GATHER, d->comm);
        if (drv_mpi(d, e, d->rank == 0 ? "MPI_Recv" : "MPI_Send"))
            return DRV_RUNTIME;
    }
    return 0;
}

/* --check, --out: the prefill's output (token segments) and every step's
 * output and LSE (head ranges) to rank 0, one rank at a time through a
 * staging buffer. */
static int infer_gather(infer_job *J, drv *d)
{
    if (!need_gather(J))
        return 0;
    const uly_attn_desc *a = &J->a;
    const size_t es = J->es, row = (size_t)(a->heads * a->head_dim) * es, dr = (size_t)a->head_dim * es;
    const size_t B = (size_t)a->batch, T = (size_t)J->T, H = (size_t)a->heads;
    char *stage = J->stage;
    for (int r = 0; r < d->size && !d->code; r++) {
        if (d->rank != 0 && d->rank != r)
            continue;
        int64_t tb[2], tc[2], h0, hn;
        const int ns = uly_plan_tokens(&J->plan, J->N, r, tb, tc);
        const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
        uly_split(a->heads, d->size, r, &h0, &hn);
        if (to_root(d, r, J->o, stage, B * (size_t)n * row))
            break;
        if (d->rank == 0)
            for (size_t b = 0; b < B; b++) {
                int64_t r0 = 0;
                for (int sg = 0; sg < ns; sg++) {
                    memcpy((char *)J->fpo + (b * (size_t)J->N + (size_t)tb[sg]) * row,
                           stage + (b * (size_t)n + (size_t)r0) * row, (size_t)tc[sg] * row);
                    r0 += tc[sg];
                }
            }
        const size_t on = T * B * (size_t)hn * dr, ln = T * B * (size_t)hn * es;
        if (to_root(d, r, J->dout, stage, on) || to_root(d, r, J->dlse, stage + on, ln))
            break;
        if (d->rank == 0)
            for (size_t sb = 0; sb < T * B; sb++) { /* step s, sequence b: heads h0 ... h0 + hn */
                memcpy((char *)J->fdo + (sb * H + (size_t)h0) * dr, stage + sb * (size_t)hn * dr, (size_t)hn * dr);
                memcpy((char *)J->fdl + (sb * H + (size_t)h0) * es, stage + on + sb * (size_t)hn * es, (size_t)hn * es);
            }
    }
    return d->code;
}

/* ------------------------------------------------------------------ check */

static double elem(const void *x, uly_dtype t, size_t i)
{
    return t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
}

static void compare_one(errstat *e, double ref, double got, double atol, double rtol)
{
    const double df = fabs(got - ref);
    if (!isfinite(got) || !isfinite(ref) || !isfinite(df)) {
        e->nonfinite++;
        return;
    }
    e->max_abs = fmax(e->max_abs, df);
    e->max_ref = fmax(e->max_ref, fabs(ref));
    e->worst_tol = fmax(e->worst_tol, df / (atol + rtol * fabs(ref)));
}

/* Every rank: its cache holds the layout's tokens of [0, Ntot), in token
 * order, with the input values (bitwise). */
static int check_cache(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const void *ck, *cv;
    int64_t rows;
    uly_infer_cache(J->S, &ck, &cv, &rows);
    const int64_t nseg = uly_kv_segments(&J->L, d->rank, J->Ntot, NULL, NULL, 0);
    const int64_t cap = uly_kv_count(&J->L, d->rank, J->Ntot);
    int64_t *sb = drv_alloc_n(d, (size_t)nseg + 1, sizeof *sb, "the cache check (--check)");
    int64_t *sc = sb ? drv_alloc_n(d, (size_t)nseg + 1, sizeof *sc, "the cache check (--check)") : NULL;
    const size_t row = (size_t)(a->kv_heads * a->head_dim) * J->es;
    char *want = sc ? drv_alloc_n(d, row * (size_t)a->batch + 1, 1, "the cache check (--check)") : NULL;
    /* the cache's stride: its capacity on this rank, as uly_infer_memory sizes it */
    int bad = !want || rows != cap;
    if (!bad) {
        uly_kv_segments(&J->L, d->rank, J->Ntot, sb, sc, nseg);
        /* the shard is (B, capacity_r, Hkv, d): rows of one sequence are
         * contiguous; capacity_r is the layout's count of the whole capacity */
        const int64_t crow = uly_kv_count(&J->L, d->rank, J->io.capacity);
        for (int w = 0; w < 2 && !bad; w++) {
            const char *c = w == 0 ? ck : cv;
            int64_t i = 0;
            for (int64_t g = 0; g < nseg && !bad; g++)
                for (int64_t t = sb[g]; t < sb[g] + sc[g] && !bad; t++, i++) {
                    fill_rows(J, want, w == 0 ? T_K : T_V, t, 1); /* (B, 1, Hkv, d) */
                    for (int64_t b = 0; b < a->batch && !bad; b++)
                        bad = memcmp(c + (size_t)(b * crow + i) * row, want + (size_t)b * row, row) != 0;
                }
        }
    }
    drv_free(sb);
    drv_free(sc);
    drv_free(want);
    int any = bad;
    if (d->size > 1 && drv_mpi(d, MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, d->comm), "MPI_Allreduce (cache)"))
        return DRV_RUNTIME;
    J->cache_bad = any;
    return 0;
}

/* With files: every rank's cache to rank 0 (one sequence's rows at a time),
 * which compares it with the inputs it read (bitwise). */
static int check_cache_files(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const void *cache[2];
    int64_t rows;
    uly_infer_cache(J->S, &cache[0], &cache[1], &rows);
    const size_t row = (size_t)(a->kv_heads * a->head_dim) * J->es;
    int bad = J->rows_bad; /* the shards are not the layout's: nothing to send by it */
    int64_t *sb = NULL, *sc = NULL;
    /* every rank sends whatever rank 0 finds: the messages are the same on every rank */
    for (int r = 0; r < d->size && !J->rows_bad; r++) {
        if (d->rank != 0 && d->rank != r)
            continue;
        const int64_t nseg = uly_kv_segments(&J->L, r, J->Ntot, NULL, NULL, 0);
        const int64_t cnt = uly_kv_count(&J->L, r, J->Ntot), crow = uly_kv_count(&J->L, r, J->io.capacity);
        if (d->rank == 0) {
            sb = drv_alloc_n(d, (size_t)nseg + 1, sizeof *sb, "the cache check (--check)");
            sc = sb ? drv_alloc_n(d, (size_t)nseg + 1, sizeof *sc, "the cache check (--check)") : NULL;
            if (sc)
                uly_kv_segments(&J->L, r, J->Ntot, sb, sc, nseg);
        }
        for (int w = 0; w < 2; w++)
            for (int64_t b = 0; b < a->batch; b++) {
                if (to_root(d, r, (const char *)cache[w] + (size_t)(b * crow) * row, J->stage, (size_t)cnt * row))
                    return DRV_RUNTIME;
                const char *want = (const char *)J->full_in[w == 0 ? T_K : T_V];
                bad |= d->rank == 0 && !sc;
                for (int64_t g = 0, i = 0; d->rank == 0 && sc && g < nseg && !bad; i += sc[g], g++)
                    bad = memcmp(J->stage + (size_t)i * row, want + (size_t)(b * J->Ntot + sb[g]) * row,
                                 (size_t)sc[g] * row) != 0;
            }
        drv_free(sb);
        drv_free(sc);
        sb = sc = NULL;
    }
    J->cache_bad = bad;
    return 0;
}

typedef struct check_progress {
    uly_progress line;
    double base, all;
} check_progress;

static void check_progress_row(void *user, int64_t done, int64_t total)
{
    check_progress *cp = user;
    uly_progress_show(&cp->line, cp->base + (double)done, cp->all, "fp64 reference, %lld of %lld rows",
                      (long long)done, (long long)total);
}

/* Rank 0: every step in one process (bitwise), and the fp64 reference of
 * the whole sequence against the prefill's output and every step's. */
static int check_root(infer_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const int64_t B = a->batch, H = a->heads, Hk = a->kv_heads, dd = a->head_dim, N = J->N, Nt = J->Ntot;
    const size_t es = J->es, kr = (size_t)(Hk * dd) * es, qr = (size_t)(H * dd) * es;
    J->atol = a->dtype == ULY_F32 ? 2e-5 : 1e-10;
    J->rtol = a->dtype == ULY_F32 ? 2e-4 : 1e-8;
    void *ke = drv_alloc_n(d, (size_t)(B * Nt), kr, "the one-process run (--check)");
    void *ve = ke ? drv_alloc_n(d, (size_t)(B * Nt), kr, "the one-process run (--check)") : NULL;
    void *qe = ve ? drv_alloc_n(d, (size_t)B, qr, "the one-process run (--check)") : NULL;
    void *oe = qe ? drv_alloc_n(d, (size_t)B, qr, "the one-process run (--check)") : NULL;
    void *le = oe ? drv_alloc_n(d, (size_t)(B * H), es, "the one-process run (--check)") : NULL;
    double *in64[NIN] = {NULL}, *ro = NULL, *rl = NULL;
    const size_t cnt[NIN] = {(size_t)(B * Nt * H * dd), (size_t)(B * Nt * Hk * dd), (size_t)(B * Nt * Hk * dd)};
    for (int i = 0; i < NIN && le && !d->code; i++)
        if ((in64[i] = drv_alloc_n(d, cnt[i], sizeof(double), "the fp64 reference (--check)")))
            for (size_t e = 0; e < cnt[i]; e++)
                in64[i][e] = elem(J->full_in[i], a->dtype, e);
    if (!d->code) ro = drv_alloc_n(d, cnt[T_Q], sizeof(double), "the fp64 reference (--check)");
    if (!d->code) rl = drv_alloc_n(d, (size_t)(B * H * Nt), sizeof(double), "the fp64 reference (--check)");
    check_progress cp = {.all = (double)(J->T + B * H * Nt)};
    uly_progress_begin(&cp.line, !J->c.quiet, "ulysses infer --check");
    J->first_diff = -1;
    int st = 0;
    /* the one-process decode of every step, over the cache of that step */
    for (int64_t s = 0; s < J->T && !d->code && !st; s++) {
        uly_progress_show(&cp.line, (double)s, cp.all, "one process, step %lld of %lld", (long long)s + 1,
                          (long long)J->T);
        const int64_t pos = N + s, n = pos + 1;
        for (int64_t b = 0; b < B; b++) {
            memcpy((char *)ke + (size_t)(b * n) * kr, (char *)J->full_in[T_K] + (size_t)(b * Nt) * kr, (size_t)n * kr);
            memcpy((char *)ve + (size_t)(b * n) * kr, (char *)J->full_in[T_V] + (size_t)(b * Nt) * kr, (size_t)n * kr);
            memcpy((char *)qe + (size_t)b * qr, (char *)J->full_in[T_Q] + (size_t)(b * Nt + pos) * qr, qr);
        }
        st = uly_decode_emulate(a, J->c.scheme, &J->L, pos, qe, ke, ve, oe, le, (int)J->c.threads);
        if (!st && J->first_diff < 0 &&
            (memcmp(oe, (char *)J->fdo + (size_t)(s * B) * qr, (size_t)B * qr) != 0 ||
             memcmp(le, (char *)J->fdl + (size_t)(s * B * H) * es, (size_t)(B * H) * es) != 0))
            J->first_diff = s;
    }
    cp.base = (double)J->T;
    uly_attn_desc a64 = J->af;
    a64.dtype = ULY_F64;
    uly_ref_opts ro_opts = {check_progress_row, &cp};
    if (!d->code && !st)
        st = uly_ref_fwd_ex(&a64, in64[T_Q], in64[T_K], in64[T_V], ro, rl, &ro_opts);
    uly_progress_clear(&cp.line);
    drv_lib(d, st, DRV_RUNTIME, "--check");
    if (!d->code) {
        const double at = 0.25 * J->atol, rt = 0.25 * J->rtol;
        memset(J->err, 0, sizeof J->err);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < N; t++)
                for (int64_t e = 0; e < H * dd; e++)
                    compare_one(&J->err[E_PO], ro[(size_t)((b * Nt + t) * H * dd + e)],
                                elem(J->fpo, a->dtype, (size_t)((b * N + t) * H * dd + e)), at, rt);
        for (int64_t s = 0; s < J->T; s++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++) {
                    for (int64_t e = 0; e < dd; e++)
                        compare_one(&J->err[E_DO], ro[(size_t)(((b * Nt + N + s) * H + h) * dd + e)],
                                    elem(J->fdo, a->dtype, (size_t)(((s * B + b) * H + h) * dd + e)), at, rt);
                    compare_one(&J->err[E_DL], rl[(size_t)((b * H + h) * Nt + N + s)],
                                elem(J->fdl, a->dtype, (size_t)((s * B + b) * H + h)), at, rt);
                }
        J->checked = 1;
        J->bitwise = J->first_diff < 0;
        J->tol_ok = J->bitwise && !J->cache_bad;
        for (int i = 0; i < NERR; i++)
            if (J->err[i].nonfinite || !(J->err[i].worst_tol <= 1))
                J->tol_ok = 0;
    }
    drv_free(ke); drv_free(ve); drv_free(qe); drv_free(oe); drv_free(le); drv_free(ro); drv_free(rl);
    for (int i = 0; i < NIN; i++)
        drv_free(in64[i]);
    return d->code;
}

static int infer_check(infer_job *J, drv *d)
{
    if (!J->c.check)
        return 0;
    if ((J->files ? check_cache_files : check_cache)(J, d))
        return d->code ? d->code : DRV_RUNTIME;
    return d->rank == 0 ? check_root(J, d) : 0;
}

/* ------------------------------------------------------------------ write */

/* --out: every step's output as (B, T, H, d) in the layout of --layout. */
static int infer_write(infer_job *J, drv *d)
{
    if (d->rank != 0 || !J->c.fout)
        return 0;
    const uly_attn_desc *a = &J->a;
    const size_t row = (size_t)(a->heads * a->head_dim) * J->es, B = (size_t)a->batch, T = (size_t)J->T;
    char *o = drv_alloc_n(d, B * T, row, "the --out tensor");
    if (!o)
        return d->code;
    for (size_t s = 0; s < T; s++)
        for (size_t b = 0; b < B; b++)
            memcpy(o + (b * T + s) * row, (const char *)J->fdo + (s * B + b) * row, row);
    attn_meta m;
    char *docs = attn_meta_make(d, &m, method_names[J->plan.method], J->P, a, J->c.layout, NULL, 0);
    const int64_t shape[4] = {a->batch, J->T, a->heads, a->head_dim};
    attn_out_write(d, &J->out[0], "o", a->dtype == ULY_F64 ? ULY_ELEM_F64 : ULY_ELEM_F32, a->dtype, J->c.layout, 1, 4,
                   shape, o, ATTN_NMETA, m.keys, m.vals);
    drv_free(docs);
    drv_free(o);
    if (!d->code && !drv_out_commit(d, J->out, 1))
        drv_say(d, "wrote --out %s: the decode outputs (%lld, %lld, %lld, %lld)%s", J->c.fout, (long long)a->batch,
                (long long)(J->c.layout == ATTN_BHSD ? a->heads : J->T),
                (long long)(J->c.layout == ATTN_BHSD ? J->T : a->heads), (long long)a->head_dim,
                J->c.layout == ATTN_BHSD ? " (B, H, T, d)" : " (B, T, H, d)");
    return d->code;
}

/* ----------------------------------------------------------------- report */

static const char *mask_name(const uly_attn_desc *a)
{
    return a->window ? "causal+window" : "causal";
}

static int show_call(const infer_job *J, int w)
{
    return J->want.sent[w] || J->want.recv[w] || J->vol.sent[w] || J->vol.recv[w] ||
           (J->c.scheme == ULY_DECODE_DCP ? w != ULY_DEC_OL_A2A : w == ULY_DEC_OL_A2A);
}

static int json_stats(json_t *o, const char *name, const stats *s)
{
    json_t *x = uly_json_append_object(o);
    return !x || uly_json_set_str(x, "name", name) || uly_json_set_real(x, "min_ms", 1e3 * s->min) ||
           uly_json_set_real(x, "median_ms", 1e3 * s->median) || uly_json_set_real(x, "max_ms", 1e3 * s->max);
}

static int json_bytes(json_t *o, const char *key, uint64_t sent, uint64_t want_sent, uint64_t recv, uint64_t want_recv)
{
    json_t *x = uly_json_add_object(o, key);
    return !x || uly_json_set_int(x, "sent", (int64_t)sent) || uly_json_set_int(x, "expected_sent", (int64_t)want_sent) ||
           uly_json_set_int(x, "recv", (int64_t)recv) || uly_json_set_int(x, "expected_recv", (int64_t)want_recv);
}

static int report_json(infer_job *J)
{
    const uly_attn_desc *a = &J->a;
    json_t *o = json_object();
    if (!o)
        return 1;
    char lay[64];
    int e = 0;
    e |= uly_json_set_int(o, "ranks", J->P);
    e |= uly_json_set_str(o, "method", uly_method_name(J->plan.method));
    e |= uly_json_set_int(o, "ulysses_degree", J->plan.U);
    e |= uly_json_set_int(o, "ring_degree", J->plan.R);
    e |= uly_json_set_str(o, "scheme", uly_decode_name(J->c.scheme));
    e |= uly_json_set_str(o, "kv_layout", uly_kv_layout_name(&J->L, lay, sizeof lay));
    e |= uly_json_set_int(o, "batch", a->batch);
    e |= uly_json_set_int(o, "prompt", J->N);
    e |= uly_json_set_int(o, "generate", J->T);
    e |= uly_json_set_int(o, "heads", a->heads);
    e |= uly_json_set_int(o, "kv_heads", a->kv_heads);
    e |= uly_json_set_int(o, "head_dim", a->head_dim);
    e |= uly_json_set_str(o, "mask", mask_name(a));
    e |= uly_json_set_int(o, "window", a->window);
    e |= uly_json_set_str(o, "dtype", dtype_names[a->dtype]);
    json_t *in = uly_json_add_object(o, "inputs");
    e |= !in || uly_json_set_str(in, "source", J->files ? "files" : "random");
    if (!J->files)
        e |= !e && uly_json_set_int(in, "seed", J->c.seed);
    for (int i = 0; i < NIN && J->files && !e; i++)
        e |= uly_json_set_str(in, in_name[i] + 2, J->in[i].label);
    if (J->files && !e)
        e |= uly_json_set_str(in, "layout", layout_names[J->c.layout]);
    json_t *pf = uly_json_add_object(o, "prefill"), *ph = pf ? uly_json_add_array(pf, "phases") : NULL;
    e |= !ph;
    for (int k = 0; k < NPP && !e; k++)
        if (prefill_names[J->plan.method][k])
            e |= json_stats(ph, prefill_names[J->plan.method][k] + 8, &J->pst[k]);
    e |= !e && json_stats(ph, "KV move and rest", &J->pst[PF_REST]);
    if (!e) {
        json_t *w = uly_json_add_object(pf, "wall_ms");
        e |= !w || uly_json_set_real(w, "min", 1e3 * J->pst[PF_WALL].min) ||
             uly_json_set_real(w, "median", 1e3 * J->pst[PF_WALL].median) ||
             uly_json_set_real(w, "max", 1e3 * J->pst[PF_WALL].max);
    }
    json_t *dc = uly_json_add_object(o, "decode"), *dp = dc ? uly_json_add_array(dc, "phases") : NULL;
    e |= !dp;
    for (int k = 0; k < DC_WALL && !e; k++)
        e |= json_stats(dp, decode_keys[k], &J->dst[k]);
    if (!e) {
        json_t *w = uly_json_add_object(dc, "token_ms");
        e |= !w || uly_json_set_real(w, "min", 1e3 * J->dst[DC_WALL].min) ||
             uly_json_set_real(w, "median", 1e3 * J->dst[DC_WALL].median) ||
             uly_json_set_real(w, "max", 1e3 * J->dst[DC_WALL].max);
    }
    json_t *by = uly_json_add_object(o, "bytes_per_step_rank0");
    e |= !by;
    const uint64_t T = (uint64_t)J->T;
    for (int w = 0; w < ULY_DEC_COUNT && !e; w++)
        if (show_call(J, w))
            e |= json_bytes(by, uly_dec_vol_name(w), J->vol.sent[w] / T, J->want.sent[w], J->vol.recv[w] / T,
                            J->want.recv[w]);
    e |= !e && json_bytes(o, "kv_move_rank0", J->kv_sent, J->kv_want_sent, J->kv_recv, J->kv_want_recv);
    e |= uly_json_set_bool(o, "bytes_match_all_ranks", !J->vol_bad);
    json_t *rows = uly_json_add_array(o, "cache_rows");
    e |= !rows;
    for (int r = 0; r < J->P && !e; r++)
        e |= json_array_append_new(rows, json_integer(J->rows[r])) != 0;
    e |= uly_json_set_bool(o, "cache_rows_match_layout", !J->rows_bad);
    if (J->checked && !e) {
        json_t *ck = uly_json_add_object(o, "check");
        e |= !ck || uly_json_set_bool(ck, "decode_bitwise_equal_single_process", J->bitwise) ||
             uly_json_set_bool(ck, "cache_equal_layout", !J->cache_bad);
        for (int i = 0; i < NERR && !e; i++) {
            const errstat *s = &J->err[i];
            json_t *x = uly_json_add_object(ck, err_key[i]);
            e |= !x || uly_json_set_real(x, "max_abs_err", s->nonfinite ? NAN : s->max_abs) ||
                 uly_json_set_real(x, "max_rel_err", s->nonfinite ? NAN : s->max_ref > 0 ? s->max_abs / s->max_ref : 0.0) ||
                 uly_json_set_int(x, "nonfinite", (int64_t)s->nonfinite);
        }
        e |= !e && uly_json_set_bool(ck, "pass", J->tol_ok);
    }
    if (e) {
        json_decref(o);
        return 1;
    }
    return uly_json_print(stdout, o) ? 1 : 0;
}

static void print_stats(const char *name, const stats *s)
{
    printf("%-26s %12.3f %12.3f %12.3f\n", name, 1e3 * s->min, 1e3 * s->median, 1e3 * s->max);
}

static void report_text(infer_job *J)
{
    const uly_attn_desc *a = &J->a;
    char lay[64];
    printf("ulysses infer: %d rank%s, prefill %s (U=%d x R=%d), decode %s, KV layout %s, B=%lld prompt=%lld "
           "generate=%lld H=%lld Hkv=%lld d=%lld mask=%s dtype=%s\n",
           J->P, J->P > 1 ? "s" : "", uly_method_name(J->plan.method), J->plan.U, J->plan.R,
           uly_decode_name(J->c.scheme), uly_kv_layout_name(&J->L, lay, sizeof lay), (long long)a->batch,
           (long long)J->N, (long long)J->T, (long long)a->heads, (long long)a->kv_heads, (long long)a->head_dim,
           mask_name(a), dtype_names[a->dtype]);
    if (a->window)
        printf("  window W=%lld\n", (long long)a->window);
    if (J->files)
        printf("  inputs: --q %s; --k %s; --v %s (layout %s)\n", J->in[T_Q].label, J->in[T_K].label, J->in[T_V].label,
               layout_names[J->c.layout]);
    else
        printf("  inputs: random, seed %lld\n", (long long)J->c.seed);
    printf("\n%-26s %12s %12s %12s   (prefill: over ranks; decode: over ranks x steps; decode token: the slowest "
           "rank's step, over steps)\n", "phase", "min ms", "median ms", "max ms");
    for (int k = 0; k < NPP; k++)
        if (prefill_names[J->plan.method][k])
            print_stats(prefill_names[J->plan.method][k], &J->pst[k]);
    print_stats("prefill KV move and rest", &J->pst[PF_REST]);
    print_stats("prefill", &J->pst[PF_WALL]);
    for (int k = 0; k < NDC; k++)
        print_stats(decode_names[k], &J->dst[k]);
    const uint64_t T = (uint64_t)J->T;
    printf("\n%-18s %16s %16s %16s %16s   (rank 0; bytes per decode step, the KV move once)\n", "call", "sent",
           "expected sent", "received", "expected recv");
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        if (show_call(J, w))
            printf("%-18s %16llu %16llu %16llu %16llu\n", uly_dec_vol_name(w), (unsigned long long)(J->vol.sent[w] / T),
                   (unsigned long long)J->want.sent[w], (unsigned long long)(J->vol.recv[w] / T),
                   (unsigned long long)J->want.recv[w]);
    printf("%-18s %16llu %16llu %16llu %16llu\n", "KV move", (unsigned long long)J->kv_sent,
           (unsigned long long)J->kv_want_sent, (unsigned long long)J->kv_recv, (unsigned long long)J->kv_want_recv);
    printf("measured == expected on every rank: %s\n", J->vol_bad ? "NO" : "yes");
    printf("\ncache rows per rank:");
    for (int r = 0; r < J->P; r++)
        printf(" %lld", (long long)J->rows[r]);
    printf(" (of %lld tokens per sequence; as the layout places them: %s)\n", (long long)J->Ntot,
           J->rows_bad ? "NO" : "yes");
    if (J->checked) {
        printf("\n%-12s %26s %16s %16s\n", "", "bitwise == one process", "max abs err", "max rel err");
        for (int i = 0; i < NERR; i++) {
            const errstat *s = &J->err[i];
            printf("%-12s %26s %16.3e %16.3e\n", err_name[i], i == E_PO ? "-" : J->bitwise ? "yes" : "NO",
                   s->nonfinite ? NAN : s->max_abs, s->nonfinite ? NAN : s->max_ref > 0 ? s->max_abs / s->max_ref : 0.0);
        }
        printf("cache K, V as the layout places them on every rank: %s\n", J->cache_bad ? "NO" : "yes");
        printf("decode bitwise equal to one process and errors vs fp64 reference within atol %.0e + rtol %.0e |ref| "
               "(a quarter of it): %s\n", J->atol, J->rtol, J->tol_ok ? "yes" : "NO");
    }
}

static int infer_report(infer_job *J, drv *d)
{
    if (d->rank != 0)
        return 0;
    if (J->c.json) {
        uly_json_use_hooks();
        if (report_json(J))
            drv_fail(d, DRV_RUNTIME, "out of memory: cannot build the JSON report");
    } else {
        report_text(J);
    }
    if (fflush(stdout) != 0)
        drv_fail(d, DRV_RUNTIME, "cannot write the report to standard output");
    return d->code;
}

/* The run's own verdict: the byte counters, the cache, --check. */
static int infer_verdict(infer_job *J, drv *d)
{
    if (d->rank != 0)
        return 0;
    if (J->vol_bad)
        return drv_fail(d, DRV_RUNTIME, "the bytes moved differ from the plan on some rank (see the table)");
    if (J->rows_bad)
        return drv_fail(d, DRV_RUNTIME, "the cache rows differ from the layout's on some rank (see the table)");
    if (!J->checked || J->tol_ok)
        return 0;
    if (J->cache_bad)
        return drv_fail(d, DRV_RUNTIME, "--check failed: some rank's cache does not hold the layout's K, V");
    if (!J->bitwise)
        return drv_fail(d, DRV_RUNTIME, "--check failed: decode step %lld (position %lld) is not bitwise equal to "
                        "one process", (long long)J->first_diff, (long long)(J->N + J->first_diff));
    for (int i = 0; i < NERR; i++) {
        const errstat *s = &J->err[i];
        if (s->nonfinite)
            return drv_fail(d, DRV_RUNTIME, "--check failed: %s has %zu non-finite element%s in the result or the "
                            "reference", err_name[i], s->nonfinite, s->nonfinite > 1 ? "s" : "");
        if (!(s->worst_tol <= 1))
            return drv_fail(d, DRV_RUNTIME, "--check failed: %s differs from the fp64 reference by %.3e, %.2f times "
                            "the tolerance", err_name[i], s->max_abs, s->worst_tol);
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

static int infer_main(infer_job *J, drv *d, int argc, char **argv)
{
    int ps = infer_parse(J, d, argc, argv);
    drv_field f[DRV_AGREE_MAX];
    int nf = ps == DRV_PARSE_OK ? infer_fields(J, f) : 0;
    int rc = drv_agree(d, ps, f, nf);
    if (rc == DRV_AGREE_HELP) {
        arg_opt opts[NOPTS];
        infer_options(&J->c, opts);
        drv_usage(d, synopsis, opts);
        return 0;
    }
    if (rc)
        return rc;
#define STEP(call) DRV_STEP(d, call)
    STEP(drv_blas_warmup(d, (int)J->c.threads));
    STEP(infer_resolve(J, d));
    STEP(infer_share_shape(J, d));
    STEP(infer_shape(J, d));
    STEP(infer_plan(J, d));
    STEP(infer_alloc(J, d));
    STEP(infer_create(J, d));
    STEP(infer_load(J, d));
    STEP(infer_prefill(J, d));
    uly_progress pl;
    uly_progress_begin(&pl, d->rank == 0 && !J->c.quiet, "ulysses infer");
    for (int64_t s = 0; s < J->T; s++) {
        infer_decode(J, d, s, &pl);
        if ((rc = drv_sync(d))) {
            uly_progress_clear(&pl);
            return rc;
        }
    }
    uly_progress_clear(&pl);
    d->line_open = 0;
    STEP(infer_measure(J, d));
    STEP(infer_finite(J, d));
    STEP(infer_gather(J, d));
    STEP(infer_check(J, d));
    STEP(infer_write(J, d));
    STEP(infer_report(J, d));
    STEP(infer_verdict(J, d));
#undef STEP
    return 0;
}

int cmd_infer(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses infer"))
        return DRV_RUNTIME;
    infer_job J;
    memset(&J, 0, sizeof J);
    int code = infer_main(&J, &d, argc, argv);
    job_free(&J);
    return drv_close(&d, code);
}

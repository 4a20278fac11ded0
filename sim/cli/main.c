/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c -- the ulysses-sim command: run (default), sweep, plan, coll, attn,
 * infer, presets.
 *
 * Exit status: 0 success; 1 a runtime failure (I/O, memory); 2 bad input
 * (flags, numbers, JSON files, impossible configurations), always with a
 * one-line message on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include <jansson.h>
#include "opts.h"
#include "files.h"
#include "output.h"

int cmd_sweep(int argc, char **argv);
int cmd_coll(int argc, char **argv);
int cmd_attn(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_docs(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

static const char usage[] =
    "usage: ulysses-sim [options]            simulate one configuration, every method side by side\n"
    "       ulysses-sim sweep [options]      sweep lists/ranges of --seq, --gpus, --method (CSV)\n"
    "       ulysses-sim plan [options]       search every composition that fits, top K (--top)\n"
    "       ulysses-sim coll --op OP --gpus G --bytes S   time of one collective (nccl-tests units)\n"
    "       ulysses-sim presets [NAME]       list the shipped presets, or print one\n"
    "       ulysses-sim attn [options]       one distributed attention as `ulysses attn` runs it\n"
    "       ulysses-sim infer [options]      serving: time to first token, per output token, KV capacity\n"
    "       ulysses-sim docs [options]       packed documents: per-rank attention work of CP balancers\n"
    "       ulysses-sim calibrate --platform P --nccl-tests FILE...   fit a platform to nccl-tests output\n"
    "\n"
    "Predicts iteration time, communication and memory per GPU of sequence-parallel\n"
    "training on a GPU cluster with a discrete-event simulation (see doc/simulator.md).\n"
    "With no options: GPT-7B on 64 A100-40GB at 128K tokens, every method.\n"
    "\n"
    "options:\n"
    "  --platform PRESET|FILE  cluster description (default dgx-a100-40g)\n"
    "  --model PRESET|FILE     model description (default gpt-7b), or a HuggingFace\n"
    "                          config.json (Llama, Mistral, Qwen2/3, GPT-2, GPT-NeoX)\n"
    "  --gpus N                number of GPUs, at most 1048576 (default 64)\n"
    "  --seq N                 tokens per sequence, 128K = 131072 (default: the model's;\n"
    "                          required with a HuggingFace config),\n"
    "                          at most 2^40 = 1024G\n"
    "  --method LIST           ulysses,megatron-sp,ring,ring-zigzag,usp,all-gather or all\n"
    "                          (default all); Megatron cp_comm_type names a2a, p2p,\n"
    "                          all_gather, a2a+p2p are accepted\n"
    "  --sp N, --cp N          sequence/context-parallel degree (TP degree for megatron-sp);\n"
    "                          this and --tp, --pp, --dp, --ulysses: at most 1M\n"
    "  --tp N                  tensor-parallel degree composed with the method (Megatron TP\n"
    "                          with sequence parallelism; megatron-sp: = --sp)\n"
    "  --pp N                  pipeline stages, Megatron-Core's 1F1B (must divide the\n"
    "                          layers unless --pp-first/last-layers are given)\n"
    "  --vpp V                 interleaved 1F1B, V virtual stages per pipeline rank\n"
    "                          (--virtual-pipeline-model-parallel-size; the micro-batches\n"
    "                          must be a multiple of --pp)\n"
    "  --pp-first-layers N     layers of the first pipeline stage, --pp-last-layers N\n"
    "  --pp-last-layers N      of the last (Megatron's --decoder-first/last-pipeline-\n"
    "                          num-layers); the rest split evenly over the others\n"
    "  --dp N                  data-parallel degree (tp x sp x pp x dp = GPUs)\n"
    "  --ulysses N             usp: all-to-all degree (ring degree = sp / N)\n"
    "  --zero S                ZeRO stage 0-3 (default 3)\n"
    "  --recompute R           none | selective | full (default full)\n"
    "  --a2a ALGO              direct | pairwise all-to-all (default direct)\n"
    "  --micro-batch N         sequences per micro-step per data-parallel rank (at most 1M)\n"
    "  --global-batch N        sequences per iteration (at most 1G)\n"
    "  --layers N              override the model's layer count (at most 100000)\n"
    "  --format F              table | csv | json (default table)\n"
    "  --trace FILE            write a Chrome/Perfetto trace of one iteration\n"
    "                          (t.json becomes t.METHOD.json when several methods run;\n"
    "                          written to temporaries, renamed when every method ran;\n"
    "                          each file written is named on stderr)\n"
    "  --trace-ranks LIST      GPUs the trace shows, each its own process pair: all, or\n"
    "                          GPUs and ranges like 0,3 or 0-7 (default 0; at most 64;\n"
    "                          every GPU shows the simulated representative schedule)\n"
    "  --max-seq               also find the longest sequence that fits in memory\n"
    "                          (HBM and, with --offload, host memory) and what binds\n"
    "  --tiled-loss            logits and loss in tiles of about hidden tokens (never the\n"
    "                          tokens x vocab logits)\n"
    "  --tiled-mlp [K|auto]    TiledMLP: the MLP in K shards of the tokens (auto, the\n"
    "                          default: ceil(tokens / hidden)); one extra MLP forward\n"
    "  --offload LIST          activations, optimizer, params (comma-separated) or none:\n"
    "                          layer checkpoints to host memory over the host link;\n"
    "                          ZeRO-Offload optimizer (CPU Adam) and ZeRO-3 parameters\n"
    "  --head-chunks K         ulysses, usp: attention K head groups at a time (UPipe)\n"
    "  --attn-kernel K         flash (default: FlashAttention, no score matrix in HBM) or\n"
    "                          unfused (scores, softmax and probabilities in HBM, as\n"
    "                          Megatron-LM's CoreAttention / eager attention; ulysses and\n"
    "                          megatron-sp); --attn-dropout adds its dropout kernel and mask\n"
    "  --engine E              auto | classes | full (default auto): collectives by one\n"
    "                          group per class of alike groups (same numbers), or every\n"
    "                          flow of every GPU; classes refuses what it cannot reduce\n"
    "  -h, --help              this text\n"
    "  --version               the version, what this build was built with, and the license\n"
    "                          (alone: ulysses-sim --version)\n"
    "\n"
    "Presets are looked up in $ULYSSES_SIM_PRESETS, then the installed data directory.\n"
    "Every row and column of the output (exposed comm, MFU, SP comm, ...) is defined\n"
    "in doc/glossary.md; the model behind them in doc/simulator.md.\n"
    "\n"
    "Description files (JSON; any other key is an error naming the nearest valid one;\n"
    "units and meaning in doc/simulator.md section 2):\n"
    "  platform: name, description, sources, gpus_per_node, max_nodes,\n"
    "    gpu {model, peak_tflops_bf16, peak_tflops_fp16, peak_tflops_fp32, gemm_efficiency,\n"
    "         attention_efficiency, attention_skips_masked_blocks, hbm_GiB, hbm_bw_GBps,\n"
    "         reserved_GiB},\n"
    "    intra_node {fabric, topology (switch | full_mesh), bw_GBps_per_dir (switch),\n"
    "                link_bw_GBps_per_dir (full_mesh: one peer link), nvlink_domain_gpus,\n"
    "                efficiency, latency_us, nvls, nvls_efficiency},\n"
    "    inter_node {fabric, nic_bw_Gbps, nics_per_node, efficiency, latency_us,\n"
    "                spine_oversubscription},\n"
    "    host {cpu, link, memory_GiB (per node), link_bw_GBps_per_dir (per GPU),\n"
    "          link_efficiency, cores, cpu_peak_tflops_fp32, cpu_efficiency, mem_bw_GBps}\n"
    "          (optional: what --offload needs)\n"
    "  model: name, description, sources, layers, hidden, heads, kv_heads, ffn_hidden, vocab,\n"
    "    mlp, tied_embeddings, causal, seq_tokens, micro_batch, global_batch, dtype,\n"
    "    head_dim, qkv_bias, o_bias, qk_norm (optional)\n"
    "\n"
    "Adjustments (a global batch rounded up) and costly choices (uneven heads, replicated\n"
    "KV heads) are printed as warnings in every format; numbers the simulation cannot\n"
    "represent are refused (exit 2).  Capacity planning: doc/planning.md.\n";

static const char sweep_usage[] =
    "usage: ulysses-sim sweep [options] [--out FILE.csv] [--plot FILE.svg|.png|.pdf]\n"
    "                         [--plot-metric time|tflops|exposed|memory]\n"
    "                         [--quiet|--no-progress]\n"
    "\n"
    "Runs every combination of --gpus, --seq, --sp (--cp), --tp, --pp and --method and\n"
    "writes one CSV row each (to stdout, or FILE.csv).  Lists: 64,128,256; ranges: 8K:1M\n"
    "(doubling), 1K:8K:+1K (step), 8:512:x4 (factor).  --seq-per-gpu N: weak scaling,\n"
    "the sequence is N x GPUs for each GPU count.  A progress line (configurations\n"
    "done, time left) is drawn on stderr when it is a terminal and the CSV does not go\n"
    "to that terminal too; --quiet (or --no-progress): none.  --plot draws the metric\n"
    "(default iteration time) against the first swept axis with gnuplot, in the format\n"
    "the extension names (svg, png, pdf; others are refused); points that do not fit in\n"
    "memory are marked.\n"
    "--out and --plot are created (as temporaries) before the sweep and renamed together\n"
    "once both are complete; neither may be the --platform or --model file or the other.\n"
    "Limits: --gpus and --seq lists of at most 4096 values, --sp/--tp/--pp of at most 64,\n"
    "and at most 100000 configurations in all (the product of the list lengths and the\n"
    "methods; more is refused before anything runs).  Exit 2 when no configuration\n"
    "could run (each row's reason is in its error column).\n"
    "Other options as for ulysses-sim (see ulysses-sim --help).\n";

static const char presets_usage[] =
    "usage: ulysses-sim presets [NAME]\n"
    "Lists the platform and model presets, or prints the JSON of preset NAME.\n";

/* ------------------------------------------------------------ presets */

static int list_kind(const char *kind, const char *name_only)
{
    char seen[256][64];
    int nseen = 0, found = 0;
    for (const char *const *d = usim_preset_dirs(); *d; d++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", *d, kind);
        DIR *dd = opendir(dir);
        if (!dd)
            continue;
        struct dirent *ent;
        char names[256][64];
        int nn = 0;
        while ((ent = readdir(dd)) != NULL && nn < 256) {
            size_t l = strlen(ent->d_name);
            if (l > 5 && l < 64 && strcmp(ent->d_name + l - 5, ".json") == 0) {
                memcpy(names[nn], ent->d_name, l - 5);
                names[nn][l - 5] = 0;
                nn++;
            }
        }
        closedir(dd);
        qsort(names, (size_t)nn, sizeof names[0], (int (*)(const void *, const void *))strcmp);
        for (int i = 0; i < nn; i++) {
            int dup = 0;
            for (int k = 0; k < nseen; k++)
                dup |= strcmp(seen[k], names[i]) == 0;
            if (dup || nseen >= 256)
                continue;
            strcpy(seen[nseen++], names[i]);
            char path[1400];
            snprintf(path, sizeof path, "%s/%.63s.json", dir, names[i]);
            if (name_only) {
                if (strcmp(name_only, names[i]) != 0)
                    continue;
                FILE *f = fopen(path, "r");
                if (!f)
                    continue;
                char buf[4096];
                size_t n;
                fprintf(stderr, "ulysses-sim: preset file %s\n", path);
                while ((n = fread(buf, 1, sizeof buf, f)) > 0)
                    if (fwrite(buf, 1, n, stdout) != n)
                        break;
                fclose(f);
                return 1;
            }
            found++;
            if (strcmp(kind, "platforms") == 0) {
                usim_platform p;
                char nm[OUT_SAFE];
                out_safe(names[i], nm);   /* a file name: escaped like any text from files */
                if (usim_platform_load(path, &p)) {
                    printf("  %-16s (invalid: %s)\n", nm, usim_last_error());
                    continue;
                }
                printf("  %-16s %d GPUs/node, %.0f TFLOP/s bf16, %.0f GiB HBM, intra-node %.0f GB/s/dir, "
                       "NIC %.0f GB/s/dir (effective)%s\n",
                       nm, p.gpus_per_node, p.peak_flops[USIM_BF16] / 1e12,
                       p.hbm_bytes / 1073741824.0, usim_nvl_Bps(&p) / 1e9, usim_nic_Bps(&p) / 1e9,
                       p.max_nodes == 1 ? ", single node" : "");
            } else {
                usim_model m;
                char nm[OUT_SAFE];
                out_safe(names[i], nm);
                if (usim_model_load(path, &m)) {
                    printf("  %-16s (invalid: %s)\n", nm, usim_last_error());
                    continue;
                }
                printf("  %-16s %.2fB params, %lld layers, hidden %lld, %lld heads (%lld KV), "
                       "ffn %lld, vocab %lld\n",
                       nm, usim_model_params(&m) / 1e9, (long long)m.layers,
                       (long long)m.hidden, (long long)m.heads, (long long)m.kv_heads,
                       (long long)m.ffn, (long long)m.vocab);
            }
        }
    }
    return found;
}

static int cmd_presets(int argc, char **argv)
{
    if (argc > 2 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0)) {
        fputs(presets_usage, stdout);
        return 0;
    }
    if (argc > 3)
        die_usage("presets: too many arguments (see ulysses-sim presets --help)");
    if (argc == 3) {
        if (argv[2][0] == '-')
            die_usage("presets: unknown option '%s'", argv[2]);
        if (list_kind("platforms", argv[2]) || list_kind("models", argv[2]))
            return 0;
        die_usage("presets: no preset named '%s'", argv[2]);
    }
    printf("platforms (--platform):\n");
    int n = list_kind("platforms", NULL);
    printf("models (--model):\n");
    n += list_kind("models", NULL);
    if (n == 0) {
        fprintf(stderr, "ulysses-sim: no presets found (searched");
        for (const char *const *d = usim_preset_dirs(); *d; d++)
            fprintf(stderr, " %s", *d);
        fprintf(stderr, "); set ULYSSES_SIM_PRESETS\n");
        return 1;
    }
    printf("search path:");
    for (const char *const *d = usim_preset_dirs(); *d; d++)
        printf(" %s", *d);
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------ run */

/* --trace-ranks against the run's GPU count: the GPUs traced in *t (GPU 0
 * when not given), described in desc ("GPU 0", "GPUs 0-3,8").  A GPU
 * outside the run exits 2; "all" on more GPUs than a trace holds traces the
 * first USIM_TRACE_MAX_GPUS and says so. */
static void trace_ranks_resolve(opts *o, int gpus, usim_trace_opts *t, char *desc, size_t n)
{
    static int all[USIM_TRACE_MAX_GPUS];
    if ((o->ntrace_ranks || o->trace_ranks_all) && !o->trace)
        die_usage("--trace-ranks needs --trace FILE");
    if (o->trace_ranks_all) {
        int k = gpus < USIM_TRACE_MAX_GPUS ? gpus : USIM_TRACE_MAX_GPUS;
        for (int g = 0; g < k; g++)
            all[g] = g;
        if (o->trace && gpus > k)
            fprintf(stderr, "ulysses-sim: note: --trace-ranks all: tracing GPUs 0-%d of the %d (a trace "
                            "holds at most %d GPUs)\n", k - 1, gpus, USIM_TRACE_MAX_GPUS);
        t->gpus = all;
        t->ngpus = k;
    } else if (o->ntrace_ranks) {
        for (int q = 0; q < o->ntrace_ranks; q++)
            if (o->trace_ranks[q] >= gpus)
                die_usage("--trace-ranks: GPU %d is not one of the %d GPUs of this run (0-%d)",
                          o->trace_ranks[q], gpus, gpus - 1);
        t->gpus = o->trace_ranks;
        t->ngpus = o->ntrace_ranks;
    } else {
        static const int gpu0 = 0;
        t->gpus = &gpu0;
        t->ngpus = 1;
    }
    /* runs of consecutive GPUs as ranges */
    size_t len = (size_t)snprintf(desc, n, "GPU%s ", t->ngpus > 1 ? "s" : "");
    for (int q = 0; q < t->ngpus && len < n; q++) {
        int r = q;
        while (r + 1 < t->ngpus && t->gpus[r + 1] == t->gpus[r] + 1)
            r++;
        if (r > q)
            len += (size_t)snprintf(desc + len, n - len, "%s%d-%d", q ? "," : "", t->gpus[q], t->gpus[r]);
        else
            len += (size_t)snprintf(desc + len, n - len, "%s%d", q ? "," : "", t->gpus[q]);
        q = r;
    }
}

static int run(int argc, char **argv)
{
    opts o;
    opts_defaults(&o);
    int help;
    if (opts_parse(&o, argc, argv, 1, OPTS_RUN, &help))
        die_usage("%s", opts_error());
    if (help) {
        fputs(usage, stdout);
        return 0;
    }
    usim_platform p;
    usim_model m;
    uly_in ins[2];
    load_inputs_files(&o, &p, &m, ins);
    /* --trace: one file per method when there are several; every trace
     * checked and created as a temporary before simulating, all renamed at
     * the end (files.h) */
    static char tpath[ULY_METHOD_ALL][1100];
    uly_out touts[ULY_METHOD_ALL];
    memset(touts, 0, sizeof touts);
    for (int i = 0; o.trace && i < o.nmethods; i++) {
        if (o.nmethods > 1) {
            const char *dot = strrchr(o.trace, '.');
            size_t stem = dot && dot > strrchr(o.trace, '/') ? (size_t)(dot - o.trace) : strlen(o.trace);
            int len = snprintf(tpath[i], sizeof tpath[i], "%.*s.%s%s", (int)stem, o.trace,
                               uly_method_sim_name(o.methods[i]), dot && stem < strlen(o.trace) ? dot : ".json");
            if (len < 0 || (size_t)len >= sizeof tpath[i])
                die_usage("--trace: the path is longer than %zu characters", sizeof tpath[i] - 1);
        } else {
            snprintf(tpath[i], sizeof tpath[i], "%s", o.trace);
            if (strlen(o.trace) >= sizeof tpath[i])
                die_usage("--trace: the path is longer than %zu characters", sizeof tpath[i] - 1);
        }
        touts[i].path = tpath[i];
        touts[i].what = "--trace";
    }
    if (o.trace)
        files_prepare(touts, o.nmethods, ins, 2);
    int gpus = o.ngpus ? (int)o.gpus[0] : 64;
    if (usim_platform_check_gpus(&p, gpus))
        die_usage("%s", usim_last_error());
    usim_trace_opts topt;
    char tranks[400];
    trace_ranks_resolve(&o, gpus, &topt, tranks, sizeof tranks);
    apply_model_overrides(&o, &m, o.nseqs ? o.seqs[0] : 0);
    usim_sim *sim = usim_sim_new(&p, gpus);
    if (!sim) {
        fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
        return 1;
    }
    usim_sim_set_engine(sim, o.engine);
    row rows[ULY_METHOD_ALL];
    memset(rows, 0, sizeof rows);
    int nok = 0;
    for (int i = 0; i < o.nmethods; i++) {
        row *w = &rows[i];
        w->method = o.methods[i];
        usim_job j = make_job(&o, o.methods[i], gpus);
        usim_job chk = j;
        if (usim_job_resolve(&m, &p, &chk)) {
            if (o.methods_explicit) {
                /* an explicit request that cannot run is bad input */
                usim_sim_free(sim);
                die_usage("%s", usim_last_error());
            }
            snprintf(w->err, sizeof w->err, "%s", usim_last_error());
            if (touts[i].path) { /* no trace for a method that cannot run: its previous one stays */
                uly_out_discard(&touts[i], 1);
                touts[i].path = NULL;
            }
            continue;
        }
        FILE *tf = NULL;
        if (touts[i].path && !(tf = files_open(&touts[i]))) {
            usim_sim_free(sim);
            return 1;
        }
        int rc = usim_simulate_ex(sim, &m, &j, tf, &topt, &w->r);
        if (tf && files_ready(&touts[i], tf)) {
            usim_sim_free(sim);
            return 1;
        }
        if (rc) {
            fprintf(stderr, "ulysses-sim: %s: %s\n", uly_method_sim_name(w->method), usim_last_error());
            usim_sim_free(sim);
            return rc == USIM_EINVAL ? EXIT_BADINPUT : 1;
        }
        if (o.max_seq) {
            if (usim_max_seq_ex(&p, &m, &j, &w->max_seq, &w->max_bind)) {
                fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
                usim_sim_free(sim);
                return 1;
            }
            w->has_max = 1;
        }
        w->ok = 1;
        nok++;
    }
    usim_sim_free(sim);
    if (nok == 0)   /* no method can run this configuration: report the first reason */
        die_usage("%s", rows[0].err);
    if (files_commit())
        return 1;
    for (int i = 0; i < o.nmethods; i++)   /* every trace written, by name */
        if (touts[i].path)
            fprintf(stderr, "ulysses-sim: wrote %s (trace of %s, %s)\n", touts[i].path,
                    uly_method_sim_name(o.methods[i]), tranks);
    switch (o.format) {
    case FMT_CSV:
        out_csv_header(stdout);
        for (int i = 0; i < o.nmethods; i++)
            out_csv_row(stdout, &p, &m, gpus, &rows[i]);
        break;
    case FMT_JSON:
        if (out_json(stdout, &p, &m, gpus, rows, o.nmethods)) {
            fprintf(stderr, "ulysses-sim: cannot write the JSON output (out of memory or write error)\n");
            return 1;
        }
        break;
    default:
        out_table(stdout, &p, &m, rows, o.nmethods);
        break;
    }
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}

static int dispatch(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "presets") == 0)
        return cmd_presets(argc, argv);
    if (argc > 1 && strcmp(argv[1], "coll") == 0)
        return cmd_coll(argc, argv);
    if (argc > 1 && strcmp(argv[1], "sweep") == 0) {
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                fputs(sweep_usage, stdout);
                return 0;
            }
        return cmd_sweep(argc, argv);
    }
    if (argc > 1 && strcmp(argv[1], "attn") == 0)
        return cmd_attn(argc, argv);
    if (argc > 1 && strcmp(argv[1], "plan") == 0)
        return cmd_plan(argc, argv);
    if (argc > 1 && strcmp(argv[1], "infer") == 0)
        return cmd_infer(argc, argv);
    if (argc > 1 && strcmp(argv[1], "docs") == 0)
        return cmd_docs(argc, argv);
    if (argc > 1 && strcmp(argv[1], "calibrate") == 0)
        return cmd_calibrate(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        /* the version, what this build was built with, the license */
        if (argc > 2)
            die_usage("--version takes no arguments ('%s')", argv[2]);
        printf("ulysses-sim %s\n", PACKAGE_VERSION);
        printf("libusim %s: jansson %s", PACKAGE_VERSION, JANSSON_VERSION);
#ifdef GNUPLOT_PATH
        printf(", sweep --plot by %s\n", GNUPLOT_PATH);
#else
        printf(", no gnuplot (no sweep --plot)\n");
#endif
        printf("License: Apache-2.0 <https://www.apache.org/licenses/LICENSE-2.0> (the file LICENSE)\n");
        return 0;
    }
    return run(argc, argv);
}

int main(int argc, char **argv)
{
    int rc = dispatch(argc, argv);
    /* whatever the command, output that did not reach stdout is a failure
     * (a full disk, a closed pipe), never exit 0 */
    int bad = fflush(stdout) != 0 || ferror(stdout);
    if (fclose(stdout) != 0)
        bad = 1;
    if (bad && rc == 0) {   /* a failed command has said why already */
        fprintf(stderr, "ulysses-sim: error writing the output to stdout\n");
        return 1;
    }
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll.c -- `ulysses-sim coll`: the time of one collective on a platform,
 * with algorithm and bus bandwidth in nccl-tests' conventions, for one size
 * or a range of sizes (an nccl-tests-style table).
 *
 * nccl-tests conventions (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
 * the size S is the per-rank buffer the test reports: all-reduce input (=
 * output); all-gather output (each rank contributes S/n); reduce-scatter
 * input (each rank keeps S/n); all-to-all send buffer (S/n to every peer).
 * algbw = S / time; busbw = algbw * 2(n-1)/n for all-reduce and
 * algbw * (n-1)/n for all-gather, reduce-scatter and all-to-all.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base_json.h"
#include "opts.h"
#include "output.h"
#include "usim.h"

static const char coll_usage[] =
    "usage: ulysses-sim coll --op OP --gpus G --bytes S [options]\n"
    "\n"
    "Simulates one collective over G GPUs and prints its time with algorithm and bus\n"
    "bandwidth in nccl-tests' conventions (see doc/simulator.md, section 4).\n"
    "\n"
    "  --op OP            all-reduce | all-gather | reduce-scatter | all-to-all\n"
    "  --gpus G           number of GPUs (whole nodes once it spans nodes), at most\n"
    "                     65536 (all-to-all: 2048, its G x G pair matrix); the time\n"
    "                     grows with G (all-reduce at 65536 runs for minutes)\n"
    "  --bytes S          nccl-tests size per rank: 256M, a list 1M,4M or a range\n"
    "                     1M:1G:x2 (K, M, G = 1024-based), at most 1T, 64 sizes\n"
    "  --gpus-per-node K  place K GPUs on each node, G/K nodes (as mpirun -N K runs\n"
    "                     nccl-tests); default: whole nodes\n"
    "  --platform P       cluster description (default dgx-a100-40g)\n"
    "  --algo A           auto | ring | tree | nvls | nvlstree | pat (all-to-all:\n"
    "                     direct | pairwise)\n"
    "  --proto P          auto | LL | LL128 | Simple\n"
    "  --format F         table | csv | json (default table)\n"
    "  -h, --help         this text\n";

#define MAX_SIZES 64

typedef struct coll_opts {
    const char *platform;
    usim_coll_type op;
    int have_op;
    int64_t gpus, per_node;
    int64_t sizes[MAX_SIZES];
    int nsizes;
    usim_algo algo;
    usim_coll_type a2a;
    int a2a_forced;
    usim_proto proto;
    int format;
} coll_opts;

static int parse(coll_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->platform = "dgx-a100-40g";
    o->a2a = USIM_A2A_DIRECT;
    const char *algo = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(coll_usage, stdout);
            exit(0);
        }
        static const char *const valued[] = {"--op", "--gpus", "--gpus-per-node", "--bytes", "--platform",
                                             "--algo", "--proto", "--format", NULL};
        char name[32];
        const char *val = NULL, *eq = strchr(a, '=');
        size_t l = eq ? (size_t)(eq - a) : strlen(a);
        if (strncmp(a, "--", 2) != 0 || l >= sizeof name)
            die_usage("coll: unexpected argument '%s' (see ulysses-sim coll --help)", a);
        memcpy(name, a, l);
        name[l] = 0;
        int known = 0;
        for (int k = 0; valued[k]; k++)
            known |= strcmp(name, valued[k]) == 0;
        if (!known)
            die_usage("coll: unknown option '%s' (see ulysses-sim coll --help)", name);
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            die_usage("coll: %s needs a value", name);
        if (strcmp(name, "--op") == 0) {
            if (strcmp(val, "all-reduce") == 0) o->op = USIM_ALLREDUCE;
            else if (strcmp(val, "all-gather") == 0) o->op = USIM_ALLGATHER;
            else if (strcmp(val, "reduce-scatter") == 0) o->op = USIM_REDUCE_SCATTER;
            else if (strcmp(val, "all-to-all") == 0) o->op = USIM_A2A_DIRECT;
            else die_usage("coll: --op: expected all-reduce, all-gather, reduce-scatter or all-to-all, "
                           "got '%s'", val);
            o->have_op = 1;
        } else if (strcmp(name, "--gpus") == 0) {
            if (parse_count(val, &o->gpus) || o->gpus < 1 || o->gpus > 65536)
                die_usage("coll: --gpus: expected an integer in [1, 65536], got '%s'", val);
        } else if (strcmp(name, "--gpus-per-node") == 0) {
            if (parse_count(val, &o->per_node) || o->per_node < 1 || o->per_node > 65536)
                die_usage("coll: --gpus-per-node: expected an integer in [1, 65536], got '%s'", val);
        } else if (strcmp(name, "--bytes") == 0) {
            if (parse_list(val, o->sizes, MAX_SIZES, &o->nsizes))
                die_usage("coll: --bytes: expected a size (256M), a list or a range a:b[:xF|:+S] of at "
                          "most %d sizes, got '%s'", MAX_SIZES, val);
            for (int k = 0; k < o->nsizes; k++)
                if (o->sizes[k] > ((int64_t)1 << 40))
                    die_usage("coll: --bytes: %lld is more than 1T", (long long)o->sizes[k]);
        } else if (strcmp(name, "--platform") == 0) {
            o->platform = val;
        } else if (strcmp(name, "--algo") == 0) {
            algo = val;
        } else if (strcmp(name, "--proto") == 0) {
            if (usim_proto_parse(val, &o->proto))
                die_usage("coll: --proto: %s", usim_last_error());
        } else {
            if (strcmp(val, "table") == 0) o->format = FMT_TABLE;
            else if (strcmp(val, "csv") == 0) o->format = FMT_CSV;
            else if (strcmp(val, "json") == 0) o->format = FMT_JSON;
            else die_usage("coll: --format: expected table, csv or json, got '%s'", val);
        }
    }
    if (!o->have_op)
        die_usage("coll: --op is required (see ulysses-sim coll --help)");
    if (!o->gpus)
        die_usage("coll: --gpus is required");
    if (!o->nsizes)
        die_usage("coll: --bytes is required");
    if (algo) {
        if (o->op == USIM_A2A_DIRECT) {
            if (strcmp(algo, "direct") == 0) o->a2a = USIM_A2A_DIRECT;
            else if (strcmp(algo, "pairwise") == 0) o->a2a = USIM_A2A_PAIRWISE;
            else if (strcmp(algo, "auto") != 0)
                die_usage("coll: --algo: all-to-all runs direct or pairwise, got '%s'", algo);
            o->a2a_forced = 1;
        } else if (usim_algo_parse(algo, &o->algo)) {
            die_usage("coll: --algo: %s", usim_last_error());
        }
    }
    if (o->op == USIM_A2A_DIRECT && o->gpus > 2048)
        die_usage("coll: --gpus %lld: all-to-all is simulated on at most 2048 GPUs (its %lld x %lld pair "
                  "matrix)", (long long)o->gpus, (long long)o->gpus, (long long)o->gpus);
    if (o->op == USIM_A2A_DIRECT && o->proto != USIM_PROTO_AUTO && o->proto != USIM_PROTO_SIMPLE)
        die_usage("coll: --proto: all-to-all is modelled with the Simple protocol only");
    return 0;
}

typedef struct coll_row {
    int64_t bytes;
    usim_coll_result r;
    double time_s, algbw, busbw;
} coll_row;

static const char *op_name(usim_coll_type t)
{
    return t == USIM_A2A_DIRECT || t == USIM_A2A_PAIRWISE ? "all-to-all" : usim_coll_name(t);
}

int cmd_coll(int argc, char **argv);

int cmd_coll(int argc, char **argv)
{
    coll_opts o;
    parse(&o, argc, argv);
    usim_platform p;
    char path[1024];
    if (usim_preset_path("platforms", o.platform, path, sizeof path) || usim_platform_load(path, &p))
        die_usage("--platform: %s", usim_last_error());
    int G = (int)o.gpus, K = o.per_node ? (int)o.per_node : 0;
    if (K && (K > p.gpus_per_node || G % K))
        die_usage("coll: --gpus-per-node %d: expected a divisor of --gpus %d of at most the platform's %d "
                  "GPUs per node", K, G, p.gpus_per_node);
    if (K == p.gpus_per_node || (K && G == K))
        K = 0;   /* whole nodes, or one node: as without it */
    /* the network: every node the groups touch, whole */
    int GN = K ? G / K * p.gpus_per_node : G;
    if (usim_platform_check_gpus(&p, GN))
        die_usage("%s", usim_last_error());
    usim_net *net = usim_net_new(&p, GN);
    int *ranks = malloc((size_t)G * sizeof *ranks);
    uint64_t *chunks = malloc((size_t)G * sizeof *chunks);
    uint64_t *pairs = o.op == USIM_A2A_DIRECT ? malloc((size_t)G * G * sizeof *pairs) : NULL;
    coll_row *rows = calloc((size_t)o.nsizes, sizeof *rows);
    if (!net || !ranks || !chunks || (o.op == USIM_A2A_DIRECT && !pairs) || !rows) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    for (int i = 0; i < G; i++)
        ranks[i] = K ? i / K * p.gpus_per_node + i % K : i;
    int rc = 0;
    double n = G;
    for (int k = 0; k < o.nsizes && !rc; k++) {
        uint64_t S = (uint64_t)o.sizes[k];
        usim_coll c;
        memset(&c, 0, sizeof c);
        c.type = o.op == USIM_A2A_DIRECT ? o.a2a : o.op;
        c.ngroups = 1;
        c.size = G;
        c.ranks = ranks;
        c.algo = o.algo;
        c.proto = o.proto;
        if (o.op == USIM_A2A_DIRECT) {
            for (int s = 0; s < G; s++)
                for (int d = 0; d < G; d++)
                    pairs[(size_t)s * G + d] = S / (uint64_t)G + ((uint64_t)d < S % (uint64_t)G);
            c.pair_bytes = pairs;
        } else {
            for (int q = 0; q < G; q++)
                chunks[q] = S / (uint64_t)G + ((uint64_t)q < S % (uint64_t)G);
            c.chunk_bytes = chunks;
        }
        coll_row *w = &rows[k];
        w->bytes = o.sizes[k];
        if ((rc = usim_coll_run(net, &c, &w->r, NULL, NULL))) {
            fprintf(stderr, "ulysses-sim: coll: %s\n", usim_last_error());
            rc = rc == USIM_EINVAL ? EXIT_BADINPUT : 1;
            break;
        }
        if (w->r.duration >= USIM_TIME_LIMIT_PS || w->r.duration < 0) {
            /* a saturated time is not a result */
            fprintf(stderr, "ulysses-sim: coll: %s of %lld bytes on %d GPUs takes more than the %.3g s "
                            "(%.0f days) the simulator represents in int64 picoseconds; check the "
                            "platform's bandwidths and latencies\n", op_name(o.op), (long long)S, G,
                    USIM_TIME_LIMIT_PS * 1e-12, USIM_TIME_LIMIT_PS * 1e-12 / 86400);
            rc = EXIT_BADINPUT;
            break;
        }
        w->time_s = (double)w->r.duration * 1e-12;
        w->algbw = w->time_s > 0 ? (double)S / w->time_s / 1e9 : 0;
        w->busbw = w->algbw * (o.op == USIM_ALLREDUCE ? 2 * (n - 1) / n : (n - 1) / n);
    }
    usim_net_free(net);
    free(ranks);
    free(chunks);
    free(pairs);
    if (rc) {
        free(rows);
        return rc;
    }
    int nodes = K ? G / K : (G + p.gpus_per_node - 1) / p.gpus_per_node;
    int per = K ? K : G < p.gpus_per_node ? G : p.gpus_per_node;
    char pn[OUT_SAFE];
    if (o.format == FMT_JSON) {
        /* through the base library's helpers: no key silently dropped, no bare inf/nan */
        json_t *root = json_object(), *arr = NULL;
        int bad = !root;
        if (!bad) {
            bad |= uly_json_set_str(root, "op", op_name(o.op));
            bad |= uly_json_set_int(root, "gpus", G);
            bad |= uly_json_set_int(root, "nodes", nodes);
            bad |= uly_json_set_str(root, "platform", p.name);
            bad |= !(arr = uly_json_add_array(root, "rows"));
        }
        for (int k = 0; k < o.nsizes && !bad; k++) {
            const coll_row *w = &rows[k];
            json_t *r = uly_json_append_object(arr);
            if (!r) {
                bad = 1;
                break;
            }
            bad |= uly_json_set_int(r, "bytes", w->bytes);
            bad |= uly_json_set_str(r, "algorithm", o.op == USIM_A2A_DIRECT
                                    ? (o.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct")
                                    : usim_algo_name(w->r.algo));
            bad |= uly_json_set_str(r, "protocol", usim_proto_name(w->r.proto));
            bad |= uly_json_set_int(r, "channels", w->r.channels);
            bad |= uly_json_set_real(r, "time_us", w->time_s * 1e6);
            bad |= uly_json_set_real(r, "algbw_GBps", w->algbw);
            bad |= uly_json_set_real(r, "busbw_GBps", w->busbw);
            bad |= uly_json_set_int(r, "max_sent_nvlink_bytes", (int64_t)w->r.max_sent[USIM_CLASS_NVLINK]);
            bad |= uly_json_set_int(r, "max_sent_nic_bytes", (int64_t)w->r.max_sent[USIM_CLASS_NIC]);
        }
        if (uly_json_emit(stdout, root, bad, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(10))) {
            fprintf(stderr, "ulysses-sim: coll: cannot write the JSON output (out of memory or write error)\n");
            rc = 1;
        }
    } else if (o.format == FMT_CSV) {
        printf("op,gpus,nodes,platform,bytes,algorithm,protocol,channels,time_us,algbw_GBps,busbw_GBps,"
               "max_sent_nvlink_bytes,max_sent_nic_bytes\n");
        for (int k = 0; k < o.nsizes; k++) {
            const coll_row *w = &rows[k];
            printf("%s,%d,%d,%s,%lld,%s,%s,%d,%.3f,%.3f,%.3f,%llu,%llu\n", op_name(o.op), G, nodes,
                   out_safe(p.name, pn), (long long)w->bytes,
                   o.op == USIM_A2A_DIRECT ? (o.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct")
                                           : usim_algo_name(w->r.algo),
                   usim_proto_name(w->r.proto), w->r.channels, w->time_s * 1e6, w->algbw, w->busbw,
                   (unsigned long long)w->r.max_sent[USIM_CLASS_NVLINK],
                   (unsigned long long)w->r.max_sent[USIM_CLASS_NIC]);
        }
    } else {
        printf("%s on %d GPUs of %s (%d node%s x %d), nccl-tests conventions\n\n", op_name(o.op), G,
               out_safe(p.name, pn), nodes, nodes > 1 ? "s" : "", per);
        printf("%14s %10s %9s %8s %12s %12s %12s\n", "size [B]", "algorithm", "protocol", "channels",
               "time [us]", "algbw [GB/s]", "busbw [GB/s]");
        for (int k = 0; k < o.nsizes; k++) {
            const coll_row *w = &rows[k];
            printf("%14lld %10s %9s %8d %12.2f %12.2f %12.2f\n", (long long)w->bytes,
                   o.op == USIM_A2A_DIRECT ? (o.a2a == USIM_A2A_PAIRWISE ? "pairwise" : "direct")
                                           : usim_algo_name(w->r.algo),
                   usim_proto_name(w->r.proto), w->r.channels, w->time_s * 1e6, w->algbw, w->busbw);
        }
    }
    free(rows);
    if (fflush(stdout) || rc) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return 0;
}

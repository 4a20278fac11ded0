/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hfconfig.c -- a HuggingFace config.json as a model description.
 *
 * What is here: the architectures the cost model can express (Llama,
 * Mistral, Qwen2, Qwen3, GPT-2, GPT-NeoX), the mixture-of-experts ones it
 * refuses by name, and for every key of those config classes (transformers'
 * configuration_<model>.py and PretrainedConfig's common keys) what becomes
 * of it: read into usim_model, checked (a value the cost model cannot
 * express is an error, a cost it leaves out a warning), or listed as not
 * affecting cost.  A key in none of these lists is warned by name.  The
 * tables are doc/simulator.md's "HuggingFace configs" table.
 *
 * What is not here: training settings (sequence length, batch sizes: a
 * config has none; they are command-line options), and MoE.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

#include "usim.h"
#include "usim_internal.h"
#include "jsonutil.h"
#include "hfconfig.h"

/* ---------------------------------------------------------------- warnings */

enum { HF_MAXWARN = 16, HF_WARNLEN = 400 };
static _Thread_local char hf_warn[HF_MAXWARN][HF_WARNLEN];
static _Thread_local int hf_nwarn, hf_dropped;

static void warn(const usim_jdoc *d, const char *fmt, ...) USIM_PRINTF(2, 3);
static void warn(const usim_jdoc *d, const char *fmt, ...)
{
    if (hf_nwarn >= HF_MAXWARN - 1) {   /* the last slot says how many were left out */
        hf_dropped++;
        snprintf(hf_warn[HF_MAXWARN - 1], HF_WARNLEN, "%s: %d more warnings left out", d->file, hf_dropped);
        hf_nwarn = HF_MAXWARN;
        return;
    }
    char msg[HF_WARNLEN], raw[HF_WARNLEN + 1100];   /* the file name: at most 1024 */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(raw, sizeof raw, "%s: %s", d->file, msg);
    uly_sanitize(hf_warn[hf_nwarn++], HF_WARNLEN, raw);
}

int usim_hf_warnings(void)
{
    return hf_nwarn;
}

const char *usim_hf_warning(int i)
{
    return i >= 0 && i < hf_nwarn ? hf_warn[i] : NULL;
}

/* ----------------------------------------------------------- architectures */

enum { FAM_LLAMA, FAM_GPT2, FAM_NEOX };   /* the layer's shape: gated RMSNorm decoder, GPT-2, GPT-NeoX */

/*
 * The keys of each config class (transformers, src/transformers/models/<m>/
 * configuration_<m>.py, plus the names older releases wrote) that do not
 * affect cost: position encodings, norms' epsilon, initialisation, dropout
 * (an elementwise mask the cost model does not charge), generation and
 * output switches.  The keys each class reads or checks are in the code
 * below; both lists are doc/simulator.md's table.
 */
static const char *const common_nocost[] = {
    /* PretrainedConfig (configuration_utils.py) */
    "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
    "decoder_start_token_id", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
    "use_bfloat16", "tf_legacy_loss", "chunk_size_feed_forward", "is_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
    "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate",
    "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "id2label", "label2id", "num_labels",
    "tokenizer_class", "prefix", "task_specific_params", "problem_type", "_commit_hash",
    "_attn_implementation", "_attn_implementation_autoset", "attn_implementation", "use_cache",
    "initializer_range", NULL};
/* read or checked for every architecture */
static const char *const common_read[] = {
    "architectures", "model_type", "_name_or_path", "torch_dtype", "dtype", "tie_word_embeddings",
    "pruned_heads", "is_encoder_decoder", "add_cross_attention", "quantization_config", NULL};

static const char *const llama_read[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_act", "head_dim", "attention_bias", "mlp_bias", NULL};
static const char *const llama_nocost[] = {
    "max_position_embeddings", "rms_norm_eps", "pretraining_tp", "rope_theta", "rope_scaling",
    "rope_parameters", "attention_dropout", NULL};
static const char *const mistral_read[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_act", "head_dim", "sliding_window", NULL};
static const char *const mistral_nocost[] = {
    "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
    "attention_dropout", NULL};
static const char *const qwen2_read[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_act", "head_dim", "use_sliding_window", "sliding_window",
    "max_window_layers", "layer_types", NULL};
static const char *const qwen2_nocost[] = {
    "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
    "attention_dropout", NULL};
static const char *const qwen3_read[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_act", "head_dim", "attention_bias", "use_sliding_window",
    "sliding_window", "max_window_layers", "layer_types", NULL};
#define qwen3_nocost qwen2_nocost
static const char *const gpt2_read[] = {
    "vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "activation_function", "n_positions",
    /* attribute_map aliases */
    "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings", NULL};
static const char *const gpt2_nocost[] = {
    "n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", NULL};
static const char *const neox_read[] = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "hidden_act", "attention_bias", NULL};
static const char *const neox_nocost[] = {
    "max_position_embeddings", "layer_norm_eps", "rotary_pct", "rotary_emb_base", "partial_rotary_factor",
    "rope_theta", "rope_scaling", "rope_parameters", "use_parallel_residual", "attention_dropout",
    "hidden_dropout", "classifier_dropout", "attention_probs_dropout_prob", "hidden_dropout_prob", NULL};

typedef struct hf_arch {
    const char *arch, *model_type, *config_class;
    int fam;
    int64_t kv_default;        /* num_key_value_heads when absent (0: num_attention_heads) */
    int64_t head_dim_default;  /* head_dim when absent (0: hidden_size / num_attention_heads) */
    int tied_default;          /* tie_word_embeddings when absent */
    int qkv_bias;              /* the q/k/v projections always carry biases */
    int qk_norm;               /* q_norm and k_norm (RMSNorm of head_dim) in every layer */
    int swa_switch;            /* sliding_window applies only with use_sliding_window */
    const char *const *read, *const *nocost;
} hf_arch;

/* Defaults: the config classes' (transformers main, cited in doc/simulator.md). */
static const hf_arch archs[] = {
    {"LlamaForCausalLM", "llama", "LlamaConfig", FAM_LLAMA, 0, 0, 0, 0, 0, 0, llama_read, llama_nocost},
    {"MistralForCausalLM", "mistral", "MistralConfig", FAM_LLAMA, 8, 0, 0, 0, 0, 0, mistral_read, mistral_nocost},
    {"Qwen2ForCausalLM", "qwen2", "Qwen2Config", FAM_LLAMA, 32, 0, 0, 1, 0, 1, qwen2_read, qwen2_nocost},
    {"Qwen3ForCausalLM", "qwen3", "Qwen3Config", FAM_LLAMA, 32, 128, 0, 0, 1, 1, qwen3_read, qwen3_nocost},
    {"GPT2LMHeadModel", "gpt2", "GPT2Config", FAM_GPT2, 0, 0, 1, 0, 0, 0, gpt2_read, gpt2_nocost},
    {"GPTNeoXForCausalLM", "gpt_neox", "GPTNeoXConfig", FAM_NEOX, 0, 0, 0, 0, 0, 0, neox_read, neox_nocost},
};
enum { NARCH = (int)(sizeof archs / sizeof archs[0]) };

const char *const *usim_hf_architectures(void)
{
    static const char *names[NARCH + 1];
    for (int a = 0; a < NARCH; a++)
        names[a] = archs[a].arch;
    names[NARCH] = NULL;
    return names;
}

/* Mixture-of-experts architectures and model types, refused by name (any
 * name with "moe" in it is refused too), and the keys that make any config
 * one (a value above 1). */
static const char *const moe_archs[] = {
    "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM", "OlmoeForCausalLM", "PhimoeForCausalLM", "DbrxForCausalLM", "JambaForCausalLM",
    "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM", "JetMoeForCausalLM", "GptOssForCausalLM",
    "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "MiniMaxForCausalLM", "Glm4MoeForCausalLM",
    "Ernie4_5_MoeForCausalLM", "HunYuanMoEV1ForCausalLM", "Qwen3NextForCausalLM", "Dots1ForCausalLM",
    "SwitchTransformersForConditionalGeneration", "NllbMoeForConditionalGeneration", NULL};
static const char *const moe_types[] = {
    "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "olmoe", "phimoe", "dbrx", "jamba",
    "granitemoe", "granitemoeshared", "jetmoe", "gpt_oss", "llama4", "llama4_text", "minimax", "glm4_moe",
    "ernie4_5_moe", "hunyuan_v1_moe", "qwen3_next", "dots1", "switch_transformers", "nllb_moe", NULL};
static const char *const moe_keys[] = {"num_experts", "num_local_experts", "n_routed_experts", NULL};

static int in_list(const char *s, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

static int has_moe(const char *s)   /* "moe" in any case */
{
    for (; s[0] && s[1] && s[2]; s++)
        if ((s[0] | 32) == 'm' && (s[1] | 32) == 'o' && (s[2] | 32) == 'e')
            return 1;
    return 0;
}

int usim_hf_is_config(const json_t *root)
{
    hf_nwarn = hf_dropped = 0;
    return json_object_get(root, "architectures") != NULL || json_object_get(root, "model_type") != NULL;
}

/* A key given with a value (null is the class's default). */
static json_t *given(json_t *r, const char *key)
{
    json_t *v = json_object_get(r, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int supported_list_err(usim_jdoc *d, const char *key, const char *what, const char *name)
{
    char list[400] = "";
    for (int a = 0; a < NARCH; a++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s (%s)", a ? ", " : "", archs[a].arch, archs[a].model_type);
    }
    return usim_json_err(d, "", key, "%s '%s' is not supported (supported: %s)", what, name, list);
}

/* The architecture the config names, or an error: MoE by name, unknown. */
static int find_arch(usim_jdoc *d, const hf_arch **out)
{
    json_t *r = d->root, *al = json_object_get(r, "architectures"), *mt = json_object_get(r, "model_type");
    const char *type = NULL;
    if (mt && !json_is_null(mt)) {
        int rc = usim_json_str(d, r, "", "model_type", 0, &type);
        if (rc)
            return rc;
    }
    const char *name = NULL;
    if (al && !json_is_null(al)) {
        if (!json_is_array(al) || json_array_size(al) == 0)
            return usim_json_err(d, "", "architectures", "expected a non-empty list of class names");
        size_t i;
        json_t *v;
        json_array_foreach(al, i, v) {
            if (!json_is_string(v))
                return usim_json_err(d, "", "architectures", "expected a list of class names (strings)");
            const char *s = json_string_value(v);
            if (in_list(s, moe_archs) || has_moe(s))
                return usim_json_err(d, "", "architectures", "%s is a mixture-of-experts model; MoE is not "
                                     "modelled", s);
        }
        name = json_string_value(json_array_get(al, 0));
    }
    if (type && (in_list(type, moe_types) || has_moe(type)))
        return usim_json_err(d, "", "model_type", "model_type '%s' is a mixture-of-experts model; MoE is not "
                             "modelled", type);
    for (int k = 0; moe_keys[k]; k++) {
        json_t *v = given(r, moe_keys[k]);
        if (v && (!json_is_integer(v) || json_integer_value(v) > 1))
            return usim_json_err(d, "", moe_keys[k], "%s is a mixture-of-experts model (%s experts); MoE is "
                                 "not modelled", name ? name : type ? type : "this config", moe_keys[k]);
    }
    if (!name && !type)   /* both null */
        return usim_json_err(d, "", "architectures", "null, and no model_type: the architecture is not named");
    const hf_arch *a = NULL;
    for (int k = 0; k < NARCH && !a; k++)
        if (name ? strcmp(name, archs[k].arch) == 0 : strcmp(type, archs[k].model_type) == 0)
            a = &archs[k];
    if (!a)
        return name ? supported_list_err(d, "architectures", "architecture", name)
                    : supported_list_err(d, "model_type", "model_type", type);
    if (name && json_array_size(al) > 1)
        warn(d, "key 'architectures': %zu classes listed; read as the first, %s", json_array_size(al), name);
    if (name && type && strcmp(type, a->model_type) != 0)
        warn(d, "key 'model_type': '%s' is not %s's '%s'; read as %s", type, a->arch, a->model_type, a->arch);
    *out = a;
    return USIM_OK;
}

/* An integer under one of two names (GPT-2's attribute_map): both given must agree. */
static int int_alias(usim_jdoc *d, const char *k1, const char *k2, int required, int64_t lo, int64_t *out,
                     int *found)
{
    json_t *r = d->root;
    int64_t a = 0, b = 0;
    int rc, h1 = given(r, k1) != NULL, h2 = k2 && given(r, k2) != NULL;
    if (h1 && (rc = usim_json_int(d, r, "", k1, 1, lo, &a)))
        return rc;
    if (h2 && (rc = usim_json_int(d, r, "", k2, 1, lo, &b)))
        return rc;
    if (h1 && h2 && a != b)
        return usim_json_err(d, "", k2, "%lld differs from %s (%lld), which it names too", (long long)b, k1,
                             (long long)a);
    if (!h1 && !h2 && required)
        return usim_json_int(d, r, "", k1, 1, lo, &a);   /* "missing (required)" */
    if (found)
        *found = h1 || h2;
    if (h1 || h2)
        *out = h1 ? a : b;
    return USIM_OK;
}

static int opt_bool(usim_jdoc *d, const char *key, int def, int *out)
{
    *out = def;
    return given(d->root, key) ? usim_json_bool(d, d->root, "", key, 1, out) : USIM_OK;
}

/* Elementwise activations of transformers' ACT2FN: the cost model charges an
 * activation by the bytes it reads and writes, the same for each. */
static const char *const acts[] = {"silu", "swish", "gelu", "gelu_new", "gelu_fast", "gelu_python",
                                   "gelu_pytorch_tanh", "gelu_accurate", "gelu_10", "quick_gelu", "relu",
                                   "relu2", "relu6", "leaky_relu", "tanh", "sigmoid", "mish", "laplace",
                                   "linear", NULL};

static int check_act(usim_jdoc *d, const char *key, const char *def)
{
    const char *s = def;
    int rc = given(d->root, key) ? usim_json_str(d, d->root, "", key, 1, &s) : USIM_OK;
    if (rc || in_list(s, acts))
        return rc;
    char list[300] = "";
    for (int i = 0; acts[i]; i++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", acts[i]);
    }
    return usim_json_err(d, "", key, "activation '%s' is not one the cost model knows (an elementwise "
                         "function: %s)", s, list);
}

static int read_dtype(usim_jdoc *d, usim_model *m)
{
    static const char *const hf[USIM_NDTYPE] = {"bfloat16", "float16", "float32"};
    const char *t[2] = {NULL, NULL}, *keys[2] = {"dtype", "torch_dtype"};
    for (int k = 0; k < 2; k++)
        if (given(d->root, keys[k])) {
            int rc = usim_json_str(d, d->root, "", keys[k], 1, &t[k]);
            if (rc)
                return rc;
        }
    if (t[0] && t[1] && strcmp(t[0], t[1]) != 0)
        return usim_json_err(d, "", "torch_dtype", "\"%s\" differs from dtype (\"%s\")", t[1], t[0]);
    const char *s = t[0] ? t[0] : t[1];
    m->dtype = USIM_BF16;
    if (!s) {
        warn(d, "no torch_dtype: costed in bf16");
        return USIM_OK;
    }
    for (int k = 0; k < USIM_NDTYPE; k++)
        if (strcmp(s, hf[k]) == 0) {
            m->dtype = (usim_dtype)k;
            return USIM_OK;
        }
    return usim_json_err(d, "", t[0] ? "dtype" : "torch_dtype", "must be \"bfloat16\", \"float16\" or "
                         "\"float32\" (got \"%s\")", s);
}

/* The model's name: _name_or_path, else the file's name (a file called
 * config.json: its directory's). */
static void set_name(usim_jdoc *d, usim_model *m)
{
    const char *s = NULL;
    json_t *v = given(d->root, "_name_or_path");
    if (v && json_is_string(v) && *json_string_value(v))
        s = json_string_value(v);
    if (s && strlen(s) < sizeof m->name) {
        snprintf(m->name, sizeof m->name, "%s", s);
        return;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s ? s : d->file);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *base = strrchr(buf, '/');
    base = base ? base + 1 : buf;
    n = strlen(base);
    if (!s && n > 5 && strcmp(base + n - 5, ".json") == 0)
        base[n -= 5] = '\0';
    if (!s && strcmp(base, "config") == 0 && base > buf + 1) {
        base[-1] = '\0';   /* .../NAME/config.json: NAME */
        char *dir = strrchr(buf, '/');
        base = dir ? dir + 1 : buf;
    }
    snprintf(m->name, sizeof m->name, "%.*s", (int)(sizeof m->name - 1), base);
}

/* Keys neither read nor listed: warned by name. */
static void warn_unknown(usim_jdoc *d, const hf_arch *a)
{
    const char *key;
    json_t *v;
    json_object_foreach(d->root, key, v) {
        if (in_list(key, common_read) || in_list(key, common_nocost) || in_list(key, a->read) ||
            in_list(key, a->nocost))
            continue;
        warn(d, "key '%s': not a key of %s or PretrainedConfig: not read (doc/simulator.md, HuggingFace "
             "configs)", key, a->config_class);
    }
}

/* The parameters the cost model leaves out, as a warning with their share. */
static void warn_left_out(usim_jdoc *d, const usim_model *m, const char *what, double n)
{
    double total = usim_model_params(m) + n;
    warn(d, "%s (%.0f parameters, %.3f%% of %.4g) are not counted in the parameters, memory or FLOPs", what, n,
         100 * n / total, total);
}

int usim_hf_model_load(usim_jdoc *d, usim_model *m)
{
    memset(m, 0, sizeof *m);
    json_t *r = d->root;
    const hf_arch *a = NULL;
    int rc = find_arch(d, &a);
    if (rc)
        return rc;
    int gpt2 = a->fam == FAM_GPT2;
    int64_t npos = 0, head_dim = 0;
    int have_kv = 0, have_ffn = 0;
    /* the shape */
    if ((rc = int_alias(d, gpt2 ? "n_layer" : "num_hidden_layers", gpt2 ? "num_hidden_layers" : NULL, 1, 1,
                        &m->layers, NULL)) ||
        (rc = int_alias(d, gpt2 ? "n_embd" : "hidden_size", gpt2 ? "hidden_size" : NULL, 1, 1, &m->hidden, NULL)) ||
        (rc = int_alias(d, gpt2 ? "n_head" : "num_attention_heads", gpt2 ? "num_attention_heads" : NULL, 1, 1,
                        &m->heads, NULL)) ||
        (rc = usim_json_int(d, r, "", "vocab_size", 1, 1, &m->vocab)) ||
        (rc = int_alias(d, gpt2 ? "n_inner" : "intermediate_size", NULL, !gpt2, 1, &m->ffn, &have_ffn)) ||
        (rc = check_act(d, gpt2 ? "activation_function" : "hidden_act", gpt2 ? "gelu_new" : a->fam == FAM_NEOX
                        ? "gelu" : "silu")) ||
        (rc = read_dtype(d, m)))
        return rc;
    if (a->fam == FAM_LLAMA) {
        if ((rc = int_alias(d, "num_key_value_heads", NULL, 0, 1, &m->kv_heads, &have_kv)) ||
            (rc = int_alias(d, "head_dim", NULL, 0, 1, &head_dim, NULL)))
            return rc;
    }
    if (gpt2 && (rc = int_alias(d, "n_positions", "max_position_embeddings", 0, 1, &npos, NULL)))
        return rc;
    if (!have_kv)
        m->kv_heads = a->kv_default ? a->kv_default : m->heads;
    if (gpt2 && !have_ffn)
        m->ffn = 4 * m->hidden;   /* n_inner null: 4 x n_embd (GPT2MLP) */
    if (m->heads % m->kv_heads != 0)
        return usim_json_err(d, "", have_kv ? "num_key_value_heads" : "num_attention_heads", "heads (%lld) must "
                             "be a multiple of num_key_value_heads (%lld%s)", (long long)m->heads,
                             (long long)m->kv_heads, have_kv ? "" : ", the default of the config class");
    if (!head_dim)
        head_dim = a->head_dim_default;
    /* head_dim: the attention width heads x head_dim need not be hidden_size
     * (Qwen3-32B: 64 x 128 = 8192 against 5120); 0: hidden_size / heads */
    if (!head_dim && m->hidden % m->heads != 0)
        return usim_json_err(d, "", gpt2 ? "n_head" : "num_attention_heads", "hidden size (%lld) must be a "
                             "multiple of the heads (%lld) when head_dim is not given", (long long)m->hidden,
                             (long long)m->heads);
    m->head_dim = head_dim;
    /* shapes the cost model cannot express */
    int cross = 0, encdec = 0;
    if ((rc = opt_bool(d, "add_cross_attention", 0, &cross)) || (rc = opt_bool(d, "is_encoder_decoder", 0, &encdec)))
        return rc;
    if (cross || encdec)
        return usim_json_err(d, "", cross ? "add_cross_attention" : "is_encoder_decoder", "true: "
                             "cross-attention (an encoder-decoder model) is not modelled");
    json_t *ph = given(r, "pruned_heads");
    if (ph && !(json_is_object(ph) && json_object_size(ph) == 0))
        return usim_json_err(d, "", "pruned_heads", "pruned heads (a different head count per layer) are not "
                             "modelled");
    int tied = a->tied_default;
    if ((rc = opt_bool(d, "tie_word_embeddings", a->tied_default, &tied)))
        return rc;
    m->tied_embeddings = tied;
    m->gated_mlp = a->fam == FAM_LLAMA;
    m->causal = 1;
    m->seq = 0;   /* a training setting: --seq */
    m->micro_batch = 1;
    m->global_batch = 1;
    set_name(d, m);
    snprintf(m->source, sizeof m->source, "%s", d->file);
    /* costs left out (warned, with their size) */
    double L = (double)m->layers, h = (double)m->hidden, F = (double)m->ffn;
    int attn_bias = a->fam == FAM_NEOX, mlp_bias = 0;   /* the class defaults */
    if ((in_list("attention_bias", a->read) && (rc = opt_bool(d, "attention_bias", attn_bias, &attn_bias))) ||
        (in_list("mlp_bias", a->read) && (rc = opt_bool(d, "mlp_bias", 0, &mlp_bias))))
        return rc;
    if (gpt2) {
        warn_left_out(d, m, "GPT2LMHeadModel: the biases of the linear layers and the n_positions x "
                      "n_embd learned position embeddings", L * (5 * h + F) + (double)(npos ? npos : 1024) * h);
    } else if (a->fam == FAM_NEOX) {
        warn_left_out(d, m, attn_bias ? "GPTNeoXForCausalLM: the biases of the attention and MLP projections"
                      : "GPTNeoXForCausalLM: the biases of the MLP projections",
                      L * ((attn_bias ? 4 * h : 0) + F + h));
    } else {
        /* the q/k/v (Qwen2; attention_bias: q/k/v/o) biases and Qwen3's
         * q_norm, k_norm are counted in the parameters (usim_model_layer_params) */
        m->qkv_bias = a->qkv_bias || attn_bias;
        m->o_bias = attn_bias;
        m->qk_norm = a->qk_norm;
        if (mlp_bias)
            warn_left_out(d, m, "mlp_bias true: the biases of the MLP projections", L * (2 * F + h));
    }
    /* sliding-window attention: costed as full causal attention */
    json_t *sw = given(r, "sliding_window");
    int use_sw = sw != NULL, ok;
    if (a->swa_switch && (rc = opt_bool(d, "use_sliding_window", 0, &use_sw)))
        return rc;
    if (in_list("sliding_window", a->read) && use_sw) {
        int64_t w = 0, from = 0, nsw = 0;
        if ((rc = usim_json_int(d, r, "", "sliding_window", 1, 1, &w)))
            return rc;
        if (a->swa_switch && (rc = int_alias(d, "max_window_layers", NULL, 0, 0, &from, &ok)))
            return rc;
        json_t *lt = given(r, "layer_types");
        if (lt && json_is_array(lt)) {
            size_t i;
            json_t *v;
            json_array_foreach(lt, i, v)
                nsw += json_is_string(v) && strcmp(json_string_value(v), "sliding_attention") == 0;
        } else {
            nsw = a->swa_switch ? (m->layers > from ? m->layers - from : 0) : m->layers;
        }
        if (nsw)
            warn(d, "key 'sliding_window': %lld of the %lld layers attend over a window of %lld tokens; "
                 "sliding-window attention is not modelled: every layer is costed with full causal attention "
                 "(an overestimate for sequences longer than %lld)", (long long)nsw, (long long)m->layers,
                 (long long)w, (long long)w);
    }
    json_t *q = given(r, "quantization_config");
    if (q)
        warn(d, "key 'quantization_config': quantized weights are not modelled: costed in %s",
             usim_dtype_name(m->dtype));
    warn_unknown(d, a);
    return USIM_OK;
}

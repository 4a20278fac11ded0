/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hfconfig.h -- HuggingFace config.json files read as model descriptions
 * (sim/hfconfig.c; doc/simulator.md, "HuggingFace configs").
 *
 * usim_model_load hands a JSON object with "architectures" or "model_type"
 * to usim_hf_model_load.  Such a file describes the network only: the model
 * it gives has no sequence length (seq 0: the caller must give one), one
 * sequence per micro-step and one per iteration.
 */
#ifndef USIM_HFCONFIG_H
#define USIM_HFCONFIG_H

#include "usim.h"
#include "jsonutil.h"

/* 1 if root is a HuggingFace config (it has "architectures" or
 * "model_type").  Every model load asks first, so this also forgets the
 * warnings of the previous load. */
int usim_hf_is_config(const json_t *root);

/* Read the config in d into m.  Errors (USIM_EFORMAT, message naming file,
 * line, key): a mixture-of-experts model (by name), an architecture other
 * than the supported ones, a shape the cost model cannot express (head_dim
 * != hidden_size / num_attention_heads, cross-attention, pruned heads), a
 * value of the wrong type.  Keys that are neither read nor listed as not
 * affecting cost, and costs that are not modelled (biases, sliding windows),
 * become warnings (usim_hf_warning). */
int usim_hf_model_load(usim_jdoc *d, usim_model *m);

/* The warnings of the last HuggingFace config read by this thread: their
 * count, and warning i (NULL out of range); text from the file is made safe
 * to print. */
int usim_hf_warnings(void);
const char *usim_hf_warning(int i);

/* The architectures read (NULL-terminated, for messages and docs). */
const char *const *usim_hf_architectures(void);

#endif

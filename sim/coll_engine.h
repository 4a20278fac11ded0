/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_engine.h -- the state the collective engine keeps on one network
 * between collectives (private to libusim): which engine simulates them
 * (classes of alike groups, every group at full flow level, or auto), the
 * last class analysis (the collectives of one job share their groups), the
 * ring window, and a scratch of per-link tags.
 *
 * The network owns one of these as an opaque member (usim_net_coll_engine)
 * and frees it with itself; the collective files (coll_*.c) read and write
 * it through these calls, and net.c never looks inside.  This file calls
 * nothing of the network or the collectives.
 */
#ifndef USIM_COLL_ENGINE_H
#define USIM_COLL_ENGINE_H

#include <stdint.h>

typedef struct usim_coll_engine usim_coll_engine;

/* A new state (engine AUTO, ring window 64, nothing cached), or NULL when out
 * of memory; freeing NULL does nothing. */
usim_coll_engine *usim_coll_engine_new(void);
void usim_coll_engine_free(usim_coll_engine *e);

/* The engine (USIM_ENGINE_*); setting it forgets the cached analysis. */
void usim_coll_engine_set_mode(usim_coll_engine *e, int mode);
int usim_coll_engine_mode(const usim_coll_engine *e);

/* Longest ring simulated step by step (at least 4). */
void usim_coll_engine_set_ring_window(usim_coll_engine *e, int steps);
int usim_coll_engine_ring_window(const usim_coll_engine *e);

/* The class analysis kept for the next collective on the same groups
 * (key: a hash of the group arrays, ng groups of p): the cached positions,
 * or NULL with *on = 0 for "not equivalent", *on = -1 when nothing matches;
 * storing one (e takes pos; NULL: not equivalent). */
int *usim_coll_engine_lookup(usim_coll_engine *e, uint64_t key, int ng, int p, int *on);
void usim_coll_engine_store(usim_coll_engine *e, uint64_t key, int ng, int p, int *pos);

/* One int per link of a network of nlinks links, all zero, for a caller
 * that sets some and puts them back to zero before returning (allocated on
 * first use, untouched pages cost nothing); NULL when out of memory. */
int *usim_coll_engine_link_tags(usim_coll_engine *e, int nlinks);

#endif

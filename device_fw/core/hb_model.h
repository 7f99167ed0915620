/* The ZO state of a loaded model and the commands' math on it (docs/zo-math.md): the LOSS
 * and ZOCF sections, trained tensors, masters, the pool; PROBE, APPLY, EVAL, WEIGHTS_CRC.
 * Implemented in core/model.c with core/zo/ (PRNG, perturbations, update, loss). */
#ifndef HB_MODEL_H
#define HB_MODEL_H

#include <stdint.h>

#include "hb_graph.h"
#include "hb_status.h"

/* One data slot as LOAD_DATA left it (docs/protocol.md, "Data blob"). */
typedef struct {
    const int8_t *inputs;  /* n_items * item_size bytes */
    const uint8_t *labels; /* n_items bytes, each < n_classes */
    uint32_t n_items;
    uint16_t item_size;
    uint16_t n_classes;
} hb_slot;

typedef struct hb_model hb_model; /* core/model.c */

/* Check the LOSS and ZOCF sections against g (BAD_MODEL with the declared messages) and
 * compute the working memory the ZO method needs (masters, probe scratch, pool). */
int hb_model_load(hb_model *m, hb_graph *g, hb_status *st);

/* Bytes of arena the ZO state needs (a multiple of 16). */
uint32_t hb_model_work_bytes(const hb_model *m);

/* Place the ZO state at work (16-byte aligned, hb_model_work_bytes bytes): masters from the
 * weights, biases clamped to +-2^30, the pool drawn; updates_applied = 0. */
void hb_model_bind(hb_model *m, uint8_t *work);

/* PROBE on slot s: q loss pairs (Q16) into lp/lm. The weights after are bit-identical. */
void hb_model_probe(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                    uint16_t eps, const uint32_t *seeds, uint16_t q, int32_t *lp, int32_t *lm);

/* APPLY: m -= sum_k c_k u_k on every trained tensor; updates_applied += 1. */
void hb_model_apply(hb_model *m, const uint32_t *seeds, const int32_t *coeffs, uint16_t q);

/* EVAL on items start..start+count-1: arg-max hits and the summed Q16 loss. */
void hb_model_eval(hb_model *m, const hb_slot *s, uint32_t start, uint32_t count,
                   uint32_t *correct, int64_t *loss_sum);

uint32_t hb_model_weights_crc(const hb_model *m);
uint32_t hb_model_updates_applied(const hb_model *m);

hb_model *hb_model_instance(void);

#endif /* HB_MODEL_H */

/* The ZO state of a loaded model and the commands' math on it (docs/zo-math.md): the LOSS
 * and ZOCF sections, trained tensors, masters, the pool; PROBE, APPLY, EVAL, WEIGHTS_CRC.
 * Implemented in core/model.c with core/zo/ (PRNG, perturbations, update, loss). */
#ifndef HB_MODEL_H
#define HB_MODEL_H

#include <stdint.h>

#include "hb_graph.h"
#include "hb_status.h"
#include "zo/zocf.h"

/* One data slot as LOAD_DATA left it (docs/protocol.md, "Data blob"). */
typedef struct {
    const int8_t *inputs;  /* n_items * item_size bytes */
    const uint8_t *labels; /* n_items bytes, each < n_classes */
    uint32_t n_items;
    uint16_t item_size;
    uint16_t n_classes;
    /* the slot's number + 1 for the prefix cache (hb_model_set_free; hb_store_slot sets it),
     * 0: a view no cache may keep (a test's or the bench's own items) */
    uint8_t cache_id;
} hb_slot;

typedef struct hb_model hb_model; /* core/model.c */

/* Check the LOSS and then the ZOCF section against g (which hb_blob_load accepted), in the
 * order of docs/zo-math.md, each failure BAD_MODEL with the declared message (gen/hb_zo.h
 * HB_MSG_LOSS_* / HB_MSG_ZOCF_*), and compute the working memory the ZO method needs.
 * Changes nothing in the blob. Returns 0, or -1 with st set. */
int hb_model_load(hb_model *m, hb_graph *g, hb_status *st);

/* Bytes of arena the ZO state needs (zo_bytes of docs/firmware.md, a multiple of 16; equal to
 * hilbench.zo.zocf.zo_work_bytes), everything the ZO code holds that grows with the model:
 * the masters (q16, int16), the pool, the row buffer (the longest trained weight row), the
 * delta table (4 bytes per value of the distribution), the depthwise row cache (with fresh
 * samples on a trained depthwise filter), the table of trained tensors and their scales, each
 * padded to 16. 64 bits: q16 masters are 4 bytes per int8 weight, so a blob over 1 GiB would
 * need more than 2^32 (no arena holds it; the refusal names the figure). */
uint64_t hb_model_work_bytes(const hb_model *m);

/* Place the ZO state at work (16-byte aligned, hb_model_work_bytes bytes) once the graph is
 * bound: the table of trained tensors, trained biases clamped to +-2^30 in the blob, masters
 * (q16, int16) from the weights (the int8 master is the weights themselves), the pool drawn;
 * updates_applied = 0. */
void hb_model_bind(hb_model *m, uint8_t *work);

/* The commands' math. Preconditions (the protocol layer checks them first, docs/protocol.md):
 * a model loaded and bound; s->item_size == hb_graph_input_size and s->n_classes ==
 * hb_graph_output_size (<= 65535), every label < n_classes (LOAD_DATA checked it), n_items
 * >= 1; the request's ranges (batch_size 1..HB_MAX_BATCH, eps 1..HB_MAX_EPS, q
 * 1..HB_MAX_Q, start + count <= n_items). Outside the ranges a call computes nothing and
 * never reads or writes out of bounds. */

/* PROBE on slot s for the q seeds at `seeds` (q little-endian u32: a request's array, read in
 * place): q loss pairs (Q16) written as little-endian int32 to lp and lm (q each: a response's
 * arrays; two-point: at w + delta_k and w - delta_k; one-sided: at w + delta_k and, in every
 * lm[k], at w). PROBE never writes the weights: each forward pass reads the trained rows
 * perturbed, clamp(w +- delta, +-127) and sat32(b +- delta), produced one output channel at a
 * time into the row buffer of the ZO work area (docs/zo-math.md section 3), so nothing is
 * restored and the blob is untouched. The mini-batch's items are drawn again for every pass
 * (docs/zo-math.md "Mini-batches"), not kept. With a scratch (hb_model_set_scratch) the ops
 * before the frozen prefix's cut run once per item and the batch's activations at the cut
 * are kept there, and each pass makes one perturbed copy of the trained tensors that all B
 * items read in place of rows on demand: the same losses. */
void hb_model_probe(hb_model *m, const hb_slot *s, uint16_t batch_size, uint32_t batch_seed,
                    uint16_t eps, const uint8_t *seeds, uint16_t q, uint8_t *lp, uint8_t *lm);

/* The PROBE's two speed-ups, each used only where it fits the scratch (the same losses
 * either way; docs/firmware.md "PROBE"): the frozen prefix (ops before hb_graph_cut's
 * boundary run once per item, their batch of activations at the cut kept: B pad16(cut_n)
 * bytes, first in the scratch) and one perturbed copy of the trained tensors per pass, read
 * by all B items (int8 weights, int32 biases, each padded to 16: hb_model_copy_bytes, after
 * the prefix). The scratch is memory nothing else uses while a PROBE runs (the device: the
 * arena's free bytes between the model region and the data slots); set once bound, kept until
 * the next bind (NULL/0: neither, every pass from the input with rows produced on demand).
 * 16-byte aligned. hilbench.device.plan.probe_scratch is the twin's same rule. */
void hb_model_set_scratch(hb_model *m, uint8_t *scratch, uint32_t bytes);
/* The prefix cache (docs/firmware.md "The prefix cache"): with a frozen prefix, the
 * activation at the cut of each data slot's items, made the first time an EVAL or a PROBE
 * needs an item and read back by every later one (the ops before the cut then not run again):
 * the same results. It lives at the top of the arena's free region, a slot's part made when a
 * command first reads the slot: a bitmap of the entries made, pad16(ceil(cap / 8)), then cap
 * entries of pad16(cut_n) bytes, for items [0, cap), cap = n_items or as many as leave the
 * PROBE's scratch its copy and HB_MODEL_CACHE_RESERVE_ITEMS prefix entries. The PROBE's
 * scratch is what the caches leave at the bottom. Every part is forgotten when the free
 * region's place, size or the store's generation changes (any upload, discard or model load,
 * which is also the only way the prefix's weights change: APPLY writes trained tensors, all
 * after the cut), and by the next model load or bind, and by a HEAD_GRAD whose accumulators at
 * the free region's bottom would reach it. at NULL: no cache (the bench's and the tests' own
 * scratch, hb_model_set_scratch). */
#define HB_MODEL_CACHE_RESERVE_ITEMS 32u
void hb_model_set_free(hb_model *m, uint8_t *at, uint32_t bytes, uint32_t generation);
/* the prefix cache's parts made so far: total bytes (0: none), and slot s's items with an
 * entry (cap) and entries made (computed) */
uint32_t hb_model_cache_bytes(const hb_model *m);
void hb_model_cache_slot(const hb_model *m, uint8_t slot, uint32_t *cap, uint32_t *made);
/* the cut op (0: no frozen prefix) and its activation */
uint16_t hb_model_cut(const hb_model *m, uint16_t *tensor);
uint64_t hb_model_prefix_bytes(const hb_model *m, uint16_t batch_size);
uint32_t hb_model_copy_bytes(const hb_model *m);
/* which of the two a PROBE of batch_size uses with scratch_bytes of scratch */
void hb_model_probe_plan(const hb_model *m, uint16_t batch_size, uint32_t scratch_bytes,
                         int *prefix, int *copy);
/* A third part, used only with the copy and where it fits after it: the stream words of each
 * trained tensor for the seed being probed (hb_zo_words_bytes each, ZOCF order; with
 * a pool its rows' offsets), drawn once per seed and read by its scale and both passes instead of
 * drawing the stream three times (the same losses). hb_model_probe_words: whether a PROBE of
 * batch_size uses them with scratch_bytes of scratch. */
uint32_t hb_model_words_bytes(const hb_model *m);
int hb_model_probe_words(const hb_model *m, uint16_t batch_size, uint32_t scratch_bytes);

/* Scratch bytes hb_model_apply needs for q samples, `chunk` elements at a time (at least 1;
 * any alignment): the chunk's int64 sums, the q scales S, the chunk's raw samples and
 * multipliers, and up to 7 bytes to align the sums. A longer scratch makes longer chunks
 * (faster), up to HB_ZO_CHUNK elements. */
#define HB_MODEL_APPLY_SCRATCH(q, chunk) (7u + 4u * (uint32_t)(q) + 10u * (uint32_t)(chunk))

/* APPLY: m -= sum_k c_k u_k on every trained tensor for the q seeds and Q16 coefficients at
 * seeds and coeffs (q little-endian u32 / int32 each: a request's arrays, read in place);
 * updates_applied += 1. scratch: scratch_bytes >= HB_MODEL_APPLY_SCRATCH(q, 1) bytes the
 * call may overwrite (the device lends it the response buffer, empty while an APPLY runs).
 * Returns 0, or -1 (nothing changed) if q is outside 1..HB_MAX_Q or the scratch is short. */
int hb_model_apply(hb_model *m, const uint8_t *seeds, const uint8_t *coeffs, uint16_t q,
                   void *scratch, uint32_t scratch_bytes);

/* EVAL on items start..start+count-1: arg-max hits and the summed Q16 loss. */
void hb_model_eval(hb_model *m, const hb_slot *s, uint32_t start, uint32_t count,
                   uint32_t *correct, int64_t *loss_sum);

/* CRC-32 (zlib) over the trained tensors' bytes in ZOCF order (docs/zo-math.md section 9). */
uint32_t hb_model_weights_crc(const hb_model *m);
uint32_t hb_model_updates_applied(const hb_model *m);

/* The hybrid's exact head (HEAD_GRAD, docs/zo-math.md section 11): the last op, a
 * FULLY_CONNECTED producing the output, its m x k int8 filter and int32 bias (-1: none), its
 * input activation and input offset. hb_model_head fills h and answers HB_HEAD_OK, or
 * HB_HEAD_NONE (no such op), or HB_HEAD_TRAINED (the ZOCF trains its filter or bias: the
 * tensor and entry in h). */
typedef struct {
    uint16_t weight, input, trained_tensor, trained_entry;
    int32_t bias, offset;
    uint32_t m, k;
} hb_model_head_info;
enum { HB_HEAD_OK = 0, HB_HEAD_NONE = 1, HB_HEAD_TRAINED = 2 };
int hb_model_head(const hb_model *m, hb_model_head_info *h);

/* HEAD_GRAD on a head hb_model_head accepted: one unperturbed forward pass per item of the
 * batch of batch_seed (PROBE's items), the int32 sums in acc (4 (m k + m) bytes, 4-aligned:
 * the arena's free bytes), then the update with the m little-endian Q24 rates; returns the
 * batch's mean Q16 loss before the update. */
int32_t hb_model_head_grad(hb_model *m, const hb_model_head_info *h, const hb_slot *s,
                           uint16_t batch_size, uint32_t batch_seed, uint32_t round_seed,
                           uint8_t bias_gain, const uint8_t *rates, int32_t *acc);
/* CRC-32 of the head's weights, then biases (little-endian); HEAD_GRADs since the bind. */
uint32_t hb_model_head_crc(const hb_model *m, const hb_model_head_info *h);
uint32_t hb_model_head_grads(const hb_model *m);

/* The trained tensors, in ZOCF order (PRNG tensor t = entry t): their count and the blob
 * tensor index of entry t (t < hb_model_n_trained), once the model is loaded. */
uint16_t hb_model_n_trained(const hb_model *m);
uint16_t hb_model_trained_tensor(const hb_model *m, uint16_t t);

/* The loaded ZO method as parsed (read-only; tests and tools; its table of trained tensors
 * once bound, NULL before) and the pool's P samples once bound (NULL without a pool). */
const hb_zocf *hb_model_zocf(const hb_model *m);
const int8_t *hb_model_pool(const hb_model *m);

hb_model *hb_model_instance(void);

#endif /* HB_MODEL_H */

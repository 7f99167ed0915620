/* The arena's books (docs/firmware.md "Memory: one arena"): the model region grows from the
 * bottom, the data slots are stacked from the top, bulk uploads (docs/protocol.md "Bulk
 * transfer") write into them in place. Implemented in core/store.c; no heap, no pointers kept
 * into the slots (they move when a slot above them is discarded).
 *
 *   0                                                                     arena_bytes
 *   | blob (pad16) | activations (pad16) | ZO work (pad16) |   free   | slot b | slot a |
 */
#ifndef HB_STORE_H
#define HB_STORE_H

#include <stdint.h>

#include "hb_model.h"
#include "hb_status.h"

/* An upload target: the model, or data slot 0..N_SLOTS-1. */
#define HB_STORE_MODEL (-1)

void hb_store_init(uint8_t *arena, uint32_t arena_bytes);

uint32_t hb_store_arena_bytes(void);
/* arena_bytes - model region - the slots' regions */
uint32_t hb_store_free(void);

/* offset = 0: discard the target's upload in progress and its content (the model, or the
 * slot's data), then reserve pad16(total_len) bytes for the new upload, or MODEL_TOO_LARGE
 * (nothing kept). `what` names the request in messages. Returns 0 or -1 with st set. */
int hb_store_begin(int target, const char *what, uint32_t total_len, hb_status *st);

/* offset != 0: an upload in progress with this total_len that has received exactly offset
 * bytes, else BAD_ARGUMENT naming the expected offset (the upload is kept). */
int hb_store_continue(int target, const char *what, uint32_t total_len, uint32_t offset,
                      hb_status *st);

/* Append k bytes (the caller checked offset + k <= total_len); returns bytes received. */
uint32_t hb_store_append(int target, const uint8_t *chunk, uint32_t k);

/* The target's region (the blob as received), its upload's total_len. */
uint8_t *hb_store_data(int target, uint32_t *total_len);

/* A staged upload (LOAD_COMMIT): a debugger wrote the target's total_len bytes in place.
 * Returns the total_len of its upload in progress with nothing received yet (and counts
 * them all received), or 0 when the target has no such upload. */
uint32_t hb_store_stage_done(int target);

/* The upload is complete and its content accepted: no upload in progress, the region kept. */
void hb_store_finish(int target);

/* Drop the target's upload and content; a slot's region is freed (slots below move up). */
void hb_store_discard(int target);

/* A model's completion: grow the model region by act_bytes + zo_bytes (both multiples of 16)
 * if they fit the free memory, else MODEL_TOO_LARGE with the declared message (HB_MSG_
 * MODEL_MEMORY). Returns 0, or -1 with st set. */
int hb_store_model_reserve(uint64_t act_bytes, uint64_t zo_bytes, hb_status *st);

/* Where the activations and the ZO work start (after hb_store_model_reserve). */
uint8_t *hb_store_model_act(void);
uint8_t *hb_store_model_work(void);
/* The free bytes (hb_store_free) and where they start, right after the model region (16-byte
 * aligned): memory a command may use while it runs (a PROBE's scratch, hb_model_set_scratch). */
uint8_t *hb_store_free_region(uint32_t *bytes);

/* A count that changes with every change of the books (an upload begun, continued to its
 * end, discarded; a model's memory reserved): what the free region holds is kept only while
 * it stands (hb_model_set_free). */
uint32_t hb_store_generation(void);

/* A loaded data slot's header, checked at completion (see commands.c). */
void hb_store_slot_set(int slot, uint32_t n_items, uint16_t item_size, uint16_t n_classes);
/* The slot as a view for the model code: 0, or -1 if the slot holds no loaded data. The
 * pointers are valid until the next store call that discards a slot. */
int hb_store_slot(int slot, hb_slot *out);

#endif /* HB_STORE_H */

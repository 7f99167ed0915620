/* The arena's books: model region from the bottom, data slots from the top, bulk uploads in
 * place (see hb_store.h; docs/firmware.md "Memory: one arena", docs/protocol.md "Bulk
 * transfer"). Every size is computed in 64 bits: total_len comes from the wire. */
#include "hb_store.h"

#include <string.h>

#include "hb_bytes.h"
#include "hb_wire.h"

typedef struct {
    uint32_t total_len; /* of the upload (in progress or complete) */
    uint32_t received;
    uint32_t region;    /* bytes reserved: pad16(total_len), 0 when empty */
    uint8_t uploading;  /* an upload is in progress */
    uint8_t loaded;     /* the content was accepted (a model blob, a slot's data) */
    uint16_t item_size, n_classes;
    uint32_t n_items;
} target_books;

static struct {
    uint8_t *arena;
    uint32_t bytes;
    target_books model;
    uint32_t act_bytes, zo_bytes; /* the loaded model's working memory, after its blob */
    target_books slot[HB_N_SLOTS];
    uint8_t order[HB_N_SLOTS]; /* slots holding a region, top of the arena first */
    uint8_t n_order;
    uint32_t generation; /* hb_store_generation */
} s;

uint32_t hb_store_generation(void) { return s.generation; }

void hb_store_init(uint8_t *arena, uint32_t arena_bytes) {
    const uint32_t gen = s.generation + 1u; /* a new boot's books are new books */
    memset(&s, 0, sizeof s);
    s.generation = gen;
    s.arena = arena;
    s.bytes = arena_bytes;
}

uint32_t hb_store_arena_bytes(void) { return s.bytes; }

static uint64_t used(void) {
    uint64_t u = (uint64_t)s.model.region + s.act_bytes + s.zo_bytes;
    for (unsigned i = 0; i < s.n_order; i++) u += s.slot[s.order[i]].region;
    return u;
}

uint32_t hb_store_free(void) {
    uint64_t u = used();
    return u >= s.bytes ? 0 : (uint32_t)(s.bytes - u);
}

static target_books *books(int target) {
    return target == HB_STORE_MODEL ? &s.model : &s.slot[target];
}

/* the slot's offset in the arena: below every slot stacked before it */
static uint32_t slot_offset(int slot) {
    uint32_t top = s.bytes;
    for (unsigned i = 0; i < s.n_order; i++) {
        top -= s.slot[s.order[i]].region;
        if (s.order[i] == slot) break;
    }
    return top;
}

void hb_store_discard(int target) {
    target_books *b = books(target);
    s.generation++;
    if (target == HB_STORE_MODEL) {
        s.act_bytes = s.zo_bytes = 0;
        memset(b, 0, sizeof *b);
        return;
    }
    unsigned pos = 0;
    while (pos < s.n_order && s.order[pos] != target) pos++;
    if (pos < s.n_order) {
        /* the slots below it (stacked later) move up by its region */
        uint32_t at = slot_offset(target), size = b->region;
        uint32_t low = at;
        for (unsigned i = pos + 1; i < s.n_order; i++) low -= s.slot[s.order[i]].region;
        if (at > low) memmove(s.arena + low + size, s.arena + low, at - low);
        for (unsigned i = pos; i + 1 < s.n_order; i++) s.order[i] = s.order[i + 1];
        s.n_order--;
    }
    memset(b, 0, sizeof *b);
}

int hb_store_begin(int target, const char *what, uint32_t total_len, hb_status *st) {
    hb_store_discard(target);
    uint64_t need = hb_pad16(total_len);
    uint32_t free_bytes = hb_store_free();
    if (need > free_bytes)
        return HB_FAIL(st, HB_MSG_BLOB_TOO_LARGE_CODE, HB_MSG_BLOB_TOO_LARGE, HB_S(what),
                       HB_I(total_len), HB_I(need), HB_I(free_bytes), HB_I(s.bytes));
    target_books *b = books(target);
    b->total_len = total_len;
    b->region = (uint32_t)need;
    b->uploading = 1;
    if (target != HB_STORE_MODEL) s.order[s.n_order++] = (uint8_t)target;
    s.generation++;
    return 0;
}

int hb_store_continue(int target, const char *what, uint32_t total_len, uint32_t offset,
                      hb_status *st) {
    target_books *b = books(target);
    if (!b->uploading)
        return HB_FAIL(st, HB_MSG_BULK_NOT_STARTED_CODE, HB_MSG_BULK_NOT_STARTED, HB_S(what),
                       HB_I(offset));
    if (offset != b->received)
        return HB_FAIL(st, HB_MSG_BULK_OFFSET_CODE, HB_MSG_BULK_OFFSET, HB_S(what), HB_I(offset),
                       HB_I(b->received));
    if (total_len != b->total_len)
        return HB_FAIL(st, HB_MSG_BULK_TOTAL_CODE, HB_MSG_BULK_TOTAL, HB_S(what), HB_I(total_len),
                       HB_I(b->total_len), HB_I(b->received));
    return 0;
}

uint8_t *hb_store_data(int target, uint32_t *total_len) {
    target_books *b = books(target);
    if (total_len) *total_len = b->total_len;
    return target == HB_STORE_MODEL ? s.arena : s.arena + slot_offset(target);
}

uint32_t hb_store_append(int target, const uint8_t *chunk, uint32_t k) {
    target_books *b = books(target);
    if (k && b->uploading && k <= b->total_len - b->received) {
        memcpy(hb_store_data(target, NULL) + b->received, chunk, k);
        b->received += k;
    }
    return b->received;
}

uint32_t hb_store_stage_done(int target) {
    target_books *b = books(target);
    if (!b->uploading || b->received) return 0;
    b->received = b->total_len;
    s.generation++;
    return b->total_len;
}

void hb_store_finish(int target) {
    target_books *b = books(target);
    b->uploading = 0;
    b->loaded = 1;
    s.generation++;
}

int hb_store_model_reserve(uint64_t act_bytes, uint64_t zo_bytes, hb_status *st) {
    uint64_t need = act_bytes + zo_bytes; /* each below 2^40: no wrap */
    uint32_t free_bytes = hb_store_free();
    if (need > free_bytes)
        return HB_FAIL(st, HB_MSG_MODEL_MEMORY_CODE, HB_MSG_MODEL_MEMORY, HB_I(need),
                       HB_I(act_bytes), HB_I(zo_bytes), HB_I(free_bytes), HB_I(s.bytes));
    s.act_bytes = (uint32_t)act_bytes; /* both fit: their sum is below the free bytes */
    s.zo_bytes = (uint32_t)zo_bytes;
    s.generation++;
    return 0;
}

uint8_t *hb_store_model_act(void) { return s.arena + s.model.region; }
uint8_t *hb_store_model_work(void) { return s.arena + s.model.region + s.act_bytes; }

uint8_t *hb_store_free_region(uint32_t *bytes) {
    *bytes = hb_store_free();
    return s.arena + s.model.region + s.act_bytes + s.zo_bytes;
}

void hb_store_slot_set(int slot, uint32_t n_items, uint16_t item_size, uint16_t n_classes) {
    target_books *b = books(slot);
    b->n_items = n_items;
    b->item_size = item_size;
    b->n_classes = n_classes;
}

int hb_store_slot(int slot, hb_slot *out) {
    if (slot < 0 || slot >= HB_N_SLOTS || !s.slot[slot].loaded) return -1;
    const target_books *b = &s.slot[slot];
    const uint8_t *base = s.arena + slot_offset(slot);
    out->inputs = (const int8_t *)(base + HB_DATA_HEADER_BYTES);
    out->labels = base + HB_DATA_HEADER_BYTES + (uint64_t)b->n_items * b->item_size;
    out->n_items = b->n_items;
    out->item_size = b->item_size;
    out->n_classes = b->n_classes;
    out->cache_id = (uint8_t)(slot + 1);
    return 0;
}

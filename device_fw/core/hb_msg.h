/* The wire's messages in C: the request checker of docs/protocol.md "Device processing order"
 * steps 6-7, and field accessors, all driven by the layout tables of gen/hb_wire.h (generated
 * from hilbench/protocol/spec.py; the table format is described there and in docs/firmware.md
 * "The wire in C").
 *
 * A handler never computes an offset by hand: it names a field by its generated id
 * (HB_F_<LAYOUT>_<FIELD>) and reads it with hb_msg_u32(payload, HB_F_PROBE_BATCH_SEED) and
 * friends, or takes a pointer to an array / nested payload with hb_msg_ptr. Offsets of fields
 * after a variable-size array are computed from the counts in the payload (the constant ones
 * are also HB_OFF_* macros). The accessors trust the payload: call them only on a request that
 * passed hb_msg_check, or on a buffer you are writing whose count fields are already written.
 *
 *   if (hb_msg_check(type, payload, len, st) < 0) return -1;  // BAD_LENGTH / BAD_ARGUMENT
 *   uint16_t q = hb_msg_u16(payload, HB_F_PROBE_Q);
 *   const uint8_t *seeds = hb_msg_ptr(payload, HB_F_PROBE_SEEDS);  // q little-endian u32
 *
 *   const uint8_t *probe = hb_msg_ptr(payload, HB_F_APPLY_PROBE_PROBE);  // an embedded PROBE
 *   uint16_t eps = hb_msg_u16(probe, HB_F_PROBE_EPS);
 *
 *   const uint8_t *step = hb_msg_ptr(payload, HB_F_APPLY_BATCH_STEPS);  // APPLY records
 *   for (uint32_t i = 0; i < hb_msg_count(payload, HB_F_APPLY_BATCH_STEPS); i++) {
 *       ... hb_msg_u16(step, HB_F_APPLY_Q) ...
 *       step += hb_msg_size(step, HB_L_APPLY);
 *   }
 *
 *   hb_msg_put(out, HB_F_PROBE_R_Q, q);  // then the fields after the arrays
 *   hb_msg_put(out, HB_F_PROBE_R_TIMING_SOURCE, HB_TIMING_NONE);
 */
#ifndef HB_MSG_H
#define HB_MSG_H

#include <stdint.h>

#include "hb_status.h"
#include "hb_wire.h"

/* 1 if `type` is a request type (HB_FIRST_REQUEST..HB_LAST_REQUEST), else 0. */
int hb_msg_is_request(uint8_t type);

/* The layout id of request `type` (HB_L_HELLO .. HB_L_INFER), or HB_NONE. */
uint8_t hb_msg_request_layout(uint8_t type);

/* Steps 6-7 for a request of `type` with `len` payload bytes (payload may be NULL when len is
 * 0): the length the layout implies, counts read as they stand (else BAD_LENGTH, HB_MSG_SHORT /
 * HB_MSG_TRAILING), then every range and cross-field rule in table order (else BAD_ARGUMENT,
 * HB_MSG_RANGE or the rule's template). Returns 0, or -1 with st set; the message equals
 * hilbench.protocol.spec.check_request's byte for byte. A type that is not a request gives
 * UNKNOWN_TYPE (HB_MSG_UNKNOWN_TYPE). Reads only payload[0..len-1]; no state. */
int hb_msg_check(uint8_t type, const uint8_t *payload, uint16_t len, hb_status *st);

/* The same two passes over an instance of any layout (e.g. a response before it is sent). */
int hb_msg_check_layout(uint8_t layout, const uint8_t *p, uint32_t len, hb_status *st);

/* A complete LOAD_DATA blob (docs/protocol.md "Data blob"), as spec.check_data_blob: the
 * header's length (HB_MSG_DATA_SHORT), its fields' ranges (HB_MSG_RANGE, "data blob"), the total
 * length (HB_MSG_DATA_LENGTH), then the labels (HB_MSG_DATA_LABEL names the first one not below
 * n_classes). All BAD_ARGUMENT. Returns 0 or -1 with st set. */
int hb_msg_check_data(const uint8_t *blob, uint32_t len, hb_status *st);

/* Offset of field `f` in the instance at `p` (walks the fields before it, reading counts). */
uint32_t hb_msg_off(const uint8_t *p, hb_field f);

static inline const uint8_t *hb_msg_ptr(const uint8_t *p, hb_field f) {
    return p + hb_msg_off(p, f);
}
static inline uint8_t *hb_msg_wptr(uint8_t *p, hb_field f) { return p + hb_msg_off(p, f); }

/* A scalar field, read with its declared wire type (signed types sign-extended; a u64 above
 * INT64_MAX comes back as its two's-complement int64: use hb_msg_u64). */
int64_t hb_msg_get(const uint8_t *p, hb_field f);
static inline uint8_t hb_msg_u8(const uint8_t *p, hb_field f) { return (uint8_t)hb_msg_get(p, f); }
static inline uint16_t hb_msg_u16(const uint8_t *p, hb_field f) {
    return (uint16_t)hb_msg_get(p, f);
}
static inline uint32_t hb_msg_u32(const uint8_t *p, hb_field f) {
    return (uint32_t)hb_msg_get(p, f);
}
static inline int32_t hb_msg_i32(const uint8_t *p, hb_field f) { return (int32_t)hb_msg_get(p, f); }
static inline uint64_t hb_msg_u64(const uint8_t *p, hb_field f) {
    return (uint64_t)hb_msg_get(p, f);
}

/* Write scalar field `f` with its declared width (the low bytes of v, little-endian). */
void hb_msg_put(uint8_t *p, hb_field f, uint64_t v);

/* Elements of an ARRAY field, or records of a RECORDS field: the value of its count field. */
uint32_t hb_msg_count(const uint8_t *p, hb_field f);

/* Bytes of the REST field `f` of a payload of `len` bytes. */
uint32_t hb_msg_rest_len(const uint8_t *p, uint32_t len, hb_field f);

/* Bytes of one instance of `layout` at p (a layout without a REST field: a record to step
 * over, an embedded payload, a response being built). */
uint32_t hb_msg_size(const uint8_t *p, uint8_t layout);

/* The layout's name as messages say it ("PROBE request"), "" for an unknown id. */
const char *hb_msg_name(uint8_t layout);

#endif /* HB_MSG_H */

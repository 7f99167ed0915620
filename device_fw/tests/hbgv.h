/* Reader of golden-vector files (HBGV, written by fixtures/golden/hbgv.py): named arrays
 * that the Python side computed, for C tests that run without Python.
 *
 * File: "HBGV", u32 version = 1, u32 count, then count records, each
 *   u16 name_len, name bytes, u8 dtype, u8 rank, u32 dims[rank], u32 nbytes, data,
 *   zero padding to a multiple of 4 (from the start of the file).
 * dtype: 0 i8, 1 u8, 2 i16, 3 u16, 4 i32, 5 u32, 6 i64, 7 u64. Little-endian. */
#ifndef HB_HBGV_H
#define HB_HBGV_H

#include <stddef.h>
#include <stdint.h>

enum { HBGV_I8, HBGV_U8, HBGV_I16, HBGV_U16, HBGV_I32, HBGV_U32, HBGV_I64, HBGV_U64 };

typedef struct {
    char name[128];
    uint8_t dtype, rank;
    uint32_t dims[8];
    uint32_t nbytes;
    const uint8_t *data; /* into the file's buffer; 4-byte aligned */
} hbgv_array;

typedef struct {
    uint8_t *buf;
    size_t size;
    uint32_t count;
    hbgv_array *arrays;
} hbgv_file;

/* Load dir/name; exits the test program with a message if the file is missing or malformed. */
void hbgv_load(hbgv_file *f, const char *dir, const char *name);
void hbgv_free(hbgv_file *f);
/* The array called name, or NULL (hbgv_need: exits if missing). */
const hbgv_array *hbgv_find(const hbgv_file *f, const char *name);
const hbgv_array *hbgv_need(const hbgv_file *f, const char *name);
/* Elements of an array (product of dims). */
uint32_t hbgv_elems(const hbgv_array *a);
/* Scalar value of element i as int64 (any integer dtype). */
int64_t hbgv_get(const hbgv_array *a, uint32_t i);

#endif

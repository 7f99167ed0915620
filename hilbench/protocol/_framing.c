/* The firmware's own framing (device_fw/core/frame.c, crc32.c) for the host's per-step path:
 * the frames a host sends and the one frame it reads straight after, built and checked by the
 * code the device runs, compiled for the host. hilbench/protocol/frames.py calls these when
 * this extension is built and keeps its own Python codec for every other case (a partial
 * frame, a damaged one, several in one read): what these return is only ever the frame, or
 * None for "not one plain whole frame here", never an error. Both are held to the Python
 * codec byte for byte (tests/protocol/test_framing_native.py). No state but two buffers the
 * GIL guards. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "hb_frame.h"
#include "hb_wire.h"

#define BODY_MAX (HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD)
/* 0x00, COBS of the longest body, 0x00 */
#define WIRE_MAX (BODY_MAX + BODY_MAX / 254 + 1 + 2)

static uint8_t body_buf[BODY_MAX];
static uint8_t wire_buf[WIRE_MAX];

/* an int argument in lo..hi, else -1 (and no Python error left set) */
static long int_in(PyObject *o, long lo, long hi) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || v < lo || v > hi) {
        PyErr_Clear();
        return -1;
    }
    return v;
}

/* wire(version, type, seq, payload: bytes) -> 0x00 + COBS(body) + 0x00, or None when a field
 * is out of range, the payload is not bytes or longer than HB_MAX_PAYLOAD */
static PyObject *wire(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "wire(version, type, seq, payload)");
        return NULL;
    }
    long version = int_in(args[0], 0, 0xFF);
    long type = int_in(args[1], 0, 0xFF);
    long seq = int_in(args[2], 0, 0xFFFF);
    if (version < 0 || type < 0 || seq < 0 || !PyBytes_CheckExact(args[3])) Py_RETURN_NONE;
    Py_ssize_t n = PyBytes_GET_SIZE(args[3]);
    if (n > HB_MAX_PAYLOAD) Py_RETURN_NONE;
    memcpy(body_buf + HB_HEADER_SIZE, PyBytes_AS_STRING(args[3]), (size_t)n);
    size_t len = hb_frame_encode(wire_buf, body_buf, (uint8_t)version, (uint8_t)type,
                                 (uint16_t)seq, (uint16_t)n);
    return PyBytes_FromStringAndSize((const char *)wire_buf, (Py_ssize_t)len);
}

/* one(data: bytes, max_payload) -> (version, type, seq, payload) of the one intact frame that
 * is all of data (a leading 0x00 allowed, the delimiter last, no other 0x00), or None */
static PyObject *one(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "one(data, max_payload)");
        return NULL;
    }
    long max_payload = int_in(args[1], 0, HB_MAX_PAYLOAD);
    if (max_payload < 0 || !PyBytes_CheckExact(args[0])) Py_RETURN_NONE;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    size_t n = (size_t)PyBytes_GET_SIZE(args[0]);
    size_t start = (n > 1 && data[0] == 0) ? 1u : 0u;
    if (n < start + 2 || data[n - 1] != 0) Py_RETURN_NONE;
    size_t raw = n - 1 - start;
    if (raw > hb_frame_max_encoded_len((uint32_t)max_payload)) Py_RETURN_NONE;
    if (memchr(data + start, 0, raw) != NULL) Py_RETURN_NONE;
    hb_rx rx;
    hb_frame_rx_init(&rx, wire_buf, (uint16_t)max_payload);
    hb_rx_event ev = HB_RX_NONE;
    hb_frame f;
    hb_problem kind = 0;
    size_t used = hb_frame_rx_feed(&rx, data + start, n - start, &ev, &f, &kind);
    if (ev != HB_RX_FRAME || used != n - start) Py_RETURN_NONE;
    return Py_BuildValue("(iiiy#)", (int)f.version, (int)f.type, (int)f.seq,
                         (const char *)f.payload, (Py_ssize_t)f.len);
}

static PyMethodDef methods[] = {
    {"wire", (PyCFunction)(void (*)(void))wire, METH_FASTCALL,
     "wire(version, type, seq, payload) -> 0x00 + COBS(frame) + 0x00, or None"},
    {"one", (PyCFunction)(void (*)(void))one, METH_FASTCALL,
     "one(data, max_payload) -> (version, type, seq, payload) of one whole frame, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_framing",
    "The firmware's framing (device_fw/core/frame.c) for the host's per-step frames.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }

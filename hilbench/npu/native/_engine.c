/* hilbench native NPU engine: a whole int8 network per call, bit-exact with TFLM.
 *
 * The Python side (hilbench/npu/native/__init__.py) lowers a Graph once into a flat op
 * list (int64 records, fields F_* in engine.h), per-channel requantization tables (int32)
 * and an arena layout; forward() then runs every op for S weight sets x N inputs in one
 * call. Weights and biases are read from the caller's arrays on every call (nothing about
 * them is cached between calls, so writes into them are always seen).
 *
 * The kernels come in one table per ISA (engine.h: hb_isa), each in its own file:
 * k_avx512.c (AVX-512 VNNI, with or without VBMI), k_avx2.c (AVX-VNNI and AVX2), k_neon.c
 * (ARM64 NEON dot products) and k_portable.c (plain C the compiler vectorises; on x86-64
 * also compiled with AVX2 enabled). One build holds every table the compiler can produce
 * for its architecture; the table is chosen per call: the best one the CPU (and OS) runs,
 * or one forced by the caller. The integer sums are exact on every ISA and TFLM's
 * requantization decides the bytes, so every table gives the same outputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#if HB_X86
#include <cpuid.h>
#endif
#if HB_ARM64 && defined(__linux__)
#include <sys/auxv.h>
#endif
#if HB_ARM64 && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

static const char *field_names[] = {
#define X(n) #n,
    FIELD_LIST
#undef X
};

/* --- optional per-op timing (off unless enabled with profile(True)) ------------------- */
#include <time.h>
#define PROF_MAX 4096
static int prof_on = 0;
static double prof_ns[PROF_MAX];
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* --- ISA selection ----------------------------------------------------------------------- */
#if HB_X86
/* libgcc's checks (they include the OS's support of the registers' state) */
#define X86(n) (__builtin_cpu_init(), __builtin_cpu_supports(n) != 0)
static int runs_avx512vnni(void) {
    return X86("avx512f") && X86("avx512bw") && X86("avx512vl") && X86("avx512vnni");
}
static int runs_avx512vbmi(void) { return runs_avx512vnni() && X86("avx512vbmi"); }
static int runs_avx2(void) { return X86("avx2") && X86("fma") && X86("bmi") && X86("bmi2"); }
#if HB_HAVE_AVXVNNI
/* AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX[4] (not every compiler's __builtin_cpu_supports knows
 * it); it uses AVX's registers, whose OS support the AVX2 check includes */
static int runs_avxvnni(void) {
    unsigned a, b, c, d;
    if (!runs_avx2() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 4) & 1;
}
#endif
#endif

#if HB_HAVE_NEONDOT
static int runs_neondot(void) {
#if defined(__linux__)
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &n, NULL, 0) == 0 && v;
#else
    return 0;
#endif
}
#endif

static int runs_always(void) { return 1; }

/* Every table this build has, best first. "auto" takes the first one the CPU runs; one
 * marked forced_only is never taken by "auto" (the portable C compiled for AVX2: on a CPU
 * that runs it, the AVX2 kernels are faster). */
typedef struct {
    const hb_isa *isa;
    int (*runs)(void);
    int forced_only;
} isa_entry;

static const isa_entry isa_table[] = {
#if HB_X86
    {&hb_isa_avx512vnni_vbmi, runs_avx512vbmi, 0},
    {&hb_isa_avx512vnni, runs_avx512vnni, 0},
#if HB_HAVE_AVXVNNI
    {&hb_isa_avxvnni, runs_avxvnni, 0},
#endif
    {&hb_isa_avx2, runs_avx2, 0},
    {&hb_isa_portable_avx2, runs_avx2, 1},
#endif
#if HB_HAVE_NEONDOT
    {&hb_isa_neondot, runs_neondot, 0},
#endif
    {&hb_isa_portable, runs_always, 0},
};
#define N_ISAS ((int)(sizeof isa_table / sizeof isa_table[0]))

/* whether this CPU runs each table, asked once when the module loads: the checks execute
 * CPUID, which under a hypervisor exits to it (about 1.5 us per call of the engine measured
 * on a KVM guest) */
static unsigned char isa_runs[N_ISAS];
static void probe_isas(void) {
    for (int i = 0; i < N_ISAS; i++) isa_runs[i] = (unsigned char)(isa_table[i].runs() != 0);
}

static const hb_isa *best(void) {
    for (int i = 0; i < N_ISAS; i++)
        if (!isa_table[i].forced_only && isa_runs[i]) return isa_table[i].isa;
    return &hb_isa_portable;
}

/* the table for a forward call: -1 = the best, else isa_table[i] if this CPU runs it */
static const hb_isa *pick_isa(int i) {
    if (i == -1) return best();
    if (i < 0 || i >= N_ISAS) {
        PyErr_Format(PyExc_ValueError, "native engine: ISA index %d out of range", i);
        return NULL;
    }
    if (!isa_runs[i]) {
        PyErr_Format(PyExc_ValueError, "native engine: this CPU does not run the %s kernels",
                     isa_table[i].isa->name);
        return NULL;
    }
    return isa_table[i].isa;
}

/* --- the forward pass ---------------------------------------------------------------------- */
static void release_views(Py_buffer *v, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
}

/* --- ViewCache: the constants' buffers kept between calls -------------------------------
 * Acquiring a numpy array's buffer costs ~0.1 us, ~100 constants per forward. A plan keeps
 * one ViewCache; slot i holds a reference to the last array passed there and its buffer
 * (exported, so numpy will not resize or free it meanwhile), reused while the same array
 * object comes again. Its contents are read afresh on every call either way. */
typedef struct {
    PyObject_HEAD Py_ssize_t n;
    PyObject **objs;
    Py_buffer *views;
} ViewCache;

static void vc_clear_slot(ViewCache *vc, Py_ssize_t i) {
    if (vc->objs[i]) {
        PyBuffer_Release(&vc->views[i]);
        Py_CLEAR(vc->objs[i]);
    }
}

static void vc_dealloc(ViewCache *vc) {
    for (Py_ssize_t i = 0; i < vc->n; i++) vc_clear_slot(vc, i);
    free(vc->objs);
    free(vc->views);
    Py_TYPE(vc)->tp_free((PyObject *)vc);
}

static PyObject *vc_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t n;
    (void)kw;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "ViewCache size must be >= 0");
        return NULL;
    }
    ViewCache *vc = (ViewCache *)type->tp_alloc(type, 0);
    if (!vc) return NULL;
    vc->n = n;
    vc->objs = (PyObject **)calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    vc->views = (Py_buffer *)calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (!vc->objs || !vc->views) {
        Py_DECREF(vc);
        return PyErr_NoMemory();
    }
    return (PyObject *)vc;
}

static PyTypeObject ViewCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hilbench.npu.native._engine.ViewCache",
    .tp_basicsize = sizeof(ViewCache),
    .tp_dealloc = (destructor)vc_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffers of a plan's constants, kept between calls (see _engine.c).",
    .tp_new = vc_new,
};


static PyObject *forward(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer prog = {0}, qpb = {0}, slotb = {0}, packed = {0}, rsb = {0}, arena = {0},
              xb = {0}, outb = {0}, keptb = {0};
    PyObject *consts, *dumps, *cache;
    Py_ssize_t S, N;
    int isa;
    if (!PyArg_ParseTuple(args, "y*y*y*O!w*w*w*y*w*nniOO|w*", &prog, &qpb, &slotb,
                          &PyTuple_Type, &consts, &packed, &rsb, &arena, &xb, &outb, &S, &N,
                          &isa, &dumps, &cache, &keptb))
        return NULL;
    PyObject *ret = NULL;
    const Py_ssize_t nslots = PyTuple_GET_SIZE(consts);
    ViewCache *vc = NULL;
    if (cache != Py_None) {
        if (!PyObject_TypeCheck(cache, &ViewCacheType) ||
            ((ViewCache *)cache)->n != nslots) {
            PyErr_SetString(PyExc_TypeError, "native engine: cache must be a ViewCache(nslots)");
            PyBuffer_Release(&prog);
            PyBuffer_Release(&qpb);
            PyBuffer_Release(&slotb);
            PyBuffer_Release(&packed);
            PyBuffer_Release(&rsb);
            PyBuffer_Release(&arena);
            PyBuffer_Release(&xb);
            PyBuffer_Release(&outb);
            if (keptb.obj) PyBuffer_Release(&keptb);
            return NULL;
        }
        vc = (ViewCache *)cache;
    }
    /* cv: buffers acquired for this call only (without a cache); cb: every slot's data */
    Py_buffer *cv = (Py_buffer *)calloc((size_t)(nslots ? nslots : 1), sizeof(Py_buffer));
    const char **cb = (const char **)calloc((size_t)(nslots ? nslots : 1), sizeof(char *));
    const int64_t *hdr = (const int64_t *)prog.buf;
    const int64_t nops = hdr[G_NOPS];
    const int64_t *slots = (const int64_t *)slotb.buf; /* per slot: bytes per set, nsets */
    Py_buffer *dv = NULL;
    Py_ssize_t ndumps = 0;
    if (!cv || !cb) {
        PyErr_NoMemory();
        goto done;
    }
    if (prog.len < (Py_ssize_t)((1 + nops) * NF * 8) ||
        slotb.len < (Py_ssize_t)(nslots * 2 * 8)) {
        PyErr_SetString(PyExc_ValueError, "native engine: program too short");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nslots; i++) {
        PyObject *obj = PyTuple_GET_ITEM(consts, i);
        const Py_buffer *view;
        if (vc) {
            if (vc->objs[i] != obj) {
                vc_clear_slot(vc, i);
                if (PyObject_GetBuffer(obj, &vc->views[i], PyBUF_C_CONTIGUOUS) < 0) goto done;
                Py_INCREF(obj);
                vc->objs[i] = obj;
            }
            view = &vc->views[i];
        } else {
            if (PyObject_GetBuffer(obj, &cv[i], PyBUF_C_CONTIGUOUS) < 0) goto done;
            view = &cv[i];
        }
        if (view->len != slots[2 * i] * slots[2 * i + 1]) {
            PyErr_Format(PyExc_ValueError, "native engine: constant %zd has %zd bytes, want %lld",
                         i, view->len, (long long)(slots[2 * i] * slots[2 * i + 1]));
            goto done;
        }
        cb[i] = (const char *)view->buf;
    }
    if (dumps != Py_None) {
        if (!PyTuple_Check(dumps) || PyTuple_GET_SIZE(dumps) != nops) {
            PyErr_SetString(PyExc_ValueError, "native engine: dumps must be a tuple per op");
            goto done;
        }
        ndumps = nops;
        dv = (Py_buffer *)calloc((size_t)(nops ? nops : 1), sizeof(Py_buffer));
        if (!dv) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nops; i++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(dumps, i), &dv[i], PyBUF_WRITABLE) < 0)
                goto done;
            if (dv[i].len != S * N * hdr[(1 + i) * NF + F_OUT_SIZE]) {
                PyErr_SetString(PyExc_ValueError, "native engine: dump buffer size");
                goto done;
            }
        }
    }
    const int64_t in_size = hdr[G_IN_SIZE], out_size = hdr[G_OUT_SIZE];
    if (xb.len != N * in_size || outb.len != S * N * out_size) {
        PyErr_SetString(PyExc_ValueError, "native engine: input/output sizes");
        goto done;
    }
    /* isa: -1 = the best this CPU runs, else an index into isas() (checked to run here) */
    const hb_isa *I = pick_isa(isa);
    if (!I) goto done;
    uint8_t *ar = (uint8_t *)arena.buf;
    const int32_t *qp = (const int32_t *)qpb.buf;
    int32_t *rowsum = (int32_t *)rsb.buf;
    int32_t *beff = (int32_t *)(ar + hdr[G_BSCR_OFF]);
    uint32_t *accs = (uint32_t *)(ar + hdr[G_ACC_OFF]);

    /* No Python API below until the loops end: other threads run meanwhile (the caller
     * serializes calls on one plan, whose arena this uses). */
    /* One weight set: `kept` (optional) holds a header (int64: valid, the table the panels
     * are for) and a copy of every packed GEMM's weights as last packed; an op whose
     * weights equal their copy byte for byte keeps its panels and row sums (both live in
     * the plan's buffers, which nothing else writes), any other is repacked and copied. */
    int64_t *kh = S == 1 && keptb.obj && keptb.len >= 64 ? (int64_t *)keptb.buf : NULL;
    const int kvalid = kh && kh[0] == 1 && kh[1] == (int64_t)(intptr_t)I;
    Py_BEGIN_ALLOW_THREADS
    int64_t kpos = 64;
    for (Py_ssize_t s = 0; s < S; s++) {
        /* 1. repack the packed GEMMs' weights of this set (shared ones once) */
        const double tp = prof_on ? now_ns() : 0.0;
        for (int64_t i = 0; i < nops && I->pack; i++) {
            const int64_t *f = hdr + (1 + i) * NF;
            if (f[F_KIND] != OP_GEMM || f[F_DIRECT]) continue;
            const int64_t ws = f[F_WSLOT];
            if (s > 0 && slots[2 * ws + 1] == 1) continue;
            const int8_t *src =
                (const int8_t *)cb[ws] + (slots[2 * ws + 1] > 1 ? s : 0) * slots[2 * ws];
            if (kh) {
                const int64_t nb = slots[2 * ws];
                if (kpos + nb <= (int64_t)keptb.len) {
                    int8_t *kw = (int8_t *)keptb.buf + kpos;
                    kpos += (nb + 63) / 64 * 64;
                    if (kvalid && memcmp(kw, src, (size_t)nb) == 0) continue;
                    memcpy(kw, src, (size_t)nb);
                } else {
                    kh[0] = 0; /* too short: never valid */
                    kh = NULL;
                }
            }
            int64_t K = f[F_K];
            if (f[F_IMPLICIT] && f[F_K] != f[F_K4]) {
                /* filter rows of KW*C bytes padded to a multiple of 4 with zeros */
                int8_t *wx = (int8_t *)packed.buf + f[F_WX_OFF];
                hb_pad_weights(src, f, wx);
                src = wx;
                K = f[F_K4];
            }
            I->pack(src, f[F_OC], K, f[F_K4], f[F_O16], (int8_t *)packed.buf + f[F_PK_OFF],
                    rowsum + f[F_RS_OFF]);
        }
        if (kh) {
            kh[0] = 1;
            kh[1] = (int64_t)(intptr_t)I;
        }
        if (prof_on) { /* the last slot: the repacking of one set */
            const double dt = now_ns() - tp;
            if (dt < prof_ns[PROF_MAX - 1]) prof_ns[PROF_MAX - 1] = dt;
        }
        /* 2. run the network on every input */
        /* One input: ops before G_FIRST (the first op reading a batched constant) give every
         * set the same result, and their outputs still needed are kept (never freed in the
         * arena layout), as are that op's im2col rows (F_KEEP): run them for set 0 only. */
        const int share = N == 1 && s > 0;
        const int64_t first = share ? hdr[G_FIRST] : 0;
        for (Py_ssize_t n = 0; n < N; n++) {
            if (!share) {
                const uint8_t *xs = (const uint8_t *)xb.buf + n * in_size;
                uint8_t *xin = ar + hdr[G_IN_OFF];
                for (int64_t j = 0; j < in_size; j++) xin[j] = xs[j] ^ 0x80;
            }
            for (int64_t i = 0; i < first && ndumps; i++) {
                const int64_t sz = hdr[(1 + i) * NF + F_OUT_SIZE];
                memcpy((int8_t *)dv[i].buf + (s * N + n) * sz, (int8_t *)dv[i].buf + n * sz,
                       (size_t)sz);
            }
            for (int64_t i = first; i < nops; i++) {
                const int64_t *f = hdr + (1 + i) * NF;
                const double t0 = prof_on ? now_ns() : 0.0;
                const uint8_t *in = ar + f[F_IN];
                uint8_t *out = ar + f[F_OUT];
                opctx c = {f, qp + f[F_QP_OFF], beff, n == 0, NULL, NULL, NULL};
                if (f[F_KIND] == OP_GEMM) c.beff = rowsum + f[F_BEFF_OFF];
                if (f[F_KIND] == OP_GEMM || f[F_KIND] == OP_DW) {
                    const int64_t ws = f[F_WSLOT];
                    c.w = (const int8_t *)cb[ws] +
                          (slots[2 * ws + 1] > 1 ? s : 0) * slots[2 * ws];
                    if (f[F_BSLOT] >= 0) {
                        const int64_t bs = f[F_BSLOT];
                        c.bias = (const int32_t *)((const uint8_t *)cb[bs] +
                                                   (slots[2 * bs + 1] > 1 ? s : 0) * slots[2 * bs]);
                    }
                }
                switch (f[F_KIND]) {
                case OP_GEMM: {
                    c.pk = (const int8_t *)packed.buf + f[F_PK_OFF];
                    const hb_gemm g = {c,
                                       in,
                                       out,
                                       f[F_IM2COL] ? ar + f[F_COLS] : NULL,
                                       share && f[F_KEEP],
                                       ar + f[F_PAD_OFF],
                                       ar + hdr[G_WIDE_OFF],
                                       (int32_t *)(ar + hdr[G_KOFF_OFF]),
                                       rowsum + f[F_RS_OFF]};
                    I->gemm(&g);
                    break;
                }
                case OP_DW: {
                    uint8_t *P = ar + f[F_PAD_OFF];
                    hb_pad_input(in, f, (uint8_t)(128 - f[F_IO]), P);
                    I->dw(P, &c, accs, out);
                    break;
                }
                case OP_ADD: I->add(in, ar + f[F_IN2], f, out); break;
                case OP_MAXPOOL: I->maxpool(in, f, out); break;
                case OP_AVGPOOL: hb_avgpool(in, f, out); break;
                case OP_MEAN:
#if HB_X86
                    if (I == &hb_isa_avx512vnni_vbmi || I == &hb_isa_avx512vnni) {
                        hb_mean_avx512(in, f, accs, out);
                        break;
                    }
#endif
                    hb_mean(in, f, accs, out);
                    break;
                default: break;
                }
                /* the next set's weights of this op on their way to the caches while the
                 * network runs (the repacking at the next set's start reads them) */
                if (s + 1 < S && n == N - 1 && (f[F_KIND] == OP_GEMM || f[F_KIND] == OP_DW)) {
                    const int64_t ws = f[F_WSLOT];
                    if (slots[2 * ws + 1] > 1) {
                        const char *nx = cb[ws] + (s + 1) * slots[2 * ws];
                        for (int64_t b = 0; b < slots[2 * ws]; b += 64)
                            __builtin_prefetch(nx + b, 0, 2);
                    }
                }
                if (prof_on && i < PROF_MAX) {
                    const double dt = now_ns() - t0;
                    if (dt < prof_ns[i]) prof_ns[i] = dt;
                }
                if (ndumps) {
                    int8_t *d = (int8_t *)dv[i].buf + (s * N + n) * f[F_OUT_SIZE];
                    for (int64_t j = 0; j < f[F_OUT_SIZE]; j++) d[j] = (int8_t)(out[j] ^ 0x80);
                }
            }
            int8_t *y = (int8_t *)outb.buf + (s * N + n) * out_size;
            const uint8_t *yo = ar + hdr[G_OUT_OFF];
            for (int64_t j = 0; j < out_size; j++) y[j] = (int8_t)(yo[j] ^ 0x80);
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    if (cv) {
        release_views(cv, nslots);
        free(cv);
    }
    free(cb);
    if (dv) {
        release_views(dv, ndumps);
        free(dv);
    }
    PyBuffer_Release(&prog);
    PyBuffer_Release(&qpb);
    PyBuffer_Release(&slotb);
    PyBuffer_Release(&packed);
    PyBuffer_Release(&rsb);
    PyBuffer_Release(&arena);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&outb);
    if (keptb.obj) PyBuffer_Release(&keptb);
    return ret;
}

static PyObject *profile(PyObject *self, PyObject *arg) {
    (void)self;
    /* profile(True): reset and start timing each op; profile(False): stop; both return the
     * shortest time (ns) each op index took so far (robust on a shared machine); the last
     * entry is the repacking of one weight set's packed-GEMM weights */
    PyObject *res = PyList_New(PROF_MAX);
    if (!res) return NULL;
    for (int i = 0; i < PROF_MAX; i++) PyList_SET_ITEM(res, i, PyFloat_FromDouble(prof_ns[i]));
    const int on = PyObject_IsTrue(arg);
    if (on < 0) {
        Py_DECREF(res);
        return NULL;
    }
    if (on)
        for (int i = 0; i < PROF_MAX; i++) prof_ns[i] = 1e300;
    prof_on = on;
    return res;
}

static PyObject *fields(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(NF);
    if (!t) return NULL;
    for (int i = 0; i < NF; i++) {
        PyObject *s = PyUnicode_FromString(field_names[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* isas(): (name, runs on this CPU, forced only) for every table of this build, best first */
static PyObject *isas(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(N_ISAS);
    if (!t) return NULL;
    for (int i = 0; i < N_ISAS; i++) {
        PyObject *e = Py_BuildValue("(sOO)", isa_table[i].isa->name,
                                    isa_runs[i] ? Py_True : Py_False,
                                    isa_table[i].forced_only ? Py_True : Py_False);
        if (!e) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, e);
    }
    return t;
}

/* peak(isa, n): n rounds of that table's int8 multiply-add instruction on 12 independent
 * accumulators; the multiply-adds done (None for the portable C); time it in Python */
static PyObject *peak(PyObject *self, PyObject *args) {
    (void)self;
    int i;
    unsigned long long n;
    if (!PyArg_ParseTuple(args, "iK", &i, &n)) return NULL;
    const hb_isa *I = pick_isa(i);
    if (!I) return NULL;
    if (!I->peak) Py_RETURN_NONE;
    uint64_t macs;
    Py_BEGIN_ALLOW_THREADS
    macs = I->peak((uint64_t)n);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong((unsigned long long)macs);
}

static PyObject *best_isa(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(best()->name);
}

static PyMethodDef methods[] = {
    {"forward", forward, METH_VARARGS, "Run a lowered network (see hilbench.npu.native)."},
    {"profile", profile, METH_O,
     "Per-op timing: profile(True) resets and starts, profile(False) stops; both return "
     "each op's shortest time (ns) so far."},
    {"fields", fields, METH_NOARGS, "Names of the op record fields, in order."},
    {"isas", isas, METH_NOARGS,
     "(name, runs on this CPU, forced only) for every kernel table of this build, best first."},
    {"best_isa", best_isa, METH_NOARGS, "The kernel table this CPU gets by default."},
    {"peak", peak, METH_VARARGS,
     "peak(isa index, n): n rounds of that table's int8 multiply-add instruction; the "
     "multiply-adds done, or None (portable C)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine",
                                    "hilbench native NPU engine", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__engine(void) {
    probe_isas();
    if (PyType_Ready(&ViewCacheType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ViewCacheType);
    if (PyModule_AddObject(m, "ViewCache", (PyObject *)&ViewCacheType) < 0) {
        Py_DECREF(&ViewCacheType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

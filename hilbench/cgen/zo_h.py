"""device_fw/core/gen/hb_zo.h: the ZO math's numbers (docs/zo-math.md) for the C core.

Declared in hilbench.zo (rng.py, perturb.py, update.py, loss.py, zocf.py); this module only
renders it: the Philox constants and stream ids, the codes of the ZOCF section, its header and
entry layout, the Q formats and shifts, fixed scales, limits, the loss tables' sizes, and the
templates of every ZOCF and LOSS refusal.
"""

from __future__ import annotations

from hilbench.cgen import Header, builder, c_ident
from hilbench.zo import loss, perturb, rng, update, zocf


@builder("hb_zo.h")
def build() -> Header:
    h = Header("hb_zo.h", "hilbench/zo (rng.py, perturb.py, update.py, loss.py, zocf.py)")
    h.comment("PRNG: Philox4x32-10 (docs/zo-math.md section 1)")
    for name in ("PHILOX_M0", "PHILOX_M1", "PHILOX_W0", "PHILOX_W1"):
        h.define(f"HB_{name}", getattr(rng, name), "u32")
    h.define("HB_PHILOX_ROUNDS", rng.ROUNDS)
    for name in ("STREAM_PERTURB", "STREAM_BATCH", "STREAM_ROUNDING", "STREAM_POOL"):
        h.define(f"HB_{name}", getattr(rng, name))

    h.comment("ZOCF codes")
    for name, code in perturb.DISTRIBUTIONS.items():
        h.define(f"HB_DIST_{c_ident(name)}", code)
    for name, code in perturb.SCALINGS.items():
        h.define(f"HB_SCALING_{c_ident(name)}", code)
    for name, code in zocf.ESTIMATORS.items():
        h.define(f"HB_ESTIMATOR_{c_ident(name)}", code)
    for name, code in update.ROUNDINGS.items():
        h.define(f"HB_ROUNDING_{c_ident(name)}", code)
    for name, code in update.MASTERS.items():
        h.define(f"HB_MASTER_{c_ident(name)}", code)
    h.define("HB_N_DISTRIBUTIONS", len(perturb.DISTRIBUTIONS))
    h.define("HB_N_SCALINGS", len(perturb.SCALINGS))
    h.define("HB_N_ESTIMATORS", len(zocf.ESTIMATORS))
    h.define("HB_N_ROUNDINGS", len(update.ROUNDINGS))
    h.define("HB_N_MASTERS", len(update.MASTERS))
    h.comment("Per master: fractional bits f of the master, bytes per weight in the arena")
    for name, code in update.MASTERS.items():
        h.define(f"HB_MASTER_{c_ident(name)}_FRAC", update.MASTER_FRAC[code])
        h.define(f"HB_MASTER_{c_ident(name)}_BYTES", update.MASTER_BYTES[code])
    h.comment('Rows of a trained tensor (docs/zo-math.md "Rows")')
    h.define("HB_ROWS_LEADING", perturb.ROWS_LEADING, "axis 0: contiguous rows")
    h.define("HB_ROWS_TRAILING", perturb.ROWS_TRAILING, "last axis: depthwise filters")

    h.comment('The ZO work area\'s parts besides masters and pool (docs/firmware.md "ZO state")')
    h.define("HB_ZO_TENSOR_BYTES", zocf.TENSOR_BYTES, "a trained tensor's description")
    h.define("HB_ZO_SCALE_BYTES", zocf.SCALE_BYTES, "a PROBE's scale S of a trained tensor")
    h.define("HB_ZO_DELTA_BYTES", zocf.DELTA_BYTES, "a delta table entry (int32)")
    for name, code in perturb.DISTRIBUTIONS.items():
        h.define(f"HB_ZO_VALUES_{c_ident(name)}", zocf.DISTRIBUTION_VALUES[code])
    h.define("HB_ZO_ROW_CACHE_LINES", zocf.ROW_CACHE_LINES, "the depthwise row stream's cache")
    h.define("HB_ZO_ROW_CACHE_LINE_BYTES", zocf.ROW_CACHE_LINE_BYTES, "a tag and a block")

    h.comment("The ZOCF section (docs/zo-math.md section 7), little-endian")
    h.raw('#define HB_ZOCF_TAG "' + zocf.SECTION_TAG + '"')
    h.define("HB_ZOCF_VERSION", zocf.VERSION)
    h.define("HB_ZOCF_HEADER_SIZE", zocf.HEADER_SIZE)
    for name, off, size in zocf.field_offsets(zocf.HEADER_FIELDS):
        h.define(f"HB_ZOCF_H_{c_ident(name)}", off, f"u{8 * size}")
    h.define("HB_ZOCF_ENTRY_SIZE", zocf.ENTRY_SIZE)
    for name, off, size in zocf.field_offsets(zocf.ENTRY_FIELDS):
        h.define(f"HB_ZOCF_E_{c_ident(name)}", off, f"u{8 * size}")
    h.define("HB_ZOCF_CHANNEL_ALIGN", zocf.CHANNEL_ALIGN)

    h.comment("Limits")
    h.define("HB_MAX_TRAINED", zocf.MAX_TRAINED, "trained tensors a device holds")
    h.define("HB_MAX_POOL", perturb.MAX_POOL)
    h.define("HB_MAX_UNIT_SHIFT", zocf.MAX_UNIT_SHIFT)
    h.define("HB_MIN_MULT", zocf.MIN_MULT)
    h.define("HB_MAX_MULT", zocf.MAX_MULT)
    h.define("HB_COEFF_LIMIT", update.COEFF_LIMIT, "APPLY coefficients are clamped to +-this")
    h.define("HB_BIAS_LIMIT", update.BIAS_LIMIT, "trained biases stay within +-this")
    h.define("HB_WEIGHT_LIMIT", update.WEIGHT_LIMIT, "int8 weights, masters >> f, probe copies")

    h.comment("Q formats and shifts")
    h.define("HB_SCALE_FRAC", perturb.SCALE_FRAC, "S is Q16")
    h.define("HB_UNIT_FRAC", perturb.UNIT_FRAC, "u is Q8")
    h.define("HB_MULT_FRAC", perturb.MULT_FRAC, "eps multipliers are Q4")
    h.define("HB_DELTA_SHIFT", perturb.DELTA_SHIFT, "delta = rsym(eps * M * u, 12) << U")
    h.define("HB_COEFF_FRAC", update.COEFF_FRAC, "APPLY coefficients are Q16")
    h.define("HB_UPDATE_SHIFT", update.UPDATE_SHIFT, "s = 28 - f - U")
    h.define("HB_MIN_UPDATE_SHIFT", update.MIN_UPDATE_SHIFT)
    h.define("HB_SCALE_MAX", perturb.SCALE_MAX)
    h.comment("Fixed scales S (Q16) per distribution")
    for name, code in perturb.DISTRIBUTIONS.items():
        h.define(f"HB_FIXED_SCALE_{c_ident(name)}", perturb.FIXED_SCALE[code])
    h.comment("Raw samples per 32-bit word per distribution")
    for name, code in perturb.DISTRIBUTIONS.items():
        h.define(f"HB_PER_WORD_{c_ident(name)}", perturb.ELEMENTS_PER_WORD[code])

    h.comment("The loss (docs/zo-math.md section 5) and its LOSS section")
    h.raw('#define HB_LOSS_TAG "' + loss.SECTION_TAG + '"')
    h.define("HB_LOSS_Q16", loss.Q16)
    h.define("HB_LN2_Q16", loss.LN2_Q16, "round(2^16 ln 2)")
    h.define("HB_LN_BITS", loss.LN_BITS)
    h.define("HB_EXP_SIZE", loss.EXP_SIZE, "EXP u32[] and LIN i32[] entries")
    h.define("HB_LN_SIZE", loss.LN_SIZE, "LN i32[] entries")
    h.define("HB_LOSS_SECTION_BYTES", loss.SECTION_BYTES)

    h.comment("Refusals (BAD_MODEL), formatted with hb_fail: ZOCF, then LOSS")
    for key, text in zocf.MESSAGES.items():
        h.string(f"HB_MSG_ZOCF_{c_ident(key)}", text)
    for key, text in loss.MESSAGES.items():
        h.string(f"HB_MSG_LOSS_{c_ident(key)}", text)
    return h

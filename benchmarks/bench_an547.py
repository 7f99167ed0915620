"""Executed instructions of the firmware on the Cortex-M55 (QEMU mps3-an547, ``-icount``): the
scalar C kernels against the Helium (MVE) kernels, side by side in one run.

    python benchmarks/bench_an547.py [--models mlp,cnn,mobilenet] [--q 2] [--batch 4]

It builds the benchmark image twice (``make -C device_fw an547-bench AN547_NN=scalar`` and
``AN547_NN=mve``: bench/bench.c and bench/an547_main.c with the core, the kernels' variant the
only difference) and runs each under ``qemu-system-arm -M mps3-an547 -icount shift=S``, where
the firmware's tick counter follows executed instructions (one tick ~ one instruction at the
default S=5). The unit is instructions, never seconds: QEMU does not model the M55's timing, so
these are not cycles either (an MVE instruction takes one to four beats on the silicon).

Per op: one model blob per op *shape* of the zoo models (MLP, CNN, MobileNetV2 alpha 0.35 at
32x32), the same blobs as benchmarks/bench_firmware.py. Per model: the sum of its op rows
weighted by their counts, and the whole model's blob (the difference is the interpreter).
Every figure is the fewest instructions of ``--runs`` forward passes (they differ by a few
instructions at most: the tick counter's rounding). Both images' outputs must equal the
emulator's (hilbench.npu, bit-exact with TFLM) byte for byte; a row that differs says MISMATCH
and the run exits 1.

ZO step (``hilbench-bench zo``): the model with its LOSS section and the default ZO method,
a random data set, ``--q`` seeds, a mini-batch of ``--batch``. Two splits of PROBE and APPLY:

- *measured*, per function: a QEMU TCG plugin (device_fw/bench/qemu/insn_split.c, ``make -C
  device_fw qemu-plugin``) counts the instructions executed at every address between two calls
  of the image's ``hb_bench_mark`` (around the first PROBE and the first APPLY), and the ELF's
  symbols name the functions. Its total agrees with the tick bracket to a few instructions.
- *modelled*: each part timed alone and multiplied by how often PROBE needs it (forward passes
  = 2 q B x one unperturbed pass, loss, PRNG = q scales + 2 q B x drawing every row's samples
  once); "the rest" is what these leave. The PRNG line is such a model (n_perturbed x
  draw_rows), not a measurement: the measured split names Philox (hb_philox_stream_fill).

Both images' losses and weights CRCs must be equal.

``--kernels``: the CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED kernels alone
(``hilbench-bench kernels``) on the shapes and data of the CMSIS-NN anchor
(/work/shared/anchors/cmsis-nn-icount: conv 3x3 16x16x16 -> 32 same, depthwise 3x3 16x16x64,
FC 256 -> 128; and MobileNetV2 a0.35 32x32's 1x1 convs, measured by device_fw/bench/cmsis_anchor),
instructions per MAC of both images next to CMSIS-NN's (99f736a6, gcc 12.2 -O2, the same QEMU)
and the ratio Helium / CMSIS-NN; both images' output checksums must agree, and for the 1x1 convs
equal CMSIS-NN's.

``--probe-table``: PROBE against its floor, 2 q B forward passes (PROBE / (2 q B x one forward
pass); with a frozen prefix, B x the prefix + 2 q B x the rest), for the MLP and the CNN with
each perturbation (rademacher, uniform, uniform with a pool of 512, gaussian) at q = 4, B = 32,
MobileNetV2 alpha 0.35 at q = 2, B = 4 with the same four (its pool 1280: its FC's rows; issue
25's table), and with ``--layers last:1`` the
MobileNetV2 head (the vision study's setting) and the CNN at q = 4, B = 32, the Helium image,
each with its measured per-function split. Every row runs twice: with the PROBE's scratch
(the frozen prefix and the perturbed copy, where they fit the arena: the bytes each takes are
printed) and with ``--no-scratch`` (the path before them), whose losses must be equal.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_firmware import BenchError, Report, cpu, op_rows, parse_report, source_state

from hilbench.launch.make import output_tail, run_make

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"scalar": "an547-scalar", "mve": "an547"}  # AN547_NN -> its build directory
ELF = "hilbench-bench-an547.elf"
MODELS = {
    "mlp": ("MLP", "mlp", {}),
    "cnn": ("CNN", "cnn", {}),
    "mobilenet": ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
}
TARGET = 4.0  # scalar / Helium instructions the conv and FC rows must reach (issue 12)
TARGET_OPS = ("conv", "fc")  # the rows' labels start with these
QEMU = "qemu-system-arm"
TIMEOUT_S = 1800


def build_images(root: Path = ROOT) -> dict[str, Path]:
    """Both benchmark images (make decides what changed), one build at a time."""
    out = {}
    for nn, sub in VARIANTS.items():
        args = ("an547-bench", f"AN547_NN={nn}")
        status, output = run_make(root, *args)
        if status != 0:
            raise BenchError(
                f"make {' '.join(args)} failed: {output_tail(output)}; fix the build and run again"
            )
        out[nn] = root / "device_fw" / "build" / sub / ELF
    return out


def qemu_version() -> str:
    path = shutil.which(QEMU)
    if path is None:
        raise BenchError(f"{QEMU} is not installed: apt install qemu-system-arm")
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.split("\n")[0]


PLUGIN = ROOT / "device_fw" / "build" / "qemu" / "libinsn_split.so"
MARK = "hb_bench_mark"  # bench/bench.c: its calls open and close the plugin's windows
NM = "arm-none-eabi-nm"


def build_plugin(root: Path = ROOT) -> Path | str:
    """The per-function counter (a QEMU plugin), or why it could not be built."""
    status, output = run_make(root, "qemu-plugin")
    if status != 0:
        return f"make qemu-plugin failed: {output_tail(output)}"
    return PLUGIN


class Symbols:
    """Address -> function of an ELF (``nm -n -S``: defined code symbols with a size)."""

    def __init__(self, elf: Path) -> None:
        out = subprocess.run(
            [NM, "-n", "-S", "--defined-only", str(elf)], capture_output=True, text=True, check=True
        ).stdout
        rows = []
        for line in out.splitlines():
            w = line.split()
            if len(w) == 4 and w[2] in "tTwW":
                rows.append((int(w[0], 16), int(w[1], 16), w[3]))
        rows.sort()
        self.rows = rows
        self.starts = [r[0] for r in rows]
        self.by_name = {name: addr for addr, _, name in rows}

    def name(self, addr: int) -> str:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.rows[i][0] + self.rows[i][1]:
            return self.rows[i][2]
        return "?"


def read_windows(path: Path, syms: Symbols) -> list[collections.Counter]:
    """The plugin's output: per window, instructions per function."""
    windows: list[collections.Counter] = []
    for line in path.read_text().splitlines():
        w = line.split()
        if w[0] == "window":
            windows.append(collections.Counter())
        elif w[0] != "marks":
            windows[-1][syms.name(int(w[0], 16))] += int(w[1])
    return windows


def run_image(
    elf: Path, args: list[str], shift: int, plugin: Path | None = None
) -> tuple[Report, list[collections.Counter]]:
    """The benchmark image under QEMU with ``args`` (paths absolute): its report, and with a
    plugin the instructions per function of each marked window."""
    sh = ",".join(f"arg={a}" for a in ["hilbench-bench", *args, "--icount-shift", str(shift)])
    cmd = [
        QEMU, "-M", "mps3-an547", "-display", "none", "-monitor", "none", "-serial", "null",
        "-icount", f"shift={shift}", "-semihosting-config", f"enable=on,target=native,{sh}",
        "-kernel", str(elf),
    ]  # fmt: skip
    if plugin is None:
        return _run(cmd, elf, args), []
    syms = Symbols(elf)
    with tempfile.TemporaryDirectory(prefix="insn_split_") as tmp:
        out = Path(tmp) / "split.txt"
        cmd += ["-plugin", f"{plugin},mark={syms.by_name[MARK]:#x},out={out}"]
        rep = _run(cmd, elf, args)
        return rep, read_windows(out, syms)


def _run(cmd: list[str], elf: Path, args: list[str]) -> Report:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode not in (0, 1) or (done.returncode == 1 and "error" not in done.stdout):
        tail = (done.stderr or done.stdout).strip()[-400:]
        raise BenchError(f"{elf.parent.name}/{elf.name} {args[0]} exited {done.returncode}: {tail}")
    return parse_report(done.stdout)


@dataclass
class Forward:
    instr: int
    output: bytes
    stable: bool


def forward(elf: Path, blob: Path, x: Path, runs: int, shift: int) -> Forward:
    rep, _ = run_image(elf, ["forward", str(blob), str(x), "--runs", str(runs)], shift)
    f = rep.get("forward")
    return Forward(int(f["min"]), bytes.fromhex(rep.get("output")["hex"]), f["stable"] == "1")


@dataclass
class Row:
    label: str
    graph: object
    counts: dict[str, int] = field(default_factory=dict)
    instr: dict[str, int] = field(default_factory=dict)  # variant -> instructions
    same: bool = True


def measure(row, images: dict[str, Path], work: Path, runs: int, shift: int, seed: int) -> None:
    """Both images on the row's graph and one random input; outputs checked against the
    emulator."""
    from hilbench.npu.blob import to_blob

    g = row.graph
    x = np.random.default_rng(seed).integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
    bp, xp = work / "model.blob", work / "input.bin"
    bp.write_bytes(to_blob(g))
    xp.write_bytes(x.tobytes())
    want = np.asarray(g.run(x), np.int8).reshape(-1).tobytes()
    for nn, elf in images.items():
        f = forward(elf, bp, xp, runs, shift)
        row.instr[nn] = f.instr
        row.same = row.same and f.stable and f.output == want


def fmt(n: float) -> str:
    return f"{n:14,.0f}"


HEAD = (
    f"  {'op (in>out)':36s} {'count':>5s} {'scalar instr':>14s} {'Helium instr':>14s} {'ratio':>7s}"
)


def print_row(label: str, count: str, scalar: float, mve: float, note: str = "") -> None:
    print(f"  {label[:36]:36s} {count:>5s} {fmt(scalar)} {fmt(mve)} {scalar / mve:6.2f}x{note}")


def target_note(r: Row) -> str:
    if not r.same:
        return "   MISMATCH (outputs differ)"
    if r.label.split()[0] in TARGET_OPS:
        ok = r.instr["scalar"] >= TARGET * r.instr["mve"]
        return "" if ok else f"   below {TARGET:.0f}x"
    return ""


def zo_files(g, work: Path, zo=None) -> list[Path]:
    """The zo command's blob (LOSS, and ZOCF if ``zo`` is a ZoConfig), inputs and labels."""
    from hilbench.npu.blob import to_blob
    from hilbench.zo import loss

    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    r = np.random.default_rng(7)
    n_items, item = 16, int(np.prod(g.input_shape))
    sections = {"LOSS": tables.to_bytes()}
    if zo is not None:
        sections["ZOCF"] = zo.to_bytes()
    files = {
        "zo.blob": to_blob(g, sections),
        "zo.x": r.integers(-128, 128, (n_items, item)).astype(np.int8).tobytes(),
        "zo.y": r.integers(0, int(np.prod(g.output_shape)), n_items).astype(np.uint8).tobytes(),
    }
    for name, data in files.items():
        (work / name).write_bytes(data)
    return [work / n for n in files]


def zo_args(files: list[Path], q: int, batch: int, runs: int) -> list[str]:
    args = ["zo", *(str(f) for f in files), "--q", str(q), "--batch", str(batch)]
    return [*args, "--runs", str(runs), "--item-runs", str(runs), "--seed", "1"]


def print_split(name: str, counts: collections.Counter, ticks: int, top: int = 8) -> None:
    """One window's instructions per function, the largest first, and the check against the
    tick bracket."""
    total = sum(counts.values())
    print(f"  {name} per function (measured; plugin total {total:,}, tick bracket {ticks:,}):")
    rest = total
    for fn, n in counts.most_common(top):
        print(f"    {fn[:40]:40s} {n:14,d} {n / total:6.1%}")
        rest -= n
    print(f"    {'(every other function)':40s} {rest:14,d} {rest / total:6.1%}")


def zo_step(images, title: str, g, q: int, batch: int, runs: int, shift: int, work: Path,
            plugin: Path | None) -> bool:  # fmt: skip
    """Both images' ZO step split, side by side; True if their losses and CRCs agree."""
    args = zo_args(zo_files(g, work), q, batch, runs)
    ran = {nn: run_image(elf, args, shift, plugin) for nn, elf in images.items()}
    reps = {nn: rep for nn, (rep, _) in ran.items()}
    same = all(
        reps[nn].get(rec) == reps["scalar"].get(rec)
        for nn in reps
        for rec in ("zo_check", "zo_losses")
    ) and all(rep.get("zo_check")["restored"] == "1" for rep in reps.values())
    zo = reps["mve"].get("zo")
    print(
        f"\n{title}: {zo['trained']} trained tensors, {int(zo['weight_elems']):,} weights; "
        f"q={q}, batch {batch}: {zo['n_forward']} forward passes per PROBE; fewest of {runs} runs"
    )
    print(f"  {'part (modelled: timed alone x uses)':36s} {'':>5s} {'scalar instr':>14s} "
          f"{'Helium instr':>14s} {'ratio':>7s}")  # fmt: skip
    parts = [("probe", "total", "PROBE"), ("probe", "forward", "  forward passes (model)"),
             ("probe", "loss", "  loss (model)"),
             ("probe", "prng", "  PRNG model: q scales + n x rows"),
             ("probe", "perturb", "  the rest (perturbation, batch)"),
             ("apply", "total", "APPLY"), ("apply", "prng", "  PRNG model (chunk samples)"),
             ("apply", "update", "  the rest (update)")]  # fmt: skip
    for step, key, name in parts:
        v = {nn: int(rep.get("zo_split", step=step)[key]) for nn, rep in reps.items()}
        share = {nn: v[nn] / int(reps[nn].get("zo_split", step=step)["total"]) for nn in v}
        note = f"   {share['scalar']:5.1%} / {share['mve']:5.1%} of {step.upper()}"
        # "the rest" is what the model leaves: negative where the model overcounts (a part
        # timed alone costs more than inside the step); the measured split below is exact
        print_row(name, "", v["scalar"], v["mve"] or 1, "" if key == "total" else note)
    fwd = {nn: int(rep.get("zo_time", part="forward")["min"]) for nn, rep in reps.items()}
    step = {nn: sum(int(rep.get("zo_split", step=s)["total"]) for s in ("probe", "apply"))
            for nn, rep in reps.items()}  # fmt: skip
    beyond = {nn: step[nn] / (int(zo["n_forward"]) * fwd[nn]) for nn in reps}
    print_row("one forward pass", "", fwd["scalar"], fwd["mve"])
    print(
        f"  ZO step (PROBE + APPLY) / its forward passes: scalar {beyond['scalar']:.3f}x, "
        f"Helium {beyond['mve']:.3f}x; losses and weights CRCs "
        + ("equal in both images" if same else "DIFFER between the images")
    )
    for nn, (rep, windows) in ran.items():
        if len(windows) < 2:
            continue
        print(f"  {nn} image:")
        for w, step_name in enumerate(("probe", "apply")):
            ticks = int(rep.get("zo_time", part=step_name)["min"]) if runs == 1 else 0
            print_split(step_name.upper(), windows[w], ticks)
    return same


# issue 25's table: (title, zoo model, zoo kwargs, q, batch, perturbations)
PERTURBATIONS = {
    "rademacher": {"distribution": "rademacher"},
    "uniform": {"distribution": "uniform"},
    "uniform + pool 512": {"distribution": "uniform", "pool_size": 512, "pool_seed": 1},
    "gaussian": {"distribution": "gaussian"},
    # MobileNetV2's longest row is its FC's 1280 (a pool holds a whole row; the CLI's default
    # is no pool)
    "uniform + pool 1280": {"distribution": "uniform", "pool_size": 1280, "pool_seed": 1},
}
SMALL_PERTURBATIONS = ("rademacher", "uniform", "uniform + pool 512", "gaussian")
MOBILENET_PERTURBATIONS = ("rademacher", "uniform", "uniform + pool 1280", "gaussian")
PROBE_TABLE = (
    ("MLP", "mlp", {}, "all", 4, 32, SMALL_PERTURBATIONS),
    ("CNN", "cnn", {}, "all", 4, 32, SMALL_PERTURBATIONS),
    ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}, "all", 2, 4,
     MOBILENET_PERTURBATIONS),
    # the vision study's setting: the head alone trains, the frozen backbone is the prefix
    ("MobileNetV2 a0.35 32x32 head", "mobilenet_v2", {"alpha": 0.35, "resolution": 32},
     "last:1", 4, 32, ("rademacher",)),
    ("CNN last:1", "cnn", {}, "last:1", 4, 32, ("rademacher",)),
)  # fmt: skip


def probe_table(
    elf: Path, plugin: Path | None, shift: int, work: Path, top: int, only: str = ""
) -> None:
    """PROBE / its floor per model and perturbation, with the measured split: the PROBE with
    its scratch (the frozen prefix, the perturbed copy: where they fit the arena) and without
    (--no-scratch: every pass from the input, rows on demand, the path before issue 25)."""
    from hilbench.npu import zoo
    from hilbench.zo import zocf

    print(
        "\nPROBE against its floor (Helium image; floor = 2 q B x one forward pass, or with a "
        "frozen prefix B x the prefix + 2 q B x the rest)"
    )
    rows = []
    for title, name, kw, layers, q, batch, perts in PROBE_TABLE:
        if only and title != only:
            continue
        g = zoo.build(name, seed=0, **kw)
        for pert in perts:
            zo = zocf.build(g, layers=layers, **PERTURBATIONS[pert])
            args = zo_args(zo_files(g, work, zo), q, batch, 1)
            rep, windows = run_image(elf, args, shift, plugin)
            z = rep.get("zo")
            scratch = "cut_op" in z  # an image before issue 25 (--image) has no scratch
            old = run_image(elf, [*args, "--no-scratch"], shift)[0] if scratch else rep
            if not scratch:
                z = {**z, "cut_op": "0", "used_prefix": "0", "used_copy": "0"}
            probe = int(rep.get("zo_time", part="probe")["min"])
            fwd = int(rep.get("zo_time", part="forward")["min"])
            n = int(z["n_forward"])
            pre = int(rep.get("zo_time", part="prefix")["min"]) if int(z["cut_op"]) else 0
            # the prefix once per item, the rest per pass (one-sided: q + 1 passes)
            floor = n * fwd if not pre else batch * pre + n * (fwd - pre)
            before = int(old.get("zo_time", part="probe")["min"])
            same = old.get("zo_losses") == rep.get("zo_losses")
            mem = (f"prefix {int(z['prefix_bytes']):,} B" if z["used_prefix"] == "1" else "") + (
                f"{', ' if z['used_prefix'] == '1' else ''}copy {int(z['copy_bytes']):,} B"
                if z["used_copy"] == "1" else "")  # fmt: skip
            rows.append((f"{title}, {pert}", q, batch, before, probe, floor, mem, same))
            if windows:
                print(f"\n{title}, {pert} (q={q}, B={batch}):")
                print_split("PROBE", windows[0], probe, top)
    print(f"\n  {'model, perturbation':40s} {'q':>2s} {'B':>3s} {'no scratch':>13s} "
          f"{'PROBE instr':>13s} {'speed-up':>8s} {'floor instr':>13s} {'/floor':>7s}  "
          f"scratch used")  # fmt: skip
    for label, q, batch, before, probe, floor, mem, same in rows:
        print(f"  {label:40s} {q:2d} {batch:3d} {before:13,d} {probe:13,d} "
              f"{before / probe:7.2f}x {floor:13,d} {probe / floor:6.2f}x  {mem or '-'}"
              + ("" if same else "  LOSSES DIFFER"))  # fmt: skip
    if not all(r[-1] for r in rows):
        raise BenchError("a PROBE's losses with its scratch differ from those without")


# CMSIS-NN's executed instructions on the anchor's shapes (RESULTS.md of the anchor): the
# kernel, and for FC also its kernel sums (redone after every weight change in ZO). The 1x1
# convs: device_fw/bench/cmsis_anchor/run.sh (hilbench's copy of the anchor harness with
# MobileNetV2 a0.35 32x32's pointwise shapes; CMSIS-NN 99f736a6, arm_convolve_wrapper_s8 ->
# arm_convolve_1x1_s8_fast, gcc 12.2 -O2 -mcpu=cortex-m55, -icount shift=5), with the checksum
# of CMSIS-NN's output: hilbench's must be the same bytes.
CMSIS_NN = {"conv3x3": (394_500, 0), "dw3x3": (343_250, 0), "fc": (17_340, 15_780)}
CMSIS_NN_1X1 = {  # name: (instructions, output checksum)
    "conv1x1": (140_069, 0x65D2E024),
    "pw16x16x16_8": (37_156, 0xDE927E50),
    "pw16x16x8_48": (208_676, 0x6766C79F),
    "pw8x8x48_8": (12_228, 0x307DD71C),
    "pw8x8x8_48": (52_293, 0x1A76D62F),
    "pw4x4x48_16": (6_029, 0x2D96D7E1),
    "pw4x4x16_96": (26_061, 0xD9CC174E),
    "pw4x4x96_16": (8_141, 0x4C26A73F),
    "pw2x2x96_24": (3_135, 0x01DD28CE),
    "pw2x2x24_144": (11_438, 0x8B6E0988),
    "pw2x2x144_24": (3_927, 0xBC4A0891),
    "pw2x2x32_192": (15_183, 0x076A9813),
    "pw2x2x192_32": (6_223, 0x20D528E4),
}
KERNEL_LABELS = {
    "conv3x3": "conv 3x3 16x16x16 -> 32, same",
    "dw3x3": "depthwise 3x3 16x16x64, same",
    "fc": "fully connected 256 -> 128",
    "conv1x1": "conv 1x1 16x16x16 -> 32",
}
for _name in CMSIS_NN_1X1:
    if _name.startswith("pw"):
        _h, _w, _rest = _name[2:].split("x", 2)
        _c, _oc = _rest.split("_")
        KERNEL_LABELS[_name] = f"conv 1x1 {_h}x{_w}x{_c} -> {_oc}"
POINTWISE_TARGET = 1.0  # issue 25: hilbench's 1x1 convs / CMSIS-NN's instructions, at most


def kernel_record(rep: Report, name: str) -> dict[str, str]:
    """The ``kernel name=NAME`` record of a ``kernels`` report."""
    for rec, kv in rep.records:
        if rec == "kernel" and kv.get("name") == name:
            return kv
    raise BenchError(f"the kernels report has no {name} line")


def kernels_table(images: dict[str, Path], shift: int, runs: int) -> bool:
    """The kernels on the anchor's shapes, both images; True when their outputs agree (with
    each other and, for the 1x1 convs, with CMSIS-NN's)."""
    reps = {nn: run_image(elf, ["kernels", "--runs", str(runs)], shift)[0]
            for nn, elf in images.items()}  # fmt: skip
    print("\nkernels alone on the CMSIS-NN anchor's shapes and data (instructions per MAC)")
    print(f"{'op':<34}{'MACs':>10}{'scalar':>9}{'Helium':>9}{'CMSIS-NN':>10}{'ratio':>8}")
    same = True
    for name, label in KERNEL_LABELS.items():
        k = {nn: kernel_record(reps[nn], name) for nn in images}
        macs = int(k["mve"]["macs"])
        cm, sums = CMSIS_NN.get(name, (0, 0))
        ref = None
        if name in CMSIS_NN_1X1:
            cm, ref = CMSIS_NN_1X1[name]
        per = {nn: int(k[nn]["min"]) / macs for nn in images}
        ok = len({k[nn]["checksum"] for nn in images}) == 1
        ok = ok and (ref is None or int(k["mve"]["checksum"], 16) == ref)
        same = same and ok
        note = "" if ok else "  MISMATCH"
        theirs = f"{'-':>10}{'-':>8}"
        if cm:
            theirs = f"{cm / macs:>10.3f}{per['mve'] * macs / cm:>7.2f}x"
        print(f"{label:<34}{macs:>10,}{per.get('scalar', 0):>9.3f}{per['mve']:>9.3f}"
              f"{theirs}{note}")  # fmt: skip
        if sums:
            both = cm + sums
            print(f"{'  CMSIS-NN with its kernel sums':<34}{'':>10}{'':>9}{'':>9}"
                  f"{both / macs:>10.3f}{per['mve'] * macs / both:>7.2f}x")  # fmt: skip
    print("ratio = Helium / CMSIS-NN instructions (lower: fewer); outputs: both images' checksums"
          " and, for the 1x1 convs, CMSIS-NN's: a row whose outputs differ is flagged")  # fmt: skip
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,mobilenet", help="of mlp, cnn, mobilenet")
    ap.add_argument("--runs", type=int, default=2, help="forward passes per figure (fewest)")
    ap.add_argument("--q", type=int, default=2, help="seeds per ZO step (0: no ZO step)")
    ap.add_argument("--batch", type=int, default=4, help="PROBE's mini-batch")
    ap.add_argument("--zo-runs", type=int, default=1, help="PROBEs and APPLYs per image")
    ap.add_argument("--icount-shift", type=int, default=5, help="QEMU -icount shift (0..10)")
    ap.add_argument("--no-split", action="store_true", help="no per-function count (plugin)")
    ap.add_argument(
        "--probe-table",
        action="store_true",
        help="only PROBE / its floor per model and perturbation (issue 25's table)",
    )
    ap.add_argument(
        "--probe-model",
        default="",
        metavar="TITLE",
        help="--probe-table: only the rows of this model title (e.g. 'MobileNetV2 a0.35 32x32')",
    )
    ap.add_argument("--top", type=int, default=8, help="functions per measured split")
    ap.add_argument(
        "--image",
        type=Path,
        help="--probe-table on this Helium image (e.g. an "
        "older build, for a before/after table) instead of building one",
    )
    ap.add_argument(
        "--kernels",
        action="store_true",
        help="only the kernels on the CMSIS-NN anchor's shapes (instructions per MAC)",
    )
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    bad = [m for m in names if m not in MODELS]
    if bad or not names:
        ap.error(f"--models takes a comma list of {', '.join(MODELS)} (got {args.models!r})")
    if not 1 <= args.runs <= 4096 or not 1 <= args.zo_runs <= 4096:
        ap.error("--runs and --zo-runs must be in 1..4096")
    if not 0 <= args.q <= 510 or not 1 <= args.batch <= 256:
        ap.error("--q must be in 0..510 and --batch in 1..256 (the device's ranges)")
    if not 0 <= args.icount_shift <= 10:
        ap.error("--icount-shift must be in 0..10")
    from hilbench.npu import zoo

    try:
        version = qemu_version()
        # --probe-table --image: that image only (nothing built)
        images = {"mve": args.image} if args.probe_table and args.image else build_images()
    except BenchError as exc:
        print(f"bench_an547: {exc}", file=sys.stderr)
        return 2
    plugin = None if args.no_split else build_plugin()
    if isinstance(plugin, str):
        print(f"bench_an547: no per-function split: {plugin}", file=sys.stderr)
        plugin = None
    build = run_image(images["mve"], ["info"], args.icount_shift)[0].build
    print(f"host CPU (runs QEMU; the figures do not depend on it): {cpu()}")
    print(f"target: Cortex-M55 (QEMU mps3-an547), {version}, -icount shift={args.icount_shift}")
    print(
        f"firmware: device_fw core ({source_state()}), {build['compiler']}, "
        f"{build.get('flags', '?').replace(' -DHB_NN_SCALAR', '')}; scalar: AN547_NN=scalar "
        f"(-DHB_NN_SCALAR), Helium: AN547_NN=mve"
    )
    print(
        f"unit: {build['clock']} per forward pass, the fewest of {args.runs} runs; ratio = "
        f"scalar / Helium (higher: Helium needs fewer); outputs checked against the emulator"
    )
    print(
        "per-function split: "
        + (f"measured by {PLUGIN.name} (QEMU TCG plugin)" if plugin else "none (--no-split)")
    )
    if args.kernels:
        return 0 if kernels_table(images, args.icount_shift, args.runs) else 1
    if args.probe_table:
        elf = args.image or images["mve"]
        if plugin and MARK not in Symbols(elf).by_name:
            print(f"{elf}: no {MARK}: no per-function split")
            plugin = None
        print(f"image: {elf}")
        with tempfile.TemporaryDirectory(prefix="bench_an547_") as tmp:
            probe_table(elf, plugin, args.icount_shift, Path(tmp), args.top, args.probe_model)
        return 0
    graphs = [(MODELS[m][0], zoo.build(MODELS[m][1], seed=0, **MODELS[m][2])) for m in names]
    rows = [Row(r.label, r.graph, r.counts) for r in op_rows(graphs, None)]
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench_an547_") as tmp:
        work = Path(tmp)
        for i, r in enumerate(rows):
            measure(r, images, work, args.runs, args.icount_shift, seed=i)
        for i, (title, g) in enumerate(graphs):
            whole = Row(title, g, {title: 1})
            measure(whole, images, work, args.runs, args.icount_shift, seed=1000 + i)
            mine = [r for r in rows if r.counts.get(title)]
            print(f"\n{title}: {len(g.ops)} ops, {len(mine)} op shapes")
            print(HEAD)
            for r in mine:
                print_row(r.label, str(r.counts[title]), r.instr["scalar"], r.instr["mve"],
                          target_note(r))  # fmt: skip
            tot = {nn: sum(r.instr[nn] * r.counts[title] for r in mine) for nn in VARIANTS}
            print_row("sum of its ops (x count)", str(len(g.ops)), tot["scalar"], tot["mve"])
            for kinds, name in ((("conv", "depthwise", "fc"), "of which conv, depthwise, FC"),):
                part = {nn: sum(r.instr[nn] * r.counts[title] for r in mine
                                if r.label.split()[0] in kinds) for nn in VARIANTS}  # fmt: skip
                print_row(f"  {name}", "", part["scalar"], max(part["mve"], 1))
            print_row("whole model, one blob", str(len(g.ops)), whole.instr["scalar"],
                      whole.instr["mve"], target_note(whole))  # fmt: skip
            ok = ok and whole.same and all(r.same for r in mine)
        missed = [r for r in rows if target_note(r).strip().startswith("below")]
        print(
            f"\ntarget: conv and FC rows at least {TARGET:.0f}x fewer instructions with Helium: "
            + ("met by every row" if not missed else f"missed by {len(missed)} rows (marked)")
        )
        if args.q:
            print(
                "\nZO step, scalar against Helium (instructions; the parts timed alone with the "
                "core's functions, the last part of each step the rest)"
            )
            for title, g in graphs:
                ok = zo_step(images, title, g, args.q, args.batch, args.zo_runs,
                             args.icount_shift, work, plugin) and ok  # fmt: skip
    if not ok:
        print("\nMISMATCH: an image's output, losses or weights differ; see the rows above")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a device holds once a model is loaded, and the math of each command on it.

The ZO method comes from the blob's ``ZOCF`` section (defaults without one); the math is
``hilbench.zo`` (docs/zo-math.md), the same code the host's replay uses.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from hilbench.npu.blob import from_blob
from hilbench.npu.cost import forward_macs
from hilbench.npu.graph import Graph
from hilbench.zo import head, loss, perturb, update, zocf


@dataclass
class DataSlot:
    """One uploaded data set: int8 inputs (n_items, item_size), uint8 labels, n_classes."""

    inputs: np.ndarray
    labels: np.ndarray
    n_classes: int

    @property
    def item_size(self) -> int:
        return int(self.inputs.shape[1])


@dataclass
class ModelState:
    """A loaded model: its weights, their masters, the loss tables and the ZO settings."""

    graph: Graph
    tables: loss.LossTables
    zo: zocf.ZoConfig
    trained: list[zocf.Trainable]
    masters: list[np.ndarray]
    pool: perturb.Pool | None
    macs: int
    updates_applied: int = 0
    head_grads: int = 0  # HEAD_GRAD commands run since the load
    blob_crc: int = 0
    _units_cache: tuple[bytes, list[np.ndarray]] | None = None
    _split: tuple[Graph, Graph] | bool | None = False  # False: not computed yet
    # the prefix cache (the firmware's, core/model.c): per slot number, the DataSlot it was
    # made for, every item's activation at the cut and which are made
    _at_cut: dict | None = None

    def frozen_prefix(self) -> tuple[Graph, Graph] | None:
        """The graph split at the frozen prefix's cut (GraphIR.cut: ops before the first one
        reading a trained tensor, up to a boundary one activation crosses), or None."""
        if self._split is False:
            names = frozenset(self.trainable)
            cut = self.graph.cut(self.graph.first_reader(names)) if names else None
            self._split = self.graph.split(*cut) if cut else None
        return self._split  # type: ignore[return-value]

    @classmethod
    def from_blob(cls, blob: bytes) -> ModelState:
        """The host's view of a blob (hilbench.npu.blob: every host check, names kept)."""
        graph, sections = from_blob(blob)
        return cls.from_parts(graph, sections, blob_crc=zlib.crc32(blob))

    @classmethod
    def from_parts(cls, graph: Graph, sections: dict[str, bytes], blob_crc: int = 0) -> ModelState:
        """A model from a parsed graph and its sections: the LOSS and ZOCF sections are
        checked here, in that order (LossError / ZocfError with the device's message)."""
        tables = loss.LossTables.from_sections(sections)
        zo = zocf.ZoConfig.from_sections(sections)
        trained = zocf.resolve(zo, graph)
        masters = []
        for t in trained:
            data = graph.tensors[t.name].data
            if t.kind == "weight":
                masters.append(update.master_from_weights(data, zo.master_code))
            else:
                masters.append(
                    np.clip(data, -update.BIAS_LIMIT, update.BIAS_LIMIT).astype(np.int32)
                )
                graph.tensors[t.name].data = masters[-1].copy()
        pool = (
            perturb.Pool.generate(zo.pool_seed, zo.pool_size, zo.dist_code)
            if zo.pool_size
            else None
        )
        return cls(
            graph=graph,
            tables=tables,
            zo=zo,
            trained=trained,
            masters=masters,
            pool=pool,
            macs=forward_macs(graph),
            blob_crc=blob_crc,
        )

    @property
    def input_size(self) -> int:
        """Elements (int8 bytes) of one input: what a data slot's item_size must be."""
        return int(np.prod(self.graph.tensors[self.graph.input].shape))

    @property
    def output_size(self) -> int:
        """Elements of the output tensor: what a data slot's n_classes must be."""
        return int(np.prod(self.graph.tensors[self.graph.output].shape))

    @property
    def trainable(self) -> list[str]:
        """Names of the trained tensors, in PRNG tensor order."""
        return [t.name for t in self.trained]

    def weights(self, i: int) -> np.ndarray:
        return self.graph.tensors[self.trained[i].name].data

    def units(self, seeds: np.ndarray, i: int) -> np.ndarray:
        """Unit directions (Q8) of trained tensor ``i`` for each seed: (q, *shape) int32."""
        return self.all_units(seeds)[i]

    def all_units(self, seeds: np.ndarray) -> list[np.ndarray]:
        """Unit directions of every trained tensor. The last seeds' are kept, so an APPLY
        with the seeds of the PROBE before it does not regenerate them (same numbers)."""
        seeds = np.asarray(seeds, dtype=np.uint32)
        key = seeds.tobytes()
        if self._units_cache is not None and self._units_cache[0] == key:
            return self._units_cache[1]
        dist, scaling = self.zo.dist_code, self.zo.scaling_code
        shapes, layouts = [t.shape for t in self.trained], [t.layout for t in self.trained]
        raws = perturb.draw_all(seeds, shapes, dist, self.pool, layouts=layouts)
        units = [perturb.units(r, perturb.scales(r, dist, scaling)) for r in raws]
        self._units_cache = (key, units)
        return units

    def at_cut(self, slot: int, data: DataSlot, idx: np.ndarray) -> np.ndarray | None:
        """The activations at the frozen prefix's cut of items ``idx`` of ``data`` (slot
        ``slot``), each item's made once and kept while the slot holds this ``data`` (the
        firmware's prefix cache: the same numbers as the ops before the cut run again; the
        weights before the cut never train). None without a cut."""
        split = self.frozen_prefix()
        if split is None:
            return None
        head = split[0]
        if self._at_cut is None:
            self._at_cut = {}
        kept = self._at_cut.get(slot)
        if kept is None or kept[0] is not data:
            n = len(data.labels)
            shape = tuple(head.tensors[head.output].shape)
            kept = (data, np.zeros((n, *shape), np.int8), np.zeros(n, bool))
            self._at_cut[slot] = kept
        _, acts, made = kept
        idx = np.asarray(idx)
        need = np.unique(idx[~made[idx]])
        if len(need):
            x = data.inputs[need].reshape((len(need), *self.graph.tensors[self.graph.input].shape))
            acts[need] = head.run(x)
            made[need] = True
        return acts[idx]

    def probe(
        self,
        x: np.ndarray,
        y: np.ndarray,
        seeds: np.ndarray,
        eps: int,
        *,
        prefix: bool = True,
        at_cut: np.ndarray | None = None,
    ):
        """Mean Q16 losses at ``w + delta_k`` and at ``w - delta_k`` (two-point) or at ``w``
        (one-sided: the unperturbed loss, repeated q times) for each seed. With ``prefix``
        (the default) the frozen prefix runs once for the batch and only the rest per weight
        set (the same numbers; False: the whole graph per set, the reference); ``at_cut``
        (:meth:`at_cut`'s) are the batch's activations at the cut already, ``x`` unused."""
        q = len(seeds)
        one_sided = self.zo.one_sided
        overrides = {}
        units = self.all_units(seeds)
        for i, t in enumerate(self.trained):
            d = perturb.deltas(units[i], eps, t.eps_mult, t.unit_shift)
            w = self.weights(i)
            shift = update.perturb_weights if t.kind == "weight" else update.perturb_bias
            other = w[None] if one_sided else shift(w, -d)
            overrides[t.name] = np.concatenate([shift(w, d), other])
        graph, split = self.graph, self.frozen_prefix() if prefix else None
        if split is not None:  # the ops before the cut once, the batch's activations kept
            head, graph = split
            x = head.run(x) if at_cut is None else at_cut
        logits = graph.run(x, overrides)  # (2q or q+1, N, C)
        losses = loss.mean_q16(logits.reshape(logits.shape[0], len(y), -1), y, self.tables)
        if one_sided:
            return losses[:q], np.full(q, losses[q], dtype=losses.dtype)
        return losses[:q], losses[q:]

    def apply(self, seeds: np.ndarray, coeffs: np.ndarray) -> None:
        """``m -= (sum_k c_k u_k * M + R) >> s`` on every trained tensor (zo/update.py)."""
        seeds = np.asarray(seeds, dtype=np.uint32)
        stochastic = self.zo.rounding_code == update.STOCHASTIC
        units = self.all_units(seeds)
        for i, t in enumerate(self.trained):
            acc = update.accumulate(units[i], coeffs)
            weight = t.kind == "weight"
            frac = update.MASTER_FRAC[self.zo.master_code] if weight else 0
            shift = update.UPDATE_SHIFT - frac - t.unit_shift
            r = None
            if stochastic and shift > 0:
                r = update.rounding_offsets(int(seeds[0]), i, t.size, shift)
            step = update.step_from_acc(acc, t.eps_mult, shift, self.zo.rounding_code, r)
            m = self.masters[i].astype(np.int64) - step
            if weight:
                limit = 127 << frac
                self.masters[i] = update.clamp_master(m, limit, self.masters[i].dtype)
                self.graph.tensors[t.name].data = update.weights_from_master(
                    self.masters[i], self.zo.master_code
                )
            else:
                self.masters[i] = update.clamp_master(m, update.BIAS_LIMIT, np.int32)
                self.graph.tensors[t.name].data = self.masters[i].copy()
        self.updates_applied += 1

    def head_op(self):
        """(filter, bias or None, input, input_offset) of the hybrid's exact head: the graph's
        last op when it is a FULLY_CONNECTED whose output is the graph's output and neither of
        whose tensors the ZOCF trains; else the refusal's (name, args)."""
        op = self.graph.ops[-1] if self.graph.ops else None
        if op is None or op.kind != "FULLY_CONNECTED" or op.outputs[0] != self.graph.output:
            return ("HEAD_NONE", ())
        names = list(self.graph.tensors)
        w = op.inputs[1]
        b = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] else None
        for i, t in enumerate(self.trained):
            if t.name in (w, b):
                return ("HEAD_TRAINED", (names.index(t.name), i))
        return (w, b, op.inputs[0], int(op.params["input_offset"]))

    def head_grad(
        self, x: np.ndarray, y: np.ndarray, rates: np.ndarray, bias_gain: int, round_seed: int
    ) -> int:
        """HEAD_GRAD's math on a checked head (zo/head.py): one unperturbed pass over the
        batch, the integer gradient, the update; returns the batch's mean Q16 loss."""
        w_name, b_name, x_name, offset = self.head_op()
        acts = self.graph.run_all(x)
        logits = acts[self.graph.output].reshape(len(y), -1)
        xin = acts[x_name].reshape(len(y), -1)
        g, bsum = head.gradient(xin, logits, y, offset, self.tables)
        t = self.graph.tensors
        w2, b2 = head.update(
            t[w_name].data,
            None if b_name is None else t[b_name].data,
            g,
            bsum,
            rates,
            bias_gain,
            round_seed,
        )
        t[w_name].data = w2
        if b_name is not None:
            t[b_name].data = b2
        self.head_grads += 1
        return int(loss.mean_q16(logits, y, self.tables))

    def head_crc(self) -> int:
        """CRC-32 of the head's weights and biases (0 without a head)."""
        op = self.head_op()
        if isinstance(op[0], str) and op[0].startswith("HEAD_"):
            return 0
        t = self.graph.tensors
        return head.crc(t[op[0]].data, None if op[1] is None else t[op[1]].data)

    def evaluate(
        self, x: np.ndarray, y: np.ndarray, *, at_cut: np.ndarray | None = None
    ) -> tuple[int, int]:
        """(correct, summed Q16 loss) of the unperturbed model (``at_cut``: the items'
        activations at the frozen prefix's cut, :meth:`at_cut`'s, ``x`` unused)."""
        split = self.frozen_prefix() if at_cut is not None else None
        logits = self.graph.run(x) if split is None else split[1].run(at_cut)
        correct = int(np.sum(loss.predictions(logits) == y))
        return correct, int(loss.per_sample_q16(logits, y, self.tables).sum())

    def infer(self, x: np.ndarray) -> np.ndarray:
        """The int8 output of the unperturbed model for one input, flattened row-major."""
        return np.ascontiguousarray(self.graph.run(x[None])[0]).reshape(-1).astype(np.int8)

    def weights_crc(self) -> int:
        """CRC-32 over the trained tensors in ZOCF order (int8 bytes, int32 little-endian)."""
        crc = 0
        for i in range(len(self.trained)):
            data = np.ascontiguousarray(self.weights(i))
            crc = zlib.crc32(data.astype(data.dtype.newbyteorder("<")).tobytes(), crc)
        return crc

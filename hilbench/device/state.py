"""What a device holds once a model is loaded, and the math of each command on it."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from hilbench.npu.blob import from_blob
from hilbench.npu.cost import forward_macs
from hilbench.npu.graph import Graph
from hilbench.zo import loss, update
from hilbench.zo.perturb import directions


@dataclass
class DataSlot:
    """One uploaded data set: int8 inputs and uint8 labels."""

    inputs: np.ndarray
    labels: np.ndarray


@dataclass
class ModelState:
    """A loaded model: int8 weights, their Q16 masters and the loss tables."""

    graph: Graph
    tables: loss.LossTables
    trainable: list[str]
    masters: list[np.ndarray]
    macs: int
    updates_applied: int = 0
    blob_crc: int = 0
    _shapes: list[tuple[int, ...]] = field(default_factory=list)

    @classmethod
    def from_blob(cls, blob: bytes) -> ModelState:
        graph, sections = from_blob(blob)
        if "LOSS" not in sections:
            raise ValueError("model blob has no LOSS section")
        tables = loss.LossTables.from_bytes(sections["LOSS"])
        names = graph.trainable()
        masters = [update.master_from_weights(graph.tensors[n].data) for n in names]
        return cls(
            graph=graph,
            tables=tables,
            trainable=names,
            masters=masters,
            macs=forward_macs(graph),
            blob_crc=zlib.crc32(blob),
            _shapes=[graph.tensors[n].data.shape for n in names],
        )

    def weights(self, i: int) -> np.ndarray:
        return self.graph.tensors[self.trainable[i]].data

    def probe(self, x: np.ndarray, y: np.ndarray, seeds: np.ndarray, eps: int):
        """Mean Q16 losses of the +eps and -eps perturbation along each seed's direction."""
        q = len(seeds)
        overrides = {}
        for i, name in enumerate(self.trainable):
            u = directions(seeds, i, self._shapes[i])
            w = self.weights(i)
            overrides[name] = np.concatenate(
                [update.perturbed(w, u, eps), update.perturbed(w, u, -eps)]
            )
        logits = self.graph.run(x, overrides)  # (2q, N, C)
        losses = loss.mean_q16(logits.reshape(2 * q, len(y), -1), y, self.tables)
        return losses[:q], losses[q:]

    def apply(self, seeds: np.ndarray, coeffs: np.ndarray) -> None:
        for i, name in enumerate(self.trainable):
            self.masters[i] = update.apply_update(self.masters[i], seeds, coeffs, i)
            self.graph.tensors[name].data = update.weights_from_master(self.masters[i])
        self.updates_applied += 1

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> tuple[int, int]:
        """(correct, summed Q16 loss) of the unperturbed model."""
        logits = self.graph.run(x)
        correct = int(np.sum(loss.predictions(logits) == y))
        return correct, int(loss.per_sample_q16(logits, y, self.tables).sum())

    def weights_crc(self) -> int:
        crc = 0
        for i in range(len(self.trainable)):
            crc = zlib.crc32(np.ascontiguousarray(self.weights(i)).tobytes(), crc)
        return crc

    def memory_bytes(self) -> int:
        """Bytes the device needs: constants plus a 4-byte master per trainable weight."""
        const = sum(t.data.nbytes for t in self.graph.tensors.values() if t.data is not None)
        return const + sum(m.nbytes for m in self.masters)

"""The gzip rewrite at close: a closed trace copied with gzip'd tables, replaced atomically."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import h5py

from hilbench.trace import run_state
from hilbench.trace import schema as S
from hilbench.trace.file_errors import IO_ERRORS, check_root, open_error
from hilbench.trace.liveness import HAVE_FLOCK
from hilbench.trace.unclosable import detach_from_disk

#: Traces up to this size are compacted in memory (the copy is smaller than the file).
IN_MEMORY_MAX_BYTES = 256 * 2**20


def copy_attrs(src: h5py.HLObject, dst: h5py.HLObject) -> None:
    """Every attribute of ``src`` onto ``dst``, each with its stored type."""
    for key in src.attrs:
        dst.attrs.create(key, src.attrs[key], dtype=src.attrs.get_id(key).dtype)


def compact(path: str | Path) -> None:
    """Rewrite a closed trace with every table gzip'd (level 1 + shuffle), atomically.

    The copy is written next to the file and renamed over it, so a crash at any point
    leaves either the old or the new file, both valid; a copy the disk refuses is dropped.
    Tables already gzip'd and any other object are copied as they are. Refuses a file a
    writer holds (flags set).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.gzip-{os.getpid()}.tmp")
    try:
        try:
            src = h5py.File(path, "r", locking=False) if HAVE_FLOCK else h5py.File(path, "r")
        except OSError as exc:
            raise open_error(path, exc) from None
        with src:
            check_root(src, path)
            if path.stat().st_size <= IN_MEMORY_MAX_BYTES:
                _write_bytes(tmp, _copy_in_memory(src, tmp))
            else:
                _copy_on_disk(src, tmp)
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        with contextlib.suppress(OSError):
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _copy_in_memory(src: h5py.File, tmp: Path) -> bytes:
    """The gzip'd copy as the bytes of an HDF5 file built in memory (HDF5's core driver):
    HDF5 never writes to the disk, so a disk that fails cannot leave it half closed."""
    dst = h5py.File(f"{tmp}.core", "w", driver="core", backing_store=False, libver=S.LIBVER)
    try:
        _copy_file(src, dst)
        dst.flush()
        return bytes(dst.id.get_file_image())
    finally:
        dst.close()


def _write_bytes(tmp: Path, image: bytes) -> None:
    """``image`` as the new file ``tmp``, on the disk (fsync'd) before it is renamed."""
    with open(tmp, "wb") as fh:
        fh.write(image)
        fh.flush()
        os.fsync(fh.fileno())


def _copy_on_disk(src: h5py.File, tmp: Path) -> None:
    """The gzip'd copy written by HDF5 into ``tmp`` (a trace too large to build in memory)."""
    dst = h5py.File(tmp, "w", libver=S.LIBVER)
    try:
        _copy_file(src, dst)
        dst.flush()
    except BaseException:
        detach_from_disk(dst)  # a copy that failed: nothing more of it to the disk
        with contextlib.suppress(*IO_ERRORS):
            dst.close()
        raise
    dst.close()
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())


def _copy_file(src: h5py.File, dst: h5py.File) -> None:
    """Everything of ``src`` into ``dst``, the runs' tables gzip'd."""
    copy_attrs(src, dst)
    for name, obj in src.items():
        if name != S.RUNS_GROUP or not isinstance(obj, h5py.Group):
            src.copy(obj, dst, name=name)
            continue
        runs = dst.create_group(name)
        copy_attrs(obj, runs)
        for rid, g in obj.items():
            if isinstance(g, h5py.Group):
                _copy_run(g, runs.create_group(rid))
            else:
                obj.copy(g, runs, name=rid)


def _copy_run(g: h5py.Group, dg: h5py.Group) -> None:
    """One run group, its appendable tables rewritten gzip'd in larger chunks, its changing
    attributes (run_state.py) folded into its attributes."""
    copy_attrs(g, dg)
    for key, value in run_state.read(g)[1].items():
        if key in dg.attrs:
            del dg.attrs[key]
        dg.attrs[key] = value
    for child, ds in g.items():
        if child == run_state.NAME:
            continue
        if (
            child in S.CHUNK_ROWS
            and isinstance(ds, h5py.Dataset)
            and ds.compression != "gzip"
            and ds.ndim == 1
        ):
            data = ds[()]
            new = dg.create_dataset(
                child,
                data=data,
                maxshape=(None,),
                chunks=(S.compact_chunk_rows(child, len(data)),),
                **S.GZIP,
            )
            copy_attrs(ds, new)
        else:
            g.copy(ds, dg, name=child)

"""The gzip rewrite at close: a closed trace copied with gzip'd tables, replaced atomically."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import h5py

from hilbench.trace import schema as S
from hilbench.trace.file_errors import check_root, open_error
from hilbench.trace.liveness import HAVE_FLOCK


def copy_attrs(src: h5py.HLObject, dst: h5py.HLObject) -> None:
    """Every attribute of ``src`` onto ``dst``, each with its stored type."""
    for key in src.attrs:
        dst.attrs.create(key, src.attrs[key], dtype=src.attrs.get_id(key).dtype)


def compact(path: str | Path) -> None:
    """Rewrite a closed trace with every table gzip'd (level 1 + shuffle), atomically.

    The copy is written next to the file and renamed over it, so a crash at any point
    leaves either the old or the new file, both valid. Tables already gzip'd and any other
    object are copied as they are. Refuses a file a writer holds (flags set).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.gzip-{os.getpid()}.tmp")
    try:
        try:
            src = h5py.File(path, "r", locking=False) if HAVE_FLOCK else h5py.File(path, "r")
        except OSError as exc:
            raise open_error(path, exc) from None
        with src, h5py.File(tmp, "w", libver=S.LIBVER) as dst:
            check_root(src, path)
            copy_attrs(src, dst)
            for name, obj in src.items():
                if name != S.RUNS_GROUP or not isinstance(obj, h5py.Group):
                    src.copy(obj, dst, name=name)
                    continue
                runs = dst.create_group(name)
                copy_attrs(obj, runs)
                for rid, g in obj.items():
                    if not isinstance(g, h5py.Group):
                        obj.copy(g, runs, name=rid)
                        continue
                    dg = runs.create_group(rid)
                    copy_attrs(g, dg)
                    for child, ds in g.items():
                        if (
                            child in S.DATASETS
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
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
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

"""The image loaders on small files written here in the published formats: STL-10's binary
records, EuroSAT's RGB folders, Fashion-MNIST's IDX files; bad input is one ConfigError."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from hilbench import data as datasets
from hilbench.data import eurosat, fashion, idx, images, stl10, vision
from hilbench.errors import ConfigError


def _stl10_folder(tmp_path, n_train=4, n_test=3):
    rng = np.random.default_rng(7)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8)
        y = (np.arange(n) % 10 + 1).astype(np.uint8)
        (tmp_path / f"{split}_X.bin").write_bytes(stl10.encode_images(x))
        (tmp_path / f"{split}_y.bin").write_bytes(y.tobytes())
        out[split] = (x, y)
    return out


def test_stl10_column_major_records_decode_to_rows_first_images(tmp_path):
    # one image whose pixel (row r, column c, channel k) is known, written as the published
    # format lays it out: channel, then column, then row varying fastest
    img = np.zeros((96, 96, 3), np.uint8)
    img[5, 70, 0] = 200  # row 5, column 70, red
    img[90, 1, 2] = 99
    raw = bytearray(stl10.IMAGE_BYTES)
    for r, c, k in ((5, 70, 0), (90, 1, 2)):
        raw[k * 96 * 96 + c * 96 + r] = img[r, c, k]
    out = stl10.decode_images(bytes(raw))
    assert out.shape == (1, 96, 96, 3)
    assert out[0, 5, 70, 0] == 200 and out[0, 90, 1, 2] == 99
    assert int(out.sum()) == 299
    assert stl10.encode_images(out) == bytes(raw)


def test_stl10_folder_loads_with_labels_from_zero(tmp_path):
    written = _stl10_folder(tmp_path)
    x, y = stl10.load_split(tmp_path, "train")
    np.testing.assert_array_equal(x, written["train"][0])
    np.testing.assert_array_equal(y, written["train"][1] - 1)
    d = datasets.load(f"stl10:{tmp_path}", resolution=32)
    assert d.x_train.shape == (4, 32, 32, 3) and d.x_test.shape == (3, 32, 32, 3)
    assert d.y_test.tolist() == [0, 1, 2]
    assert d.x_train.min() >= 0.0 and d.x_train.max() <= 1.0


def test_a_folder_data_set_takes_at_most_n_items_of_each_split(tmp_path):
    _stl10_folder(tmp_path, n_train=6, n_test=5)
    whole = datasets.load(f"stl10:{tmp_path}", resolution=8)
    some = datasets.load(f"stl10:{tmp_path}@3", resolution=8)
    assert len(some.y_train) == 3 and len(some.y_test) == 3
    for part, full in ((some.x_train, whole.x_train), (some.x_test, whole.x_test)):
        assert all(any(np.array_equal(x, y) for y in full) for x in part)  # a subset
    again = datasets.load(f"stl10:{tmp_path}@3", resolution=16)
    assert again.y_train.tolist() == some.y_train.tolist()  # the same items every time
    with pytest.raises(ConfigError, match="'@x' is not a number of items"):
        datasets.load(f"stl10:{tmp_path}@x", resolution=8)


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda p: (p / "test_y.bin").unlink(), "test_y.bin is missing"),
        (lambda p: (p / "train_X.bin").write_bytes(b"\0" * 1000), "not a whole number"),
        (lambda p: (p / "train_y.bin").write_bytes(b"\1\2"), "2 labels for the 4 images"),
        (lambda p: (p / "train_y.bin").write_bytes(b"\1\2\3\13"), "label 11, outside 1..10"),
    ],
)
def test_stl10_bad_files_say_which_and_what(tmp_path, damage, words):
    _stl10_folder(tmp_path)
    damage(tmp_path)
    with pytest.raises(ConfigError, match=words):
        datasets.load(f"stl10:{tmp_path}", resolution=16)


def _eurosat_folder(root, per_class=3, classes=("Forest", "AnnualCrop", "SeaLake")):
    from PIL import Image

    top = root / "EuroSAT_RGB"
    colours = {}
    for i, name in enumerate(classes):
        (top / name).mkdir(parents=True)
        colours[name] = (40 * i + 20, 200 - 50 * i, 90)
        for j in range(per_class):
            Image.new("RGB", (64, 64), colours[name]).save(top / name / f"{name}_{j + 1}.jpg")
    return top, colours


def test_eurosat_rgb_folders_load_with_alphabetical_labels(tmp_path):
    _, colours = _eurosat_folder(tmp_path)
    x, y, names = eurosat.load(tmp_path)  # the archive's top folder is found
    assert names == ["AnnualCrop", "Forest", "SeaLake"]
    assert x.shape == (9, 64, 64, 3) and y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for label, name in enumerate(names):  # flat colours survive JPEG within a few levels
        mean = x[y == label].reshape(-1, 3).mean(axis=0)
        assert np.abs(mean - colours[name]).max() < 4
    d = datasets.load(f"eurosat:{tmp_path}", resolution=16)
    assert len(d.y_train) + len(d.y_test) == 9 and len(d.y_test) == 2
    assert d.x_train.shape[1:] == (16, 16, 3)


def test_eurosat_refuses_multispectral_and_empty_folders(tmp_path):
    (tmp_path / "ms" / "Forest").mkdir(parents=True)
    (tmp_path / "ms" / "Forest" / "Forest_1.tif").write_bytes(b"II*\0")
    with pytest.raises(ConfigError, match=r"multispectral variant \(.tif"):
        eurosat.load(tmp_path / "ms")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no class folders of \.jpg"):
        eurosat.load(tmp_path / "empty")
    with pytest.raises(ConfigError, match="is not a folder"):
        datasets.load(f"eurosat:{tmp_path / 'nowhere'}")


def test_eurosat_refuses_a_broken_or_wrong_sized_image(tmp_path):
    from PIL import Image

    top, _ = _eurosat_folder(tmp_path, per_class=1)
    (top / "Forest" / "Forest_9.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ConfigError, match=r"Forest_9\.jpg is not a readable image"):
        eurosat.load(tmp_path)
    (top / "Forest" / "Forest_9.jpg").unlink()
    Image.new("RGB", (32, 64)).save(top / "Forest" / "Forest_8.jpg")
    with pytest.raises(ConfigError, match="is 32x64, not 64x64"):
        eurosat.load(tmp_path)


def _idx_bytes(a: np.ndarray) -> bytes:
    head = bytes([0, 0, idx.UBYTE, a.ndim]) + np.asarray(a.shape, ">u4").tobytes()
    return head + a.astype(np.uint8).tobytes()


def test_idx_reads_gzip_and_plain_and_refuses_truncation(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a.gz").write_bytes(gzip.compress(_idx_bytes(a)))
    (tmp_path / "b").write_bytes(_idx_bytes(a))
    np.testing.assert_array_equal(idx.read_idx(tmp_path / "a.gz"), a)
    np.testing.assert_array_equal(idx.read_idx(tmp_path / "b"), a)
    (tmp_path / "c").write_bytes(_idx_bytes(a)[:-1])
    with pytest.raises(ConfigError, match="truncated or padded"):
        idx.read_idx(tmp_path / "c")
    (tmp_path / "d").write_bytes(b"\x89PNG....")
    with pytest.raises(ConfigError, match="not an IDX file"):
        idx.read_idx(tmp_path / "d")


def test_fashion_mnist_missing_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv(fashion.ENV_DIR, str(tmp_path))
    with pytest.raises(ConfigError, match="apt-get install dataset-fashion-mnist"):
        fashion.load_split("train")


def test_fashion_split_is_fixed_and_disjoint():
    a, b = fashion.indices(), fashion.indices()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not set(a["source"]) & set(a["target_train"])
    assert len(a["source"]) == fashion.SOURCE_ITEMS
    assert len(a["target_train"]) == fashion.TARGET_TRAIN


def test_shift_keeps_the_garment_and_changes_colours():
    grey = np.zeros((2, 16, 16, 3), np.float32)
    grey[:, 4:12, 4:12] = 1.0  # a bright square garment on black
    out = fashion.shift(grey, np.array([3, 4]))
    assert out.shape == grey.shape and out.min() >= 0 and out.max() <= 1
    assert not np.allclose(out[0], out[1])  # per-item draws
    np.testing.assert_array_equal(out, fashion.shift(grey, np.array([3, 4])))  # deterministic
    inside, outside = out[:, 4:12, 4:12], out[:, :2, :2]
    assert inside.mean() > outside.mean()  # the garment stays brighter than its background
    assert np.ptp(inside[0].reshape(-1, 3), axis=0).max() < 1e-6  # one flat colour per garment
    assert outside.max() <= 0.5 + 1e-6


def test_to_float_rgb_resizes_and_copies_grey():
    grey = np.full((1, 28, 28), 255, np.uint8)
    out = images.to_float_rgb(grey, 24)
    assert out.shape == (1, 24, 24, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, 1.0, atol=1e-6)


def test_bad_resolution_and_names_are_one_line():
    with pytest.raises(ConfigError, match="resolution 4 is out of range"):
        vision.check_resolution(4)
    with pytest.raises(ConfigError, match="names no folder"):
        datasets.load("stl10:")
    with pytest.raises(ConfigError, match="has no resolution"):
        datasets.load("digits", resolution=24)
    with pytest.raises(ConfigError, match="eurosat:DIR, stl10:DIR"):
        datasets.load("imagenet")


def test_the_digits_are_scikit_learns_read_without_importing_it():
    """The digits come from scikit-learn's own file, equal to its loader's, and reading them
    costs no scikit-learn import (a fresh process: 1.8 s of imports saved per CLI run)."""
    import subprocess
    import sys

    from sklearn.datasets import load_digits as sklearn_load_digits

    from hilbench.data.digits import load_digits

    pixels, labels = load_digits()
    bunch = sklearn_load_digits()
    assert np.array_equal(pixels, bunch.data) and np.array_equal(labels, bunch.target)
    probe = (
        "import sys; from hilbench.data import load; d = load('digits'); "
        "print(len(d.y_train) + len(d.y_test), 'sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1797", "False"]

"""The data source inside real ML loaders: PyTorch DataLoader workers and Grain."""

from __future__ import annotations

import numpy as np
import pytest

import arrayds

torch = pytest.importorskip("torch", reason="torch is part of the [ml] extra")
grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")


@pytest.fixture
def token_files(tmp_path) -> tuple[list[str], list[bytes]]:
    rng = np.random.default_rng(0)
    paths, records = [], []
    for k in range(3):
        recs = [rng.integers(0, 1000, size=8, dtype=np.uint16).tobytes() for _ in range(100)]
        path = str(tmp_path / f"tokens-{k}.array_record")
        with arrayds.ArrayRecordWriter(path, "group_size:1,zstd:3") as w:
            w.write_many(recs)
        paths.append(path)
        records.extend(recs)
    return paths, records


class Tokens(torch.utils.data.Dataset):
    """A map-style dataset over the source; batches go through __getitems__."""

    def __init__(self, source: arrayds.ArrayRecordDataSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self._decode(self.source[i])

    def __getitems__(self, indices: list[int]) -> list[torch.Tensor]:
        return [self._decode(b) for b in self.source.__getitems__(indices)]

    @staticmethod
    def _decode(b: bytes) -> torch.Tensor:
        return torch.from_numpy(np.frombuffer(b, dtype=np.uint16).astype(np.int64))


def test_torch_dataloader_with_workers(token_files) -> None:
    paths, records = token_files
    src = arrayds.ArrayRecordDataSource(paths)
    src[0]  # readers open in the parent before the workers start
    # The source itself: a batch of bytes per step (default collate keeps bytes lists).
    loader = torch.utils.data.DataLoader(src, batch_size=32, num_workers=2, shuffle=False)
    flat = [b for batch in loader for b in batch]
    assert flat == records
    # Through a decoding Dataset, shuffled, with tensors collated.
    loader = torch.utils.data.DataLoader(
        Tokens(src),
        batch_size=16,
        num_workers=2,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    rows = torch.cat(list(loader)).numpy().astype(np.uint16)
    got = sorted(r.tobytes() for r in rows)
    assert got == sorted(records)


def test_torch_dataloader_spawn(token_files) -> None:
    paths, records = token_files
    src = arrayds.ArrayRecordDataSource(paths)
    loader = torch.utils.data.DataLoader(
        src, batch_size=50, num_workers=2, multiprocessing_context="spawn"
    )
    assert [b for batch in loader for b in batch] == records


def test_grain_shuffle_batch(token_files) -> None:
    paths, records = token_files
    src = arrayds.ArrayRecordDataSource(paths)
    ds = (
        grain.MapDataset.source(src)
        .shuffle(seed=42)
        .map(lambda b: np.frombuffer(b, dtype=np.uint16))
        .batch(25)
    )
    assert len(ds) == 12
    batches = [ds[i] for i in range(len(ds))]
    assert all(b.shape == (25, 8) for b in batches)
    got = sorted(row.tobytes() for b in batches for row in b)
    assert got == sorted(records)
    order = [row.tobytes() for b in batches for row in b]
    assert order != records  # it really shuffled
    again = [row.tobytes() for i in range(len(ds)) for row in ds[i]]
    assert again == order  # deterministic for a seed


def test_grain_batched_source_read(token_files) -> None:
    paths, records = token_files
    src = arrayds.ArrayRecordDataSource(paths)
    ds = grain.MapDataset.source(src)
    assert ds._getitems([5, 250, 5]) == [records[5], records[250], records[5]]


class DecodeTokens(grain.transforms.Map):
    """bytes -> uint16 token ids (grain's Batch would turn bytes into NUL-stripped
    numpy.bytes_)."""

    def map(self, element: bytes) -> np.ndarray:
        return np.frombuffer(element, dtype=np.uint16)


def test_grain_data_loader_with_workers(token_files) -> None:
    paths, records = token_files
    src = arrayds.ArrayRecordDataSource(paths)
    sampler = grain.samplers.IndexSampler(num_records=len(src), shuffle=True, seed=1, num_epochs=1)
    loader = grain.DataLoader(
        data_source=src,
        sampler=sampler,
        worker_count=2,
        operations=[DecodeTokens(), grain.transforms.Batch(batch_size=20)],
    )
    got = sorted(row.tobytes() for batch in loader for row in batch)
    assert got == sorted(records)

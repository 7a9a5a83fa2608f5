"""Random access over records datasets: arrayds.ArrayRecordDataSource(url), the
official array_record data source and Grain on the same shard files, PyTorch
DataLoader workers and Grain pipelines."""

from __future__ import annotations

import pickle

import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds import records as records

from .conftest import assert_example_equal, example


@pytest.fixture
def dataset(tmp_path, examples):
    url = str(tmp_path / "train")
    records.write_records(db.from_sequence(examples, npartitions=5), url)
    return url, examples


def test_global_random_access_raw_and_decoded(dataset):
    url, items = dataset
    raw = arrayds.ArrayRecordDataSource(url)
    assert len(raw) == len(items)
    ser = arrayds.serializers.get("msgpack")
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(items), size=100)
    for i in idx[:20]:
        assert isinstance(raw[int(i)], bytes)
        assert_example_equal(ser.decode(raw[int(i)]), items[int(i)])
    dec = arrayds.ArrayRecordDataSource(url, decode=True)
    for i, got in zip(idx, dec[idx], strict=True):
        assert_example_equal(got, items[int(i)])
    assert_example_equal(dec[-1], items[-1])
    with pytest.raises(IndexError):
        dec[len(items)]
    # the same through records.data_source and the dataset handle
    src = records.data_source(url, decode=True)
    assert_example_equal(src.__getitems__([3])[0], items[3])
    assert [x["id"] for x in records.open_records(url).data_source(decode=True)] == list(
        range(len(items))
    )


def test_data_source_pickles_and_reads_after(dataset):
    url, items = dataset
    src = arrayds.ArrayRecordDataSource(url, decode=True)
    src[0]
    clone = pickle.loads(pickle.dumps(src))
    assert len(clone) == len(items)
    assert_example_equal(clone[150], items[150])


def test_pickle_dataset_decode_needs_consent(tmp_path):
    url = str(tmp_path / "pk")
    records.write_records([{1, 2}, {3}], url, serializer="pickle")
    raw = arrayds.ArrayRecordDataSource(url)
    assert isinstance(raw[0], bytes)  # bytes are always fine
    with pytest.raises(ValueError, match="written with the pickle serializer.*allow_pickle"):
        arrayds.ArrayRecordDataSource(url, decode=True)  # refused when made, not per item
    ok = records.data_source(url, decode=True, allow_pickle=True)
    assert ok[1] == {3}
    assert pickle.loads(pickle.dumps(ok))[0] == {1, 2}


def test_plain_files_still_work_next_to_datasets(dataset, tmp_path):
    url, items = dataset
    ds = records.open_records(url)
    # the shard files themselves, as plain ArrayRecord files
    src = arrayds.ArrayRecordDataSource(ds.shard_paths)
    assert len(src) == len(items)
    with pytest.raises(ValueError, match="decode=True"):
        arrayds.ArrayRecordDataSource(ds.shard_paths, decode=True)


def test_official_data_source_and_grain_read_shards_directly(dataset):
    from array_record.python.array_record_data_source import (
        ArrayRecordDataSource as OfficialSource,
    )

    url, items = dataset
    paths = records.open_records(url).shard_paths
    off = OfficialSource(paths)
    ours = arrayds.ArrayRecordDataSource(url)
    assert len(off) == len(ours) == len(items)
    idx = np.random.default_rng(3).permutation(len(items))[:50].tolist()
    assert [off[i] for i in idx] == [ours[i] for i in idx]
    assert off.__getitems__(idx) == ours.__getitems__(idx)

    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    gsrc = grain.sources.ArrayRecordDataSource(paths)
    assert len(gsrc) == len(items)
    assert gsrc[17] == ours[17]


def test_torch_dataloader_workers_shuffle(dataset):
    torch = pytest.importorskip("torch", reason="torch is part of the [ml] extra")
    url, items = dataset
    src = arrayds.ArrayRecordDataSource(url, decode=True)

    def collate(batch):
        return [x["id"] for x in batch]

    loader = torch.utils.data.DataLoader(
        src,
        batch_size=16,
        num_workers=2,
        shuffle=True,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(0),
    )
    ids = [i for batch in loader for i in batch]
    assert sorted(ids) == list(range(len(items)))
    assert ids != list(range(len(items)))


def test_grain_shuffle_batch(dataset):
    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    url, items = dataset
    src = arrayds.ArrayRecordDataSource(url, decode=True)
    ds = grain.MapDataset.source(src).shuffle(seed=7).map(lambda x: x["id"]).batch(25)
    batches = [ds[i] for i in range(len(ds))]
    flat = [int(i) for b in batches for i in b]
    assert sorted(flat) == list(range(len(items)))
    assert flat != list(range(len(items)))
    again = [int(i) for k in range(len(ds)) for i in ds[k]]
    assert again == flat  # deterministic for a seed


def test_example_helper_is_deterministic():
    assert_example_equal(example(5), example(5))

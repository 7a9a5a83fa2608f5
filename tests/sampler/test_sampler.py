"""arrayds.sampler: the block-then-window shuffle as an order (permutation, determinism,
locality), as a checkpointable and sharded PyTorch sampler, as a Grain index sampler
and MapDataset step, end to end over a records dataset."""

from __future__ import annotations

import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds import records as records
from arrayds.sampler import BlockShuffleSampler, block_shuffle


@pytest.mark.parametrize(
    ("n", "block", "window"), [(1, 1, 1), (10, 3, 2), (100, 7, 3), (64, 8, 8), (50, 50, 1)]
)
def test_each_record_once_per_epoch_and_records_stay_in_their_window(n, block, window):
    s = BlockShuffleSampler(n, block, window, seed=5, num_epochs=3)
    for epoch in range(3):
        order = s.epoch_order(epoch).tolist()
        assert sorted(order) == list(range(n))
        # cut the order into windows of window_blocks permuted blocks: each cut holds
        # exactly the records of whole blocks, at most window_blocks of them
        pos = 0
        seen_blocks: set[int] = set()
        while pos < n:
            blocks = set()
            take = 0
            for r in order[pos:]:
                b = r // block
                if b not in blocks and len(blocks) == window:
                    break
                blocks.add(b)
                take += 1
            got = order[pos : pos + take]
            whole = {r for b in blocks for r in range(b * block, min((b + 1) * block, n))}
            assert set(got) == whole and not (blocks & seen_blocks)
            seen_blocks |= blocks
            pos += take
    assert len(s) == 3 * n and list(s) == [r for e in range(3) for r in s.epoch_order(e)]


def test_blocks_and_records_are_actually_shuffled():
    s = BlockShuffleSampler(1000, block_size=10, window_blocks=4, seed=1, num_epochs=2)
    e0, e1 = s.epoch_order(0), s.epoch_order(1)
    assert e0.tolist() != list(range(1000)) and e0.tolist() != e1.tolist()
    first_blocks = [r // 10 for r in e0[:40]]
    assert len(set(first_blocks)) == 4 and set(first_blocks) != {0, 1, 2, 3}
    # within a window records are permuted, not block after block
    assert [r // 10 for r in e0[:40]] != sorted(first_blocks, key=first_blocks.index)


def test_full_shuffle_with_blocks_of_one_and_one_window():
    s = BlockShuffleSampler(500, block_size=1, window_blocks=500, seed=2)
    counts = np.zeros((10, 10))
    for seed in range(200):
        o = BlockShuffleSampler(100, 1, 100, seed=seed).epoch_order(0)
        counts[np.arange(10), o[:10] // 10] += 1
    assert sorted(s.epoch_order(0).tolist()) == list(range(500))
    assert counts.min() >= 5  # every decile reaches every early position


def test_order_is_a_function_of_seed_and_epoch():
    a = BlockShuffleSampler(300, 16, 3, seed=9, num_epochs=2)
    b = BlockShuffleSampler(300, 16, 3, seed=9, num_epochs=2)
    c = BlockShuffleSampler(300, 16, 3, seed=10, num_epochs=2)
    assert list(a) == list(b) and list(a) != list(c)
    assert [a[g].record_key for g in range(600)] == list(b)
    assert a.epoch_order(1).tolist() == b.epoch_order(1).tolist()


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_shards_are_disjoint_and_cover_every_epoch(count):
    n, epochs = 103, 2
    shards = [
        BlockShuffleSampler(n, 8, 2, seed=4, shard_index=i, shard_count=count, num_epochs=epochs)
        for i in range(count)
    ]
    whole = BlockShuffleSampler(n, 8, 2, seed=4, num_epochs=epochs)
    for e in range(epochs):
        parts = [s.epoch_order(e).tolist() for s in shards]
        assert sorted(r for p in parts for r in p) == list(range(n))
    assert sum(len(s) for s in shards) == epochs * n
    assert sorted(r for s in shards for r in s) == sorted(whole)
    # shard i reads the global positions i, i + count, ... (Grain's DataLoader split)
    glob = list(whole)
    for i, s in enumerate(shards):
        assert list(s) == glob[i::count]


def test_checkpoint_mid_epoch_gives_the_same_remaining_order():
    s = BlockShuffleSampler(77, 5, 3, seed=11, shard_index=1, shard_count=2, num_epochs=2)
    full = list(s)
    it = iter(s)
    head = [next(it) for _ in range(50)]  # into the second epoch
    state = s.state_dict()
    assert state == {"epoch": 1, "position": 101 - 77}
    again = BlockShuffleSampler(77, 5, 3, seed=11, shard_index=1, shard_count=2, num_epochs=2)
    again.load_state_dict(state)
    assert head + list(again) == full
    assert list(again) == full  # a finished iteration starts over


def test_bad_arguments_are_value_errors_naming_them():
    for kw, name in [
        ({"num_records": 0}, "num_records"),
        ({"block_size": 0}, "block_size"),
        ({"window_blocks": -1}, "window_blocks"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"shard_count": 0}, "shard_count"),
        ({"shard_index": 2, "shard_count": 2}, "shard_index"),
        ({"num_epochs": 0}, "num_epochs"),
        ({"block_size": True}, "block_size"),
    ]:
        args = {"num_records": 10, "block_size": 2, "window_blocks": 2, "seed": 0, **kw}
        with pytest.raises(ValueError, match=name):
            BlockShuffleSampler(**args)
    s = BlockShuffleSampler(10, 2, 2, seed=0, shard_index=1, shard_count=2)
    with pytest.raises(ValueError, match="not a position of shard 1"):
        s.load_state_dict({"epoch": 0, "position": 2})
    with pytest.raises(ValueError, match="not a sampler state"):
        s.load_state_dict({"epoch": 0})
    with pytest.raises(IndexError, match="out of range"):
        s[10]
    with pytest.raises(TypeError, match="no length"):
        len(BlockShuffleSampler(10, 2, 2, seed=0, num_epochs=None))


# ----------------------------------------------------- end to end on a dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """240 records in 4 shards, written by a dask bag once for the module (the tests
    only read it)."""
    url = str(tmp_path_factory.mktemp("sampler") / "train")
    items = [{"id": i, "x": np.full(3, i, dtype=np.int32)} for i in range(240)]
    records.write_records(db.from_sequence(items, npartitions=4), url)
    return url


def test_grain_dataloader_with_the_sampler_over_a_records_dataset(dataset):
    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    src = arrayds.ArrayRecordDataSource(dataset, decode=True)
    sampler = BlockShuffleSampler(len(src), 16, 2, seed=3, num_epochs=1)

    def run(shard: int, count: int, workers: int) -> list[int]:
        loader = grain.python.DataLoader(
            data_source=src,
            sampler=sampler,
            operations=[grain.python.Batch(batch_size=20, drop_remainder=False)],
            worker_count=workers,
            shard_options=grain.python.ShardOptions(shard, count),
        )
        return [int(i) for batch in loader for i in batch["id"]]

    assert run(0, 1, 0) == list(sampler)
    parts = [run(i, 2, 1) for i in (0, 1)]  # two hosts, one worker process each
    assert sorted(parts[0] + parts[1]) == list(range(240))
    assert parts[0] == list(sampler)[0::2]


def test_grain_dataloader_checkpoint_resumes_the_same_order(dataset):
    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    src = arrayds.ArrayRecordDataSource(dataset, decode=True)
    sampler = BlockShuffleSampler(len(src), 16, 2, seed=3, num_epochs=1)
    loader = grain.python.DataLoader(
        data_source=src, sampler=sampler, worker_count=0, shard_options=grain.python.NoSharding()
    )
    it = iter(loader)
    head = [int(next(it)["id"]) for _ in range(100)]
    state = it.get_state()
    it2 = iter(loader)
    it2.set_state(state)
    assert head + [int(r["id"]) for r in it2] == list(sampler)


def test_grain_map_dataset_step(dataset):
    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    src = arrayds.ArrayRecordDataSource(dataset, decode=True)
    ds = block_shuffle(grain.MapDataset.source(src), block_size=16, window_blocks=2, seed=3)
    ids = [int(x["id"]) for x in ds.map(lambda x: x).to_iter_dataset()]
    assert ids == BlockShuffleSampler(240, 16, 2, seed=3).epoch_order(0).tolist()
    second = [int(ds[240 + i]["id"]) for i in range(240)]  # the next epoch: another order
    assert sorted(second) == list(range(240)) and second != ids
    batches = list(ds.batch(48))
    assert [b["id"].tolist() for b in batches] == [ids[i : i + 48] for i in range(0, 240, 48)]
    import pickle

    assert [int(pickle.loads(pickle.dumps(ds))[i]["id"]) for i in range(5)] == ids[:5]


def test_torch_dataloader_with_the_sampler(dataset):
    torch = pytest.importorskip("torch", reason="torch is part of the [ml] extra")
    src = arrayds.ArrayRecordDataSource(dataset, decode=True)
    sampler = BlockShuffleSampler(len(src), 16, 2, seed=8, num_epochs=2)
    loader = torch.utils.data.DataLoader(
        src, batch_size=32, sampler=sampler, num_workers=2, collate_fn=lambda b: b
    )
    ids = [int(x["id"]) for batch in loader for x in batch]
    assert ids == list(sampler) and len(ids) == 480
    assert sorted(ids[:240]) == list(range(240)) == sorted(ids[240:])


def test_full_random_shuffle_still_reads_in_batches(dataset):
    torch = pytest.importorskip("torch", reason="torch is part of the [ml] extra")
    src = arrayds.ArrayRecordDataSource(dataset, decode=True)
    full = BlockShuffleSampler(len(src), block_size=1, window_blocks=len(src), seed=1)
    loader = torch.utils.data.DataLoader(src, batch_size=40, sampler=full, collate_fn=lambda b: b)
    batches = list(loader)
    assert [len(b) for b in batches] == [40] * 6
    assert [int(x["id"]) for b in batches for x in b] == list(full)

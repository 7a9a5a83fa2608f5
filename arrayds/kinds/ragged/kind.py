"""The ragged kind's registry record and its ``to_arrayrecord`` writer.

>>> from arrayds.nodes import registry
>>> registry.get("ragged").name, registry.get_writer("ragged").kind
('ragged', 'ragged')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...nodes import registry as kinds
from ...nodes.names import (
    SHARD_DIR,
)

if TYPE_CHECKING:
    pass
from .compact import compact_ragged, tail_sizes, usage
from .handle import api_reader, node_factory
from .manifest import KIND, RaggedManifest, RaggedShard, RaggedWindow
from .write import api_writer, is_bag, is_ragged_list


def _shard_refs(m: RaggedManifest) -> list[kinds.ShardRef]:
    """The shard files of a ragged array: pieces then an index record, counted."""
    return [kinds.ShardRef(s.path, records=s.records, size=s.bytes, entry=s) for s in m.shards]


def _place_tail(old: Sequence[RaggedShard], new: list[RaggedShard]) -> list[RaggedShard]:
    """A rewritten tail's entries numbered from the first item of the old tail."""
    return [e.shifted(old[0].start) for e in new]


def _window(doc: Mapping[str, Any], entries: list[Any]) -> dict[str, Any]:
    """The manifest of the newest ``entries`` of a ragged array's shard list (items
    from the first one's start on: :class:`RaggedWindow`), what the tiered merge of an
    append weighs instead of the whole list."""
    first = entries[0]["items"][0] if entries else 0
    return {**doc, "shards": RaggedWindow(entries, first), "count": None}


kinds.register(
    kinds.NodeKind(
        KIND,
        parse=RaggedManifest.from_json,
        open=node_factory,  # arrayds.open(url)["clips"] -> RaggedArray
        to_dask=api_reader,
        shard_folder=SHARD_DIR,
        shards=_shard_refs,
        verify_extra=kinds.lazy("arrayds.tools.verify", "ragged_checks"),
        describe=kinds.lazy("arrayds.tools.describe", "describe_ragged"),
        info_text=kinds.lazy("arrayds.tools.describe", "ragged_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_ragged"),
        compact=compact_ragged,
        usage=usage,
        tail_sizes=tail_sizes,
        place_tail=_place_tail,
        window=_window,
        lazy_shards=True,
        segment_summary=("records", "items"),
        totals="ragged",
        plural="ragged",
        phrase="a ragged array",
    )
)
kinds.register_writer(
    kinds.Writer("ragged", lambda x: is_ragged_list(x) or is_bag(x), api_writer, KIND)
)

"""Record serializers (the public names; the code is
:mod:`arrayds.kinds.records.serializers`).

>>> from arrayds import serializers
>>> serializers.get("msgpack").name
'msgpack'
"""

from .kinds.records.serializers import (
    BUILTIN,
    Serializer,
    SerializerSpec,
    choose_auto,
    get,
    is_bytes_like,
    register,
    registered,
    resolve_for_read,
    resolve_for_write,
)

__all__ = [
    "BUILTIN",
    "Serializer",
    "SerializerSpec",
    "choose_auto",
    "get",
    "is_bytes_like",
    "register",
    "registered",
    "resolve_for_read",
    "resolve_for_write",
]

"""Round trips and errors of arrayds.serializers (raw, msgpack with numpy, json, pickle,
user pairs, the registry and the pickle gate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arrayds.kinds.records import serializers as S

MSGPACK = S.get("msgpack")


def assert_same(a, b):
    """Exact equality including numpy dtype, shape and NaN payload positions."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == np.ascontiguousarray(b).tobytes()
        assert b.flags.writeable
    elif isinstance(a, np.generic):
        assert type(a) is type(b) and a.dtype == b.dtype
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert type(a) is type(b) and a == b


FIXED_DTYPES = [
    "|b1",
    "|i1",
    "<i2",
    ">i4",
    "<i8",
    "|u1",
    ">u2",
    "<u4",
    "<u8",
    "<f2",
    "<f4",
    ">f8",
    "<c8",
    ">c16",
    "<M8[ns]",
    "<M8[D]",
    ">m8[s]",
    "|S5",
    "<U3",
    ">U2",
    "|V3",
]


@pytest.mark.parametrize("dtype", FIXED_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3), (1, 0, 4), (2, 1, 2, 2)])
def test_msgpack_numpy_arrays_exact(dtype, shape):
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    raw = rng.integers(0, 256, size=int(np.prod(shape, dtype=np.int64)) * dt.itemsize)
    arr = np.frombuffer(raw.astype(np.uint8).tobytes(), dtype=dt).reshape(shape)
    out = MSGPACK.decode(MSGPACK.encode({"x": arr}))["x"]
    assert_same(arr, out)


def test_msgpack_structured_non_contiguous_and_scalars():
    st_dt = np.dtype([("a", "<i4"), ("b", "|S3", (2,)), ("c", [("d", ">f8")])], align=True)
    s = np.zeros(3, st_dt)
    s["a"] = [1, 2, 3]
    s["b"] = [[b"x", b"yy"], [b"", b"zzz"], [b"q", b"r"]]
    s["c"]["d"] = [0.5, -1.5, np.inf]
    fortran = np.asfortranarray(np.arange(12, dtype="<i8").reshape(3, 4))
    strided = np.arange(20, dtype=np.float32)[::3]
    obj = {
        "structured": s,
        "fortran": fortran,
        "strided": strided,
        "scalars": [np.float32(1.25), np.int64(-3), np.bool_(False), np.datetime64("2020-02-03")],
        "zero_d": np.array(7, dtype=">u2"),
        "complex": 1.5 - 2j,
        "nested": {"k": [1, "two", None, True, 3.0, b"bytes"], 5: "int key"},
    }
    out = MSGPACK.decode(MSGPACK.encode(obj))
    assert out["structured"].dtype == st_dt and out["structured"].tobytes() == s.tobytes()
    np.testing.assert_array_equal(out["fortran"], fortran)
    np.testing.assert_array_equal(out["strided"], strided)
    assert_same(obj["scalars"], out["scalars"])
    assert_same(obj["zero_d"], out["zero_d"])
    assert out["complex"] == 1.5 - 2j
    assert out["nested"] == obj["nested"]


numpy_arrays = hnp.arrays(
    dtype=st.one_of(
        hnp.boolean_dtypes(),
        hnp.integer_dtypes(endianness="="),
        hnp.unsigned_integer_dtypes(endianness=">"),
        hnp.floating_dtypes(),
        hnp.complex_number_dtypes(),
        hnp.datetime64_dtypes(),
        hnp.timedelta64_dtypes(),
        hnp.byte_string_dtypes(),
        hnp.unicode_string_dtypes(),
    ),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.binary(max_size=20),
    numpy_arrays,
)
objects = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects)
def test_msgpack_round_trip_hypothesis(obj):
    assert_same(obj, MSGPACK.decode(MSGPACK.encode(obj)))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_raw_round_trip(data):
    raw = S.get("raw")
    assert raw.decode(raw.encode(data)) == data
    assert raw.decode(raw.encode(bytearray(data))) == data
    assert raw.decode(raw.encode(memoryview(data))) == data


def test_json_and_pickle_round_trip():
    obj = {"a": [1, 2.5, "x", None, True], "b": {"c": "é"}}
    assert S.get("json").decode(S.get("json").encode(obj)) == obj
    pk = S.get("pickle")
    value = {"set": {1, 2}, "tuple": (1, 2), "arr": np.arange(3)}
    out = pk.decode(pk.encode(value))
    assert out["set"] == {1, 2} and out["tuple"] == (1, 2)
    np.testing.assert_array_equal(out["arr"], np.arange(3))


@pytest.mark.parametrize(
    "name, bad",
    [
        ("raw", "a string"),
        ("raw", {"a": 1}),
        ("msgpack", {"a": object()}),
        ("msgpack", {1, 2}),
        ("msgpack", 2**64),
        ("msgpack", np.array([None, 1], dtype=object)),
        ("json", b"bytes"),
        ("json", np.arange(2)),
        ("pickle", lambda x: x),
    ],
)
def test_unencodable_is_type_error(name, bad):
    with pytest.raises(TypeError):
        S.get(name).encode(bad)


def test_auto_choice():
    assert S.choose_auto([b"a", bytearray(b"b"), memoryview(b"c")]).name == "raw"
    assert S.choose_auto([b"a", "b"]).name == "msgpack"
    assert S.choose_auto([np.arange(2)]).name == "msgpack"
    assert S.resolve_for_write("auto") is None
    with pytest.raises(TypeError, match="serializer must be"):
        S.resolve_for_write(42)
    with pytest.raises(KeyError, match="unknown serializer 'nope'"):
        S.resolve_for_write("nope")


def test_registry_and_user_pairs():
    ser = S.register(
        "test-rev", lambda s: s[::-1].encode(), lambda b: b.decode()[::-1], overwrite=True
    )
    assert S.get("test-rev") is ser
    assert "test-rev" in S.registered()
    with pytest.raises(ValueError, match="already registered"):
        S.register("test-rev", str.encode, bytes.decode)
    for reserved in ("raw", "msgpack", "json", "pickle", "auto", "custom"):
        with pytest.raises(ValueError, match="reserved"):
            S.register(reserved, str.encode, bytes.decode)
    assert S.resolve_for_read("test-rev").decode(ser.encode("abc")) == "abc"
    pair = (str.encode, bytes.decode)
    custom = S.resolve_for_write(pair)
    assert custom.name == "custom"
    with pytest.raises(ValueError, match="not registered in this process"):
        S.resolve_for_read("custom", where="ds")
    assert S.resolve_for_read("custom", override=pair).decode(b"x") == "x"
    with pytest.raises(ValueError, match="pass its decoder"):
        S.resolve_for_read("custom", override="pickle")


def test_pickle_gate():
    with pytest.raises(ValueError, match="allow_pickle=True"):
        S.resolve_for_read("pickle", where="x")
    assert S.resolve_for_read("pickle", allow_pickle=True).name == "pickle"
    # allow_pickle never turns another dataset into a pickle one
    assert S.resolve_for_read("msgpack", allow_pickle=True).name == "msgpack"
    with pytest.raises(ValueError, match="cannot be read with 'pickle'"):
        S.resolve_for_read("msgpack", override="pickle", allow_pickle=True)
    with pytest.raises(ValueError, match="cannot be read with 'json'"):
        S.resolve_for_read("msgpack", override="json")


def test_msgpack_rejects_damaged_array_payload():
    import msgpack

    bad = msgpack.ExtType(S.EXT_NDARRAY, msgpack.packb(["'<i4'", [3], b"\0" * 8]))
    with pytest.raises(ValueError, match="expected 12"):
        MSGPACK.decode(msgpack.packb(bad))


@pytest.mark.parametrize("shape", [(3,), (3, 100), (200, 100), ()])
def test_msgpack_array_payload_is_the_documented_layout(shape):
    """docs/spec: ext type 1 holds msgpack [repr(descr), shape, C-order bytes]."""
    import msgpack

    a = np.arange(int(np.prod(shape)), dtype="<i4").reshape(shape)
    ext = msgpack.unpackb(MSGPACK.encode(a))
    assert isinstance(ext, msgpack.ExtType) and ext.code == S.EXT_NDARRAY
    assert msgpack.unpackb(ext.data) == ["'<i4'", list(shape), a.tobytes()]

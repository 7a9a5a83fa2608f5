"""Looking after a dataset: :func:`describe` (``arrayds info``), :func:`verify`
(``arrayds verify``) and :func:`collect_garbage` (``arrayds gc``), the public names of
the modules of :mod:`arrayds.tools` where they live and are documented
(:mod:`arrayds.tools.describe`, :mod:`arrayds.tools.verify`, :mod:`arrayds.tools.gc`).

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-verify-mod", mode="w", shape=(6,), dtype="i2",
...                        chunks=2)
>>> a[:] = np.arange(6)
>>> report = verify("memory://doc-verify-mod")
>>> report.ok, report.shards, report.records
(True, 1, 3)
>>> describe("memory://doc-verify-mod")["nodes"][0]["grid"]
[3]
"""

from .tools.describe import describe, format_bytes
from .tools.gc import GcReport, collect_garbage
from .tools.verify import Problem, VerifyReport, verify

__all__ = [
    "GcReport",
    "Problem",
    "VerifyReport",
    "collect_garbage",
    "describe",
    "format_bytes",
    "verify",
]

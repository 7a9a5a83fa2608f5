"""Test suites that every implementation of a contract inherits (not collected by
themselves: their classes have no ``Test`` prefix).

:mod:`conformance.objectstore`: :class:`~conformance.objectstore.ObjectStoreConformance`,
the behaviour every object store (S3, GCS, ...) must show.
:mod:`conformance.store`: :class:`~conformance.store.StoreTests`, the behaviour every
storage implementation (:class:`arrayds.abc.store.Store`) must show.
"""

import pytest

# failing asserts in the suites report their operands, as in test modules
pytest.register_assert_rewrite("conformance.objectstore", "conformance.store")

"""Contracts of arrayds's layers (``typing.Protocol`` classes), apart from their
implementations: :mod:`arrayds.abc.store` is what the dataset layer needs of storage.

>>> from arrayds.abc.store import Store
>>> Store.__name__
'Store'
"""

"""The model's arrays as the server reads and writes them: a Flower ``Array`` viewed in place
(no copy of its bytes), an array made a Flower ``Array`` with one copy of its bytes, and a step
cast back to the array's dtype."""

from __future__ import annotations

import functools
import io
import math

import numpy as np
import numpy.lib.format as npy_format
from flwr.app import Array
from flwr.common.constant import SType

__all__ = ["array_of", "array_view", "cast_like"]


def array_view(array: Array) -> np.ndarray:
    """A read-only NumPy view of a Flower ``Array``'s bytes, without the copy that
    ``Array.numpy()`` (``np.load``) makes: the ``.npy`` header is parsed (once per distinct
    header: a model's replies repeat the same few) and the data viewed in place. Other
    serialisations, and object arrays, go through ``Array.numpy()`` (which refuses pickles)."""
    if array.stype != SType.NUMPY:
        return array.numpy()
    data = array.data
    end = _npy_header_end(bytes(data[:_LENGTH_END]))
    head = None if end is None else _npy_header(bytes(data[:end]))
    if head is None:
        return array.numpy()
    shape, fortran, dtype = head
    flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=end)
    return flat.reshape(shape, order="F" if fortran else "C")


def array_of(x: np.ndarray) -> Array:
    """``Array(x)``: the bytes ``np.save`` writes (Flower's serialisation, byte for byte),
    formed with one copy of the data where Flower's goes through a buffer in chunks and copies
    it out again. Arrays that are not C-contiguous, or whose dtype is not a number or a bool,
    go through ``Array(x)`` itself."""
    if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and x.dtype.kind in "biufc"):
        return Array(x)
    head = io.BytesIO()
    try:
        npy_format.write_array_header_1_0(head, npy_format.header_data_from_array_1_0(x))
    except ValueError:  # a header past version 1's 65535 bytes: np.save's version 2
        return Array(x)
    data = b"".join((head.getvalue(), x.reshape(-1).view(np.uint8)))
    return Array(dtype=str(x.dtype), shape=tuple(x.shape), stype=SType.NUMPY, data=data)


#: A ``.npy`` file's magic string (6 bytes) and version (2), then the header's length: 2 bytes
#: little-endian in version 1, 4 in version 2.
_LENGTH_END = 12


def _npy_header_end(start: bytes) -> int | None:
    """Where the ``.npy`` header that ``start`` opens ends (the data's offset); None where
    ``start`` is no ``.npy`` of version 1 or 2."""
    if len(start) < 10 or start[:6] != npy_format.MAGIC_PREFIX or start[7] != 0:
        return None
    if start[6] == 1:
        return 10 + int.from_bytes(start[8:10], "little")
    if start[6] == 2 and len(start) >= 12:
        return 12 + int.from_bytes(start[8:12], "little")
    return None


@functools.lru_cache(maxsize=4096)
def _npy_header(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype] | None:
    """(shape, Fortran order, dtype) of a whole ``.npy`` header (magic to padding); None where
    it holds objects. Cached: the replies of a round repeat the model's few headers, and
    NumPy parses each with ``ast.literal_eval``."""
    head = io.BytesIO(header)
    version = npy_format.read_magic(head)
    read = npy_format.read_array_header_1_0 if version == (1, 0) else \
        npy_format.read_array_header_2_0
    shape, fortran, dtype = read(head)
    return None if dtype.hasobject else (shape, fortran, dtype)


def cast_like(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A step computed in float64 back to the model's dtype (integers rounded, e.g. a batch
    normalisation's step counter)."""
    return (np.rint(x) if dtype.kind in "iub" else x).astype(dtype)

"""The model's arrays as the server reads and writes them: a Flower ``Array`` viewed in place
(no copy of its bytes) and a step cast back to the array's dtype."""

from __future__ import annotations

import io
import math

import numpy as np
import numpy.lib.format as npy_format
from flwr.app import Array
from flwr.common.constant import SType

__all__ = ["array_view", "cast_like"]


def array_view(array: Array) -> np.ndarray:
    """A read-only NumPy view of a Flower ``Array``'s bytes, without the copy that
    ``Array.numpy()`` (``np.load``) makes: the ``.npy`` header is parsed and the data viewed in
    place. Other serialisations, and object arrays, go through ``Array.numpy()`` (which refuses
    pickles)."""
    if array.stype != SType.NUMPY:
        return array.numpy()
    data = array.data
    head = io.BytesIO(data)
    version = npy_format.read_magic(head)
    if version not in ((1, 0), (2, 0)):
        return array.numpy()
    read = npy_format.read_array_header_1_0 if version == (1, 0) else \
        npy_format.read_array_header_2_0
    shape, fortran, dtype = read(head)
    if dtype.hasobject:
        return array.numpy()
    count = math.prod(shape)
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=head.tell())
    return flat.reshape(shape, order="F" if fortran else "C")


def cast_like(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A step computed in float64 back to the model's dtype (integers rounded, e.g. a batch
    normalisation's step counter)."""
    return (np.rint(x) if dtype.kind in "iub" else x).astype(dtype)

"""Shared by the pytest files, which every rank runs at once under synkrun (ctest starts them).

Every test makes the same collectives in the same order on every rank. A failure on one rank
leaves the others in their next collective, which SYNK_TIMEOUT (set by ctest) ends.
"""
import numpy as np
import pytest

import synk


@pytest.fixture(scope="session")
def comm():
    c = synk.Communicator()
    yield c
    c.barrier()


# Every dtype synk takes from NumPy, and the values each rank puts in: small integers, so that
# sums and products over 3 ranks stay exact in every type, float16 included.
DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


def rank_values(rank, count, dtype):
    """Rank r's input: (r + 1 + i % 3) at position i, exact in every dtype."""
    return np.array([(rank + 1 + i % 3) for i in range(count)], dtype=dtype)


def selection(batch, n):
    """The rows a batch of a Data picks (None, an int n: the first n, a slice, indices), as
    NumPy picks them."""
    if batch is None:
        return np.arange(n)
    if isinstance(batch, int):
        return np.arange(batch)
    return np.arange(n)[batch]

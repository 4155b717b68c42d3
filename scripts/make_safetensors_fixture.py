#!/usr/bin/env python3
"""Writes tests/data/independent.safetensors with the official `safetensors` package, so that
tests/test_checkpoint.c can check our loader against a writer we did not write.

    pip install safetensors numpy
    python3 scripts/make_safetensors_fixture.py [output path]

Every value follows a closed form that the test recomputes (k = 0, 1, ... in row-major order):
    a_f32    F32  [3,4]  k * 0.5
    b_i64    I64  [5]    k - 2
    c_bf16   BF16 [2,4]  k / 4 - 1        (exact in bf16)
    d_f16    F16  [3,2]  (k - 3) * 0.125  (exact in f16)
    e_u8     U8   [10]   (7 * k) % 256
    f_f64    F64  [2,2]  1 / (k + 1)
    g_i32    I32  [2,3]  k * k - 10
    h_scalar F32  []     3.25
    i_empty  F32  [0,3]  (no data)
metadata: {"format": "pt", "source": "make_safetensors_fixture.py"}
"""
import os
import sys

import numpy as np
from safetensors import TensorSpec, serialize_file

METADATA = {"format": "pt", "source": "make_safetensors_fixture.py"}


def arrays():
    k = np.arange
    return {
        "a_f32": (k(12, dtype=np.float32) * 0.5).reshape(3, 4),
        "b_i64": k(5, dtype=np.int64) - 2,
        "d_f16": ((k(6) - 3) * 0.125).astype(np.float16).reshape(3, 2),
        "e_u8": ((7 * k(10)) % 256).astype(np.uint8),
        "f_f64": (1.0 / (k(4, dtype=np.float64) + 1)).reshape(2, 2),
        "g_i32": (k(6, dtype=np.int32) ** 2 - 10).reshape(2, 3),
        "h_scalar": np.array(3.25, dtype=np.float32),
        "i_empty": np.zeros((0, 3), dtype=np.float32),
    }


def bf16_bits():
    """numpy has no bfloat16: the values are exact in bf16, so the top 16 bits of each float32 are
    the bf16 encoding."""
    values = (np.arange(8, dtype=np.float32) / 4 - 1).reshape(2, 4)
    return (values.view(np.uint32) >> 16).astype(np.uint16)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "independent.safetensors")
    tensors = arrays()
    bf16 = np.ascontiguousarray(bf16_bits())
    specs = {
        name: TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
        for name, a in tensors.items()
    }
    specs["c_bf16"] = TensorSpec(dtype="bfloat16", shape=bf16.shape, data_ptr=bf16.ctypes.data,
                                 data_len=bf16.nbytes)
    serialize_file(specs, out, metadata=METADATA)
    print(f"wrote {os.path.normpath(out)} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()

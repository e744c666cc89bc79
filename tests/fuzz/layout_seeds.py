#!/usr/bin/env python3
"""Writes fuzz_layout's seed inputs into the directory given: the layouts
the DLPack checks must get right, in fuzz_layout.c's input format."""
import os
import struct
import sys

STRIDES, OWN_SHAPE, CUDA = 1, 2, 4
NULL, ARENA, LOW, TOP = 0, 1, 2, 3


def tensor(where=ARENA, offset=0, byte_offset=0, strides=None, shape=None, cuda=False):
    flags = (STRIDES if strides is not None else 0) | (OWN_SHAPE if shape else 0) | (
        CUDA if cuda else 0)
    out = struct.pack("<BBHQ", flags, where, offset, byte_offset % 2**64)
    for values in (shape, strides):
        if values is not None:
            out += struct.pack(f"<{len(values)}q", *values)
    return out


def seed(kind, shape, tensors, dtype=0):
    return struct.pack(f"<BbB{len(shape)}q", kind, len(shape), dtype, *shape) + b"".join(tensors)


SEEDS = {
    "aliasing-in-place": seed(0, [600, 2], [tensor(strides=[4, 4])] * 2),
    "aliasing-output": seed(1, [600, 2], [tensor(offset=8192), tensor(offset=8192),
                                          tensor(strides=[4, 4])]),
    "column-to-next-column": seed(0, [300], [tensor(strides=[2]), tensor(offset=4, strides=[2])]),
    "evens-to-odds": seed(0, [1000], [tensor(strides=[2]), tensor(offset=4, strides=[2])]),
    "reversed-evens": seed(0, [1000], [tensor(offset=7996, strides=[-2]),
                                       tensor(offset=4, strides=[2])]),
    "column-blocks": seed(0, [30, 5], [tensor(offset=20, strides=[10, 1]),
                                       tensor(strides=[10, 1])]),
    "transpose-in-place": seed(0, [16, 16], [tensor(strides=[16, 1]), tensor(strides=[1, 16])]),
    "null-with-offset": seed(0, [8], [tensor(where=NULL, byte_offset=64), tensor()]),
    "offset-past-end": seed(0, [8], [tensor(byte_offset=-16), tensor(offset=64)]),
    "stride-2^62": seed(0, [2], [tensor(strides=[2**62]), tensor(offset=64)]),
    "stride-min": seed(2, [2], [tensor(), tensor(offset=64), tensor(offset=128,
                                                                    strides=[-2**63])]),
    "negative-size": seed(0, [3, -1], [tensor(), tensor(offset=64)]),
    "huge-size": seed(0, [2**63 - 1], [tensor(strides=[1]), tensor(strides=[1])]),
    "empty-huge": seed(0, [0, 2**63 - 1], [tensor(where=NULL), tensor(where=NULL)]),
    "shapes-differ": seed(0, [3, 4], [tensor(), tensor(offset=64, shape=[3, 5])]),
    "near-top": seed(0, [64], [tensor(where=TOP), tensor()]),
    "below-zero": seed(0, [8], [tensor(where=LOW, strides=[-2000]), tensor()]),
    "half-misaligned": seed(1, [100], [tensor(offset=1), tensor(offset=301),
                                       tensor(offset=600)], dtype=2),
    "f64-broadcast": seed(1, [10, 10], [tensor(strides=[0, 1]), tensor(offset=128, strides=[1, 0]),
                                        tensor(offset=1024)], dtype=1),
    "cuda-tensor": seed(0, [8], [tensor(cuda=True), tensor(offset=64)]),
}

os.makedirs(sys.argv[1], exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(data)

#!/usr/bin/env python3
"""make_corpus.py: writes the seed corpora in corpus/<target>/ (run once; the files are checked in).
Real requests from docs/API.md, .npy files written by NumPy (each dtype, versions 1.0 to 3.0,
0 to 2 dimensions), tokens files. Leaves crash-* files (regression inputs) alone."""
import io
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(arr, version=(1, 0)):
    f = io.BytesIO()
    np.lib.format.write_array(f, arr, version=version, allow_pickle=False)
    return f.getvalue()


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# fuzz_job_json: the fake lookup reads a dataset from its id's hex digits (fuzz_job_json.c):
# d_0220000100002000 is float32 2 x 3, d_0320000100002000 float64 2 x 3, d_0320000200000000
# float64 3 x 1, d_0320000100000000 float64 2 x 1, d_032fffff00000000 float64 2^31 x 1,
# d_03200000fffff000 float64 1 x 2^31, d_f... is missing.
jobs = {
    "sum_f32": {"op": "sum", "dtype": "float32", "data": [1.5, 2.5, 3]},
    "argmax_rows_ties": {"op": "argmax", "dtype": "int32", "data": [[1, 7, 7], [4, 2, 0]], "axis": 1, "ties": "last"},
    "mean_i64": {"op": "mean", "dtype": "int64", "data": [1, 2, 3, 4]},
    "keepdims_axes": {"op": "min", "dtype": "int32", "data": [[1, 7], [4, 2]], "axis": [-1], "keepdims": True},
    "shape_view": {"op": "min", "dtype": "float64", "data": [1, 2, 3, 4, 5, 6], "shape": [2, 3], "axis": 0,
                   "algorithm": "cpu_seq", "device": "cpu"},
    "prod_big_ints": {"op": "prod", "dtype": "int64", "data": [9223372036854775807, -9223372036854775808, 1e18]},
    "dataset_cols": {"op": "max", "dataset": "d_0220000100002000", "axis": 0},
    "dataset_view": {"op": "sum", "dataset": "d_0220000100002000", "dtype": "float32", "shape": [6]},
    "dataset_missing": {"op": "sum", "dataset": "d_f000000000000000"},
    "matmul_inline": {"op": "matmul", "dtype": "float32", "a": {"data": [[1, 2], [3, 4]]}, "b": {"data": [[5], [6]]}},
    "matmul_c": {"op": "matmul", "dtype": "float64", "a": {"data": [[1, 2, 3]]}, "b": {"data": [[1], [2], [3]]},
                 "c": {"data": [[1]]}, "alpha": 2, "beta": 0.5, "algorithm": "cpu_tiled", "device": "cpu"},
    "matmul_datasets": {"op": "matmul", "a": {"dataset": "d_0320000100002000"},
                        "b": {"dataset": "d_0320000200000000"}},
    "matmul_mixed": {"op": "matmul", "dtype": "float64", "a": {"dataset": "d_0320000100002000"},
                     "b": {"data": [[1], [2], [3]]}, "c": {"dataset": "d_0320000100000000"}, "beta": 1},
    "bench_sum": {"op": "sum", "dtype": "float32", "n": 16777216, "algorithms": ["all"], "repeats": 20,
                  "device": "gpu"},
    "bench_matmul": {"op": "matmul", "dtype": "float32", "n": 512, "algorithms": ["cpu_naive", "cpu_tiled"],
                     "repeats": 3, "device": "cpu"},
    "ragged": {"op": "sum", "dtype": "int32", "data": [[1, 2], [3]]},
    "shape_vs_nesting": {"op": "sum", "dtype": "int32", "data": [[1, 2], [3, 4]], "shape": [4]},
    "nd_axes": {"op": "mean", "dtype": "float32", "data": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]], "axis": [0, -1],
                "keepdims": True},
    "nd_ragged": {"op": "sum", "dtype": "int32", "data": [[[1, 2], [3, 4]], [[5, 6], [7]]]},
    "nd_view": {"op": "count_nonzero", "dtype": "int64", "data": [0, 1, 2, 3, 4, 5, 6, 7], "shape": [2, 1, 2, 2],
                "axis": [1, 3]},
    "nd_nine": {"op": "sum", "dtype": "int32", "data": [[[[[[[[[1]]]]]]]]]},
    "var_ddof": {"op": "var", "dtype": "float64", "data": [[1, 2], [3, 5]], "axis": 0, "ddof": 1},
    "std_ddof_sum": {"op": "sum", "dtype": "float64", "data": [1, 2], "ddof": 1},
    "nanvar_acc64": {"op": "nanvar", "dtype": "float32", "data": [[1, 2], [3, 5]], "axis": 1, "accumulate": "float64"},
    "sum_int_acc64": {"op": "sum", "dtype": "int32", "data": [1, 2], "accumulate": "float64"},
    "matmul_too_large": {"op": "matmul", "a": {"dataset": "d_032fffff00000000"},
                         "b": {"dataset": "d_03200000fffff000"}},
}
for name, body in jobs.items():
    put("fuzz_job_json", name + ".json", json.dumps(body))
# batches: items found in the text (strings with brackets and escapes in them), one of each kind
put("fuzz_job_json", "batch_mixed.json", json.dumps([jobs["sum_f32"], jobs["dataset_cols"], jobs["matmul_inline"],
                                                     dict(jobs["mean_i64"], algorithm="cpu_seq"),
                                                     {"op": "sum", "data": [1], "device": "[{\"}]"}]))
put("fuzz_job_json", "batch_rows.json", "[" + ",\n".join(json.dumps({"op": "max", "dtype": "int32", "data": [k, 1]})
                                                         for k in range(6)) + "]")

# fuzz_binary_job: a byte (1: .npy body), the query, '\n', the body
f32x6 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
binary = {
    "raw_sum": (0, "op=sum&dtype=float32", f32x6),
    "raw_shape_axis": (0, "op=max&dtype=int32&shape=2,3&axis=0", struct.pack("<6i", 3, -1, 4, 1, -5, 9)),
    "raw_argmin": (0, "op=argmin&dtype=float64&ties=last&algorithm=auto&device=cpu", struct.pack("<4d", 2, 1, 1, 3)),
    "raw_view_1d": (0, "op=mean&dtype=int64&shape=3&axis=null", struct.pack("<3q", 1, 2, 3)),
    "npy_sum": (1, "op=sum", npy(np.arange(6, dtype="<f4").reshape(2, 3))),
    "npy_rows_v2": (1, "op=mean&axis=1", npy(np.arange(6, dtype="<i8").reshape(3, 2), (2, 0))),
    "npy_argmax_v3": (1, "op=argmax&dtype=float64", npy(np.array([1.0, 5.0, 2.0], dtype="<f8"), (3, 0))),
    "npy_scalar": (1, "op=sum&axis=", npy(np.array(7, dtype="<i4"))),
    "raw_std_ddof": (0, "op=std&dtype=float32&shape=2,3&axis=1&ddof=2", f32x6),
    "raw_mean_acc64": (0, "op=mean&dtype=float32&shape=3,2&axis=0&accumulate=float64", f32x6),
    "raw_4d_axes": (0, "op=nansum&dtype=float32&shape=1,2,3,1&axis=1,-2&keepdims=true", f32x6),
    "npy_3d_argmax": (1, "op=argmax&axis=-1", npy(np.arange(12, dtype="<f8").reshape(2, 3, 2))),
}
for name, (flag, query, body) in binary.items():
    put("fuzz_binary_job", name, bytes([flag]) + query.encode() + b"\n" + body)

# fuzz_npy: each dtype and version, 0 to 8 dimensions; refused kinds too
arrays = {
    "i4_2d": np.arange(6, dtype="<i4").reshape(2, 3),
    "i8_1d": np.arange(4, dtype="<i8"),
    "f4_0d": np.array(1.5, dtype="<f4"),
    "f8_2d": np.arange(4, dtype="<f8").reshape(4, 1),
    "empty": np.zeros((0, 3), dtype="<f4"),
    "f4_4d": np.arange(24, dtype="<f4").reshape(2, 1, 3, 4),
    "i4_8d": np.arange(16, dtype="<i4").reshape(2, 1, 2, 1, 2, 1, 2, 1),
}
for name, arr in arrays.items():
    for v in (1, 2, 3):
        put("fuzz_npy", f"{name}_v{v}.npy", npy(arr, (v, 0)))
put("fuzz_npy", "big_endian.npy", npy(np.arange(3, dtype=">f4")))
put("fuzz_npy", "fortran.npy", npy(np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3))))
put("fuzz_npy", "u1_3d.npy", npy(np.zeros((2, 2, 2), dtype="u1")))
py2 = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3L), }".ljust(117) + b"\n"
put("fuzz_npy", "py2_long.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(py2)) + py2 + bytes(48))

# fuzz_tokens: tokens files, and Authorization headers (fuzz_tokens.c loads the tokens of docs/API.md)
put("fuzz_tokens", "docs", "# TENANT  TOKEN                              [admin]\n"
    "alice     0b9f8c1e7d2a4b6c9e0f1a2b3c4d5e6f\nbob       5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b\n"
    "ops       d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9   admin\n")
put("fuzz_tokens", "crlf_tabs", "# comment\n\n  # indented\r\nalice 0123456789abcdef0123456789abcdef\r\n"
    "ops\tZz-9_+/=.~!@#$%^&*()[]{}<>?|:;,x  admin\n")
put("fuzz_tokens", "duplicate", "alice 0123456789abcdef0123456789abcdef\nbob 0123456789abcdef0123456789abcdef\n")
put("fuzz_tokens", "bad_admin", "alice 0123456789abcdef0123456789abcdef root\n")
put("fuzz_tokens", "no_newline", "a-b_c 0123456789abcdef")
put("fuzz_tokens", "header_alice", "Bearer 0b9f8c1e7d2a4b6c9e0f1a2b3c4d5e6f")
put("fuzz_tokens", "header_ops_spaces", "  bearer   d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9  ")

# fuzz_headers: Prefer headers and whole numbers (?limit=, ?wait=)
for name, text in {"prefer_wait": "wait=5", "prefer_list": "respond-async, wait=10",
                   "prefer_params": "handling=lenient; wait=100", "prefer_empty": "wait=",
                   "prefer_huge": "return=minimal,wait=99999999999999999999", "await": "await=3, wait=2",
                   "zero": "0", "limit": "4096", "int64_max": "9223372036854775807",
                   "over_int64": "18446744073709551616", "negative": "-1", "trailing": "12a"}.items():
    put("fuzz_headers", name, text)
# and request heads for framing (the whole input, line by line)
for name, text in {"two_lengths": "Host: x\nContent-Length: 5\ncontent-length: 6\n",
                   "same_lengths": "Content-Length: 5\nContent-Length: 5\n",
                   "length_and_chunked": "Content-Length: 5\nTransfer-Encoding: chunked\n",
                   "chunked": "transfer-encoding: chunked\nHost: x\n"}.items():
    put("fuzz_headers", name, text)

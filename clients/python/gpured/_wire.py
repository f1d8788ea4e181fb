# _wire.py: NumPy arrays on the wire: request bodies streamed with progress, .npy framing both ways.
from __future__ import annotations

import io
import os
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol, Union

import numpy as np
import numpy.lib.format as npy_format

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes in all) as a body is sent or an answer read."""

CHUNK = 1 << 20  # bytes per piece sent or read; the unit of progress reports


class Readable(Protocol):
    """A binary stream (a file, an HTTP answer's raw body)."""

    def read(self, n: int = -1) -> bytes: ...

    def readinto(self, b: Any) -> Optional[int]: ...


TAKEN = ("int32", "int64", "float32", "float64")
"""The dtypes gpured stores and reduces."""
UPCAST = {"bool": "int32", "int8": "int32", "uint8": "int32", "int16": "int32", "uint16": "int32",
          "uint32": "int64", "float16": "float32"}
"""The dtypes sent as a wider one, every value exact: small integers and bools as int32 (sums
accumulate in int64 on the service, as NumPy's do), uint32 as int64, float16 as float32."""


def as_array(x: Any, dtype: Optional[str] = None) -> np.ndarray:
    """x as a C-ordered, little-endian array (of dtype, when given) of a dtype gpured takes
    (UPCAST widens the smaller ones); TypeError for others (uint64, complex, text)."""
    arr = np.asarray(x, dtype=dtype)
    name = arr.dtype.name
    if name in UPCAST:
        arr = arr.astype(UPCAST[name])
    elif name not in TAKEN:
        hint = " (convert with .astype(np.int64) if every value fits)" if name == "uint64" else ""
        raise TypeError("gpured takes %s values (and %s, widened); not %s%s" %
                        (", ".join(TAKEN), ", ".join(UPCAST), name, hint))
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    # not np.ascontiguousarray: it makes a 0-D array 1-D, and a 0-D upload keeps shape []
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def raw_bytes(arr: np.ndarray) -> memoryview:
    """The values of a C-ordered array as one flat byte view (no copy)."""
    return arr.reshape(-1).view(np.uint8).data


def npy_header(arr: np.ndarray) -> bytes:
    """The .npy (version 1.0) header numpy.save would write before arr's values."""
    out = io.BytesIO()
    npy_format.write_array_header_1_0(out, npy_format.header_data_from_array_1_0(arr))
    return out.getvalue()


class Body:
    """A request body sent piece by piece (so a large one is never copied whole), with a known
    length (so it goes with Content-Length) and re-readable (so a retry sends it again).

    ``open`` returns a fresh iterator of byte pieces each time; ``progress`` is told of each."""

    def __init__(self, open: Callable[[], Iterator[Any]], total: int,
                 progress: Optional[Progress] = None) -> None:
        self._open, self.total, self._progress = open, total, progress

    @classmethod
    def of_array(cls, arr: np.ndarray, npy: bool, progress: Optional[Progress] = None) -> "Body":
        """arr's values, raw or as a .npy file."""
        parts = ([memoryview(npy_header(arr))] if npy else []) + [raw_bytes(arr)]

        def pieces() -> Iterator[memoryview]:
            for part in parts:
                for i in range(0, len(part), CHUNK):
                    yield part[i:i + CHUNK]
        return cls(pieces, sum(len(p) for p in parts), progress)

    @classmethod
    def of_file(cls, path: Union[str, "os.PathLike[str]"], progress: Optional[Progress] = None) -> "Body":
        """A file's bytes as they are."""
        def pieces() -> Iterator[bytes]:
            with open(path, "rb") as f:
                yield from iter(lambda: f.read(CHUNK), b"")
        return cls(pieces, os.path.getsize(path), progress)

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[Any]:
        done = 0
        for piece in self._open():
            yield piece
            done += len(piece)
            if self._progress:
                self._progress(done, self.total)


def read_exactly(src: Readable, view: memoryview, done: int, total: int,
                 progress: Optional[Progress]) -> int:
    """Fill view from src piece by piece; returns the bytes counted (done + len(view))."""
    pos = 0
    while pos < len(view):
        n = src.readinto(view[pos:pos + CHUNK])
        if not n:
            raise EOFError("the answer ended after %d of %d bytes" % (done + pos, total))
        pos += n
        if progress:
            progress(done + pos, total)
    return done + pos


def read_npy(src: Readable, total: int, progress: Optional[Progress] = None) -> np.ndarray:
    """The array of a .npy stream, read straight into its own memory (total: the stream's
    length, for progress reports; 0 when unknown)."""
    major, _ = npy_format.read_magic(src)
    read_header = npy_format.read_array_header_1_0 if major == 1 else npy_format.read_array_header_2_0
    shape, fortran, dtype = read_header(src)
    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    header_len = total - arr.nbytes if total else 0
    read_exactly(src, arr.reshape(-1, order="A").view(np.uint8).data, header_len, total, progress)
    return arr


def save(pieces: Iterable[bytes], file: Union[str, "os.PathLike[str]"], total: int,
         progress: Optional[Progress] = None) -> None:
    """Write an answer's pieces to file as they arrive (total: its length, 0 when unknown)."""
    done = 0
    with open(file, "wb") as out:
        for piece in pieces:
            out.write(piece)
            done += len(piece)
            if progress:
                progress(done, total)
    if total and done != total:
        raise EOFError("the answer ended after %d of %d bytes" % (done, total))

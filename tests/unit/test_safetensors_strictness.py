"""Our safetensors reader accepts exactly the headers the safetensors library accepts, on the
cases that decide where tensor bytes are read from (a looser reader read garbage weights)."""

import json
import struct

import numpy as np
import pytest
from safetensors import SafetensorError, safe_open

from wanjax.adapters.checkpoints.safetensors_file import SafetensorsFile
from wanjax.domain.errors import CheckpointError

DATA = np.arange(4, dtype=np.float32).tobytes()  # 16 bytes


def _file(path, header, data=DATA, *, short_by_padding=False):
    """A safetensors file; `short_by_padding`: the header length declared without the header's
    padding spaces, so the JSON still parses and the data would start that many bytes early."""
    text = json.dumps(header).encode()
    padding = -len(text) % 8
    assert padding or not short_by_padding
    text += b" " * padding
    path.write_bytes(struct.pack("<Q", len(text) - (padding if short_by_padding else 0)) + text + data)
    return path


def _f32(shape, begin, end):
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


REJECTED = {
    "two tensors share bytes": ({"a": _f32([2], 0, 8), "b": _f32([2], 0, 8)}, {"data": DATA[:8]}),
    "bytes between tensors": ({"a": _f32([2], 0, 8), "b": _f32([1], 12, 16)}, {}),
    "bytes after the last tensor": ({"a": _f32([2], 0, 8)}, {}),
    "header length short by its padding": ({"a": _f32([3], 0, 12)}, {"data": DATA[:12], "short_by_padding": True}),
    "metadata not a map": ({"__metadata__": ["x"], "a": _f32([4], 0, 16)}, {}),
    "metadata value not a text": ({"__metadata__": {"x": 1}, "a": _f32([4], 0, 16)}, {}),
    "size not matching the shape": ({"a": _f32([3], 0, 16)}, {}),
}
ACCEPTED = {
    "plain": ({"a": _f32([2], 0, 8), "b": _f32([2], 8, 16)}, {}),
    "unaligned float offset": (
        {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": _f32([3], 4, 16)}, {}
    ),
    "zero-size tensor": ({"a": _f32([0], 0, 0), "b": _f32([4], 0, 16)}, {}),
    "no tensors": ({}, {"data": b""}),
}


@pytest.mark.parametrize("case", REJECTED)
def test_what_the_library_rejects_is_refused(tmp_path, case):
    header, options = REJECTED[case]
    path = _file(tmp_path / "w.safetensors", header, **options)
    with pytest.raises(SafetensorError), safe_open(path, "np"):
        pass
    with pytest.raises(CheckpointError, match=str(path)):
        SafetensorsFile(path)


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_library_accepts_is_read_as_it_reads_it(tmp_path, case):
    header, options = ACCEPTED[case]
    path = _file(tmp_path / "w.safetensors", header, **options)
    ours = SafetensorsFile(path)
    with safe_open(path, "np") as reference:
        assert sorted(ours.names) == sorted(reference.keys())
        for name in ours.names:
            np.testing.assert_array_equal(ours.tensor(name), reference.get_tensor(name))

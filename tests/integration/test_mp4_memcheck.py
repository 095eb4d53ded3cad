"""x264 reads no memory it never initialised when wanjax encodes (valgrind memcheck): such a read
makes the mp4 depend on what the process's heap or stack held, and the same frames would not
always give the same file (README "Determinism"). The clips are 16-pixel-macroblock widths where
x264 did so before `X264_OPTIONS` took cpu-independent=1: odd numbers of macroblocks (48 and 80)."""

import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ENCODE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    from wanjax.adapters.media.video_files import Mp4Sink
    rng = np.random.default_rng(1)
    for height, width in ((32, 48), (32, 80)):
        blocks = rng.integers(0, 256, (1, height // 8, width // 8, 3)).repeat(8, 1).repeat(8, 2)
        frames = np.clip(blocks + rng.normal(0, 20, (5, height, width, 3)).cumsum(0), 0, 255).astype(np.uint8)
        Mp4Sink().encode(frames, Path(sys.argv[1]) / f"{height}x{width}.mp4", fps=16)
""")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (scripts/setup installs it)")
def test_x264_reads_no_uninitialised_memory_at_odd_macroblock_widths(tmp_path):
    log = tmp_path / "memcheck.log"
    command = ["valgrind", "--tool=memcheck", "--error-limit=no", f"--log-file={log}", sys.executable, "-c", ENCODE,
               str(tmp_path)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    assert sorted(path.name for path in tmp_path.glob("*.mp4")) == ["32x48.mp4", "32x80.mp4"]
    errors = re.split(r"\n==\d+== \n", log.read_text())  # one record per blank valgrind line
    in_x264 = [record for record in errors if "libx264" in record and re.search(r"uninitialised|Invalid read", record)]
    assert in_x264 == [], in_x264[0]

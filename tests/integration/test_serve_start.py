"""`wanjax serve` refuses to start, in one line naming the problem and the fix (exit status 2),
before loading anything: an empty token, a network address without a token, a busy port, a job
store that is not PostgreSQL or cannot be reached, and an output folder whose job store is damaged."""

import socket

import pytest
from serving import free_port

from wanjax.entrypoints.cli import main


def _serve(tmp_path, *args):
    return main(["serve", "--port", str(free_port()), "--output-dir", str(tmp_path / "out"), *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--token", ""), "--token (or $WANJAX_TOKEN) is empty"), (("--token", "  "), "is empty"),
     (("--host", "0.0.0.0"), "--host 0.0.0.0 serves other machines, and there is no --token"),
     (("--token", "t", "--jobs", "mysql://db/jobs"), "--jobs 'mysql://db/jobs': give a PostgreSQL URL"),
     (("--token", "t", "--jobs", "postgresql://wanjax:pw@127.0.0.1:9/jobs?connect_timeout=2"),
      "the job store postgresql://wanjax@127.0.0.1:9/jobs cannot be used")],
)  # fmt: skip
def test_a_bad_token_address_or_job_store_is_refused_in_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.delenv("WANJAX_TOKEN", raising=False)
    assert _serve(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert "goes on" not in err  # a server that did not start does not go on


def test_a_busy_port_says_so(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--output-dir", str(tmp_path / "out"), "--token", "t"]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


def test_a_damaged_job_store_is_refused_naming_the_file_and_the_remedy(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "jobs.sqlite").write_bytes(b"overwritten by something else" * 200)
    assert _serve(tmp_path, "--token", "t") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{tmp_path / 'out' / 'jobs.sqlite'}" in err and "move it away" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--port", "70000"), "--port: 70000: give a number at least 1 and at most 65535"),
     (("--port", "-1"), "--port: -1"), (("--max-body-mb", "inf"), "--max-body-mb: 'inf' is not a finite number"),
     (("--lease-seconds", "inf"), "--lease-seconds: 'inf'"), (("--lease-seconds", "1e12"), "--lease-seconds 1e+12: give 1 to 86400"),
     (("--queue-size", "²"), "--queue-size: '²' is not a whole number")],
)  # fmt: skip
def test_a_flag_out_of_its_range_is_refused_in_one_line_before_the_output_folder_is_made(tmp_path, capsys, args, message):
    assert main(["serve", "--output-dir", str(tmp_path / "out"), "--token", "t", "--port", str(free_port()), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()

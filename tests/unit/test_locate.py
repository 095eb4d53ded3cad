"""--model resolution: folders as given, repo ids through the Hugging Face cache, offline."""

import pytest
from huggingface_hub import constants

from wanjax.adapters.checkpoints.locate import locate_checkpoint
from wanjax.domain.errors import CheckpointError

REPO = "Wan-AI/Wan2.1-T2V-1.3B-Diffusers"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_existing_folder_is_used_as_is(tmp_path):
    assert locate_checkpoint(str(tmp_path)) == tmp_path


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint folder not found: .*nope"):
        locate_checkpoint(str(tmp_path / "a" / "b" / "nope"))


def test_repo_id_resolves_to_its_cached_snapshot(hub_cache):
    repo = hub_cache / "models--Wan-AI--Wan2.1-T2V-1.3B-Diffusers"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "model_index.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    assert locate_checkpoint(REPO) == snapshot


def test_uncached_repo_id_offline_says_how_to_fix(hub_cache):
    with pytest.raises(CheckpointError, match=r"not in the Hugging Face cache.*HF_HUB_OFFLINE.*hf download"):
        locate_checkpoint(REPO)

"""The memory plan with `offload`: Wan 2.2 A14B at 1280x720x81 on a 24 GiB GPU refuses without
offload and names offload=layers; with it, it fits, device and host memory listed apart; too
little host memory is refused; `auto` picks the least offload that fits."""

import attrs
import pytest

from wanjax.domain.architectures import published_architecture
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.memory import GIB, Workload, block_weights, check_fits, plan_memory
from wanjax.domain.offload import covering, least_offload
from wanjax.domain.settings import DenoiserSettings
from wanjax.domain.sizes import parse_size

A14B = published_architecture("Wan-AI/Wan2.2-T2V-A14B-Diffusers")
A14B_720P81 = Workload(  # guided, bf16, cuDNN attention, 21 x 45 x 80 latent tokens
    transformer=A14B.transformer, num_experts=2, rows=2, tokens=21 * 45 * 80, text_tokens=512,
    weights_dtype="bfloat16", activations_dtype="bfloat16", attention="cudnn",
    vae=A14B.vae, vae_parameters=127_000_000, vae_dtype="bfloat16", latent_frames=21, pixels=720 * 1280,
)  # fmt: skip


def _plan(offload: str, host: int = 256 * GIB):
    return plan_memory(attrs.evolve(A14B_720P81, offload=offload), platform="gpu", available=24 * GIB, host_available=host)


def test_without_offload_it_is_refused_naming_offload_layers():
    with pytest.raises(InvalidRequestError, match="offload=layers"):
        check_fits(_plan("none"), A14B_720P81)


def test_with_layers_it_fits_and_the_blocks_are_counted_in_host_memory():
    plan = _plan("layers")
    work = attrs.evolve(A14B_720P81, offload="layers")
    check_fits(plan, work)
    assert plan.host == block_weights(work) > 50 * GIB  # both experts' blocks, bf16
    assert plan.peak < 24 * GIB < _plan("none").peak
    assert "host memory:" in plan.summary() and "offload=layers" in plan.summary()


def test_too_little_host_memory_is_refused_naming_it():
    plan = _plan("layers", host=32 * GIB)
    with pytest.raises(InvalidRequestError, match="of host memory"):
        check_fits(plan, attrs.evolve(A14B_720P81, offload="layers"))


def test_auto_picks_the_least_offload_that_fits():
    assert least_offload(_plan)[0] == "layers"
    small = lambda offload: plan_memory(  # noqa: E731
        attrs.evolve(A14B_720P81, offload=offload, tokens=1 * 4 * 4), platform="gpu", available=80 * GIB
    )
    assert least_offload(small)[0] == "none"


def test_layers_needs_the_scanned_block_stack():
    with pytest.raises(ConfigError, match="scan_layers=true"):
        DenoiserSettings(offload="layers", scan_layers=False)


@pytest.mark.parametrize(
    ("text", "size"), [("24GiB", 24 * GIB), ("80GB", 80 * 10**9), ("512 mib", 512 * 2**20), ("0.5GiB", GIB // 2), ("1", 1)]
)
def test_sizes_parse(text, size):
    assert parse_size(text, what="--device-memory") == size


@pytest.mark.parametrize(
    "text", ["24 parsecs", "-1GiB", "GiB", "0", "0.5", "0.5B", "²GiB", "٢٤GiB", "1" * 300, "9" * 40 + "TiB", "2TB" + " " * 100]
)
def test_bad_sizes_name_the_flag(text):
    with pytest.raises(ConfigError, match="--device-memory"):
        parse_size(text, what="--device-memory")


def test_a_vace_model_offloads_its_base_blocks_alone():
    vace = published_architecture("Wan-AI/Wan2.1-VACE-14B-diffusers").transformer
    base = published_architecture("Wan-AI/Wan2.1-T2V-14B-Diffusers").transformer
    work = attrs.evolve(A14B_720P81, transformer=vace, num_experts=1)
    assert block_weights(work) == block_weights(attrs.evolve(work, transformer=base))


def test_the_planner_loads_with_the_most_offload_any_checked_request_needed():
    from wanjax.application.memory import DeviceSize, MemoryPlanner
    from wanjax.application.presets import resolve_config
    from wanjax.application.published import PublishedCheckpoint

    config = resolve_config("wan2.2-t2v-a14b", {"offload": "auto"}, read_checkpoint=False)
    settings = config.resolved("gpu")
    checkpoint = PublishedCheckpoint.of(settings.model.location)
    planner = MemoryPlanner(settings, checkpoint, DeviceSize(device=80 * GIB, host=1024 * GIB))
    small = config.request("a fox", height=96, width=96, num_frames=5)
    assert planner.check(small).offload == "none" and planner.offload() == "none"
    large = config.request("a fox")  # the preset's 1280x720x81: 73 GiB resident
    assert planner.check(large).offload == "none"  # fits 80 GiB
    planner = MemoryPlanner(settings, checkpoint, DeviceSize(device=48 * GIB, host=1024 * GIB))
    assert planner.check(large).offload == "components"  # one expert on the device at a time
    planner.check(small)
    assert planner.offload() == "components"
    planner = MemoryPlanner(settings, checkpoint, DeviceSize(device=24 * GIB, host=1024 * GIB))
    assert planner.check(large).offload == "layers"  # one expert alone is 27 GiB


def test_with_components_the_peak_is_the_largest_phase_and_the_host_holds_every_component():
    work = attrs.evolve(A14B_720P81, text_encoder_parameters=5_700_000_000, text_encoder_backend="jax")
    plan = lambda offload: plan_memory(  # noqa: E731
        attrs.evolve(work, offload=offload), platform="gpu", available=48 * GIB, host_available=256 * GIB
    )
    resident, moved = plan("none"), plan("components")
    phases = dict(moved.phases)
    assert set(phases) == {"text encoding", "denoising", "VAE decode"}
    assert moved.peak == max(phases.values()) == phases["denoising"] < resident.peak
    assert moved.fits and not resident.fits
    weights = dict(resident.parts)
    assert dict(moved.host_parts) == {
        "transformer weights": weights["transformer weights"],  # both experts, one at a time on the device
        "VAE weights": weights["VAE weights"],
        "text encoder weights": weights["text encoder weights"],
    }
    assert dict(moved.parts)["transformer weights, one expert"] == weights["transformer weights"] // 2


def test_the_refusal_names_every_offload_that_fits_with_its_peak():
    with pytest.raises(InvalidRequestError) as refused:
        check_fits(_plan("none"), A14B_720P81)
    fixes = str(refused.value).split("What would make it fit:")[1]
    assert "offload=layers" in fixes and "offload=all" in fixes and "offload=components" not in fixes
    assert _plan("all").fits and _plan("all").peak < _plan("layers").peak


def test_auto_covers_every_checked_request_and_orders_the_settings():
    assert covering("components", "layers") == "all" and covering("none", "components") == "components"
    assert least_offload(lambda offload: _plan(offload) if offload != "layers" else _plan("none"))[0] == "all"


@pytest.mark.parametrize("offload", ["components", "all"])
def test_request_loras_are_refused_with_any_offload_naming_the_fix(offload):
    with pytest.raises(ConfigError, match=rf"offload={offload}.*merge the LoRAs at load \(--lora\)"):
        DenoiserSettings(offload=offload, request_loras=True)


def test_all_holds_one_experts_non_block_weights_and_two_of_its_blocks():
    weights, blocks = dict(_plan("none").parts)["transformer weights"], block_weights(A14B_720P81)
    block = blocks // (2 * A14B.transformer.num_layers)
    assert dict(_plan("all").parts)["transformer weights, 2 blocks"] == (weights - blocks) // 2 + 2 * block


@pytest.mark.parametrize("chosen", ["components", "layers", "all"])
def test_request_loras_with_auto_are_refused_where_auto_chose_an_offload(chosen):
    from wanjax.application.builders import build_lora_switch

    settings = DenoiserSettings(offload="auto", request_loras=True)
    with pytest.raises(ConfigError, match=rf"offload=auto chose offload={chosen}.*\(--lora\)"):
        build_lora_switch(None, settings, chosen)

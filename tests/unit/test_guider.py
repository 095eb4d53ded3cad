"""The guider lays out the guidance rows as each conditioning input declares (domain/conditioning's
GUIDANCE_ROWS, a model extension's `inputs`) and combines the rows' predictions; each expert's
steps get that expert's scale."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from denoiser_cases import CASES

from wanjax.adapters.jax.denoising.guider import Guider
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.domain.conditioning import GUIDANCE_ROWS, Conditioning
from wanjax.domain.extensions.registry import MODEL_EXTENSIONS, model_extension
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.guidance import UNBATCHED, GuidanceScales, RowSplit
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE


def test_every_conditioning_field_declares_its_split_and_every_extension_input_too():
    assert set(GUIDANCE_ROWS) | {"extensions"} == set(Conditioning._fields)
    assert all(isinstance(split, RowSplit) for e in MODEL_EXTENSIONS for split in e.inputs.values())


def _inputs(conditioning: Conditioning) -> dict[str, tuple[object, RowSplit]]:
    """Every input of `conditioning` by a flat name, with its declared split."""
    flat = {name: (getattr(conditioning, name), split) for name, split in GUIDANCE_ROWS.items()}
    for extension, inputs in (conditioning.extensions or {}).items():
        splits = model_extension(extension).inputs
        flat.update({f"{extension}.{name}": (value, splits[name]) for name, value in inputs.items()})
    return flat


def test_the_conditional_rows_read_the_inputs_and_the_unconditional_rows_their_declared_value():
    animate = CASES["animate"].conditioning
    vace = VACE_EXTENSION.given(control=np.ones((1, 3, 4, 6, 8), np.float32), scale=0.5)
    given = animate._replace(extensions={**animate.extensions, **vace})
    rows = _inputs(Guider(2).rows(given))
    for name, (value, split) in _inputs(given).items():
        laid_out = rows[name][0]
        if value is None or split == UNBATCHED:
            assert laid_out is value, name
            continue
        conditional, unconditional = np.split(np.asarray(laid_out), 2)
        np.testing.assert_array_equal(conditional, value, err_msg=name)
        fill = split.unconditional_fill
        np.testing.assert_array_equal(unconditional, value if fill is None else np.full_like(value, fill), err_msg=name)
    assert (np.asarray(rows["animate.face"][0])[1] == -1).all()  # Animate's unconditional rows see a blank face
    assert len(rows) == 7  # three fields, two VACE inputs, two Animate inputs: none left out


def test_one_row_group_leaves_every_input_as_given():
    given = CASES["animate"].conditioning
    rows = Guider(1).rows(given)
    assert all(a is b[0] for a, b in zip((v for v, _ in _inputs(rows).values()), _inputs(given).values()))


def test_an_input_without_a_declared_split_is_refused_with_the_fix(monkeypatch):
    monkeypatch.delitem(GUIDANCE_ROWS, "image_context")
    with pytest.raises(TypeError, match="add it to domain/conditioning.GUIDANCE_ROWS"):
        Guider(2).rows(CASES["animate"].conditioning)
    monkeypatch.undo()
    given = Conditioning(extensions={"vace": {"controls": np.zeros((1, 3, 4, 6, 8), np.float32)}})
    with pytest.raises(TypeError, match="the vace extension declares no input 'controls'"):
        Guider(2).rows(given)


def test_an_unbatched_input_has_no_unconditional_value():
    with pytest.raises(ValueError, match="unbatched"):
        RowSplit(batched=False, unconditional_fill=0.0)


def test_the_text_rows_are_the_prompts_then_the_negative_prompts_and_the_cfg_cache_keeps_the_first():
    context, negative = np.zeros((2, 3, 4), np.float32), np.ones((2, 3, 4), np.float32)
    guider = Guider.for_prompts(negative)
    text = jnp.asarray(guider.text_rows(context, negative))
    assert guider == Guider.of_text(text, batch=2) == Guider(2)
    np.testing.assert_array_equal(guider.conditional_text(text, 2), context)
    kv = CrossAttentionKV(jnp.asarray(np.stack([text] * 5)), jnp.asarray(np.stack([text] * 5)))  # [layers, rows, ...]
    np.testing.assert_array_equal(guider.conditional_text(kv, 2).text_k, np.stack([context] * 5))
    assert Guider.for_prompts(None).text_rows(context, None) is context


def test_the_guided_prediction_moves_from_the_unconditional_towards_the_conditional_by_the_scale():
    conditional, unconditional = np.full((1, 2), 3.0, np.float32), np.full((1, 2), 1.0, np.float32)
    prediction = jnp.concatenate([conditional, unconditional])
    np.testing.assert_allclose(Guider(2).combine(prediction, jnp.float32(5.0)), np.full((1, 2), 11.0))
    assert Guider(1).combine(prediction, jnp.float32(5.0)) is prediction


def test_each_expert_s_steps_get_its_own_scale():
    experts = np.array([HIGH_NOISE, HIGH_NOISE, LOW_NOISE])
    np.testing.assert_array_equal(GuidanceScales.of(4.0, 3.0).per_step(experts), [4.0, 4.0, 3.0])
    np.testing.assert_array_equal(GuidanceScales.of(5.0).per_step(experts), [5.0, 5.0, 5.0])

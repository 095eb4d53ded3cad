"""The guider lays out the guidance rows as each conditioning input declares (domain/conditioning's
GUIDANCE_ROWS) and combines the rows' predictions; each expert's steps get that expert's scale."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from denoiser_cases import CASES

from wanjax.adapters.jax.denoising.guider import Guider
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.domain.conditioning import GUIDANCE_ROWS, Conditioning
from wanjax.domain.guidance import UNBATCHED, GuidanceScales, RowSplit
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE


def test_every_conditioning_input_declares_its_split():
    assert set(GUIDANCE_ROWS) == set(Conditioning._fields)


def test_the_conditional_rows_read_the_inputs_and_the_unconditional_rows_their_declared_value():
    given = CASES["animate"].conditioning._replace(control=np.ones((1, 3, 4, 6, 8), np.float32), control_scale=0.5)
    rows = Guider(2).rows(given)
    for name in Conditioning._fields:
        value, laid_out = getattr(given, name), getattr(rows, name)
        if value is None or GUIDANCE_ROWS[name] == UNBATCHED:
            assert laid_out is value, name
            continue
        conditional, unconditional = np.split(np.asarray(laid_out), 2)
        np.testing.assert_array_equal(conditional, value, err_msg=name)
        fill = GUIDANCE_ROWS[name].unconditional_fill
        np.testing.assert_array_equal(unconditional, value if fill is None else np.full_like(value, fill), err_msg=name)
    assert (np.asarray(rows.face)[1] == -1).all()  # Animate's unconditional rows see a blank face


def test_one_row_group_leaves_every_input_as_given():
    given = CASES["animate"].conditioning
    rows = Guider(1).rows(given)
    assert all(a is b for a, b in zip(rows, given, strict=True))


def test_an_input_without_a_declared_split_is_refused_with_the_fix(monkeypatch):
    monkeypatch.delitem(GUIDANCE_ROWS, "face")
    with pytest.raises(TypeError, match="add it to domain/conditioning.GUIDANCE_ROWS"):
        Guider(2).rows(CASES["animate"].conditioning)


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

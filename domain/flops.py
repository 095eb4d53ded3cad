"""Matmul FLOPs of one Wan transformer forward: the yardstick for model FLOP utilisation.

Only matrix multiplications are counted, each as 2 * m * n * k (one multiply and one
add per term); norms, RoPE, softmax, GELU/SiLU and the modulation are elementwise and
left out (a few percent of the total at real sizes, and not what matrix units run).

Notation: B batch (2 when the conditional and unconditional passes of classifier-free
guidance run as one batch), S = (F/pt)(H/ph)(W/pw) video tokens, L text tokens, M image
tokens, D = heads * head_dim, p = pt * ph * pw. Attention over N heads of width H costs
2 * B * N * T * S * H = 2 * B * T * S * D per matmul, whatever the head split.
"""

from __future__ import annotations

from wanjax.domain.specs import TransformerSpec


def matmul_flops(m: int, n: int, k: int) -> int:
    """An [m, k] @ [k, n] product."""
    return 2 * m * n * k


def attention_flops(batch: int, queries: int, keys: int, dim: int) -> int:
    """Q K^T ([T, H] @ [H, S] per head) plus P V ([T, S] @ [S, H] per head), over all heads."""
    return 2 * batch * matmul_flops(queries, keys, dim)


def transformer_flops_per_step(
    spec: TransformerSpec,
    latent_frames: int,
    latent_height: int,
    latent_width: int,
    text_tokens: int,
    batch: int,
    image_tokens: int = 0,
    *,
    per_token_timesteps: bool = False,
    kv_cached: bool = False,
) -> int:
    """Matmul FLOPs of one transformer forward on latents [batch, F, H, W, C_in].

    Terms, as the JAX model computes them (the text and image embedders and the
    cross-attention K/V projections run in every forward, unless `kv_cached`: the
    denoiser's KV cache then computes them once per generation, outside the step):
      patch embed      B*S rows, p*C_in -> D (a Conv3d with kernel = stride = patch)
      time embedder    freq_dim -> D -> D, then time_proj D -> 6D, on B rows
                       (B*S rows with `per_token_timesteps`, Wan 2.2 TI2V)
      text embedder    text_dim -> D -> D on B*L rows
      image embedder   image_dim -> image_dim -> D on B*M rows (Wan 2.1 I2V / FLF2V)
      per block, num_layers times:
        self-attention   q, k, v, out projections D -> D on B*S rows; QK^T and PV over S keys
        cross-attention  q, out on B*S rows; k, v on B*L text rows; QK^T and PV over L keys;
                         with image tokens also add_k, add_v on B*M rows and QK^T, PV over M keys
        feed-forward     D -> ffn_dim -> D on B*S rows
      head             proj_out D -> p*C_out on B*S rows
      extensions       (domain/extensions/) their blocks, each as above, and their kernels every
                       token goes through (`ExtensionCost`): VACE's patch embed of the control,
                       p*vace_in -> D, proj_in D -> D and a proj_out D -> D per VACE block, on B*S rows
    """
    pt, ph, pw = spec.patch_size
    p = pt * ph * pw
    d, b = spec.inner_dim, batch
    s = (latent_frames // pt) * (latent_height // ph) * (latent_width // pw)
    rows_s, rows_l, rows_m = b * s, b * text_tokens, b * image_tokens
    rows_t = rows_s if per_token_timesteps else b

    patch_embed = matmul_flops(rows_s, d, p * spec.in_channels)
    time = matmul_flops(rows_t, d, spec.freq_dim) + matmul_flops(rows_t, d, d) + matmul_flops(rows_t, 6 * d, d)
    text = matmul_flops(rows_l, d, spec.text_dim) + matmul_flops(rows_l, d, d)
    image = 0
    if image_tokens:
        image_dim = spec.image_dim or 0
        image = matmul_flops(rows_m, image_dim, image_dim) + matmul_flops(rows_m, d, image_dim)

    self_attention = 4 * matmul_flops(rows_s, d, d) + attention_flops(b, s, s, d)
    cross_attention = (
        2 * matmul_flops(rows_s, d, d)
        + 2 * matmul_flops(rows_l, d, d)
        + attention_flops(b, s, text_tokens, d)
        + 2 * matmul_flops(rows_m, d, d)
        + attention_flops(b, s, image_tokens, d)
    )
    feed_forward = 2 * matmul_flops(rows_s, spec.ffn_dim, d)
    head = matmul_flops(rows_s, p * spec.out_channels, d)

    costs = [extension.cost(spec) for extension in spec.extensions]
    layers = spec.num_layers + sum(cost.extra_blocks for cost in costs)
    blocks = layers * (self_attention + cross_attention + feed_forward)
    blocks += matmul_flops(rows_s, sum(cost.token_kernels for cost in costs), 1)
    total = patch_embed + time + text + image + blocks + head
    if not kv_cached:
        return total
    kv_projections = layers * 2 * (matmul_flops(rows_l, d, d) + matmul_flops(rows_m, d, d))
    return total - (text + image + kv_projections)  # computed once per generation by the KV cache

"""`wanjax generate --set KEY=VALUE` accepts every key it accepted before the settings were split
into sections (the list below is the flat config of commit 7422b1d, and `strength`, `vae_convolution`
and `text_encoder_backend` since) and parses each value to the key's type."""

from __future__ import annotations

import pytest

from wanjax.application.presets import resolve_config
from wanjax.domain.config import GenerationConfig
from wanjax.entrypoints.cli import build_parser, set_overrides

# key: (the text given to --set, the value the config then holds)
ACCEPTED = {
    "model": ("demo", "demo"),
    "dtype": ("bfloat16", "bfloat16"),
    "scan_layers": ("false", False),
    "attention": ("xla", "xla"),
    "max_sequence_length": ("64", 64),
    "loras": ("a.safetensors:0.5,b.safetensors", ("a.safetensors:0.5", "b.safetensors")),
    "loras_low": ("c.safetensors", ("c.safetensors",)),
    "request_loras": ("true", True),
    "lora_cache_mb": ("256", 256),
    "activations_dtype": ("bfloat16", "bfloat16"),
    "scheduler_dtype": ("bfloat16", "bfloat16"),
    "matmul_dtype": ("float8_e4m3fn", "float8_e4m3fn"),
    "use_kv_cache": ("no", False),
    "scan_diffusion_loop": ("yes", True),
    "offload": ("layers", "layers"),
    "use_batched_text_encoder": ("0", False),
    "text_encoder_dtype": ("float32", "float32"),
    "compile_text_encoder": ("on", True),
    "text_encoder_backend": ("jax", "jax"),
    "vae_dtype": ("bfloat16", "bfloat16"),
    "vae_weights_dtype": ("float32", "float32"),
    "vae_convolution": ("3d", "3d"),
    "vae_decode_chunk": ("none", None),
    "vae_encode_chunk": ("8", 8),
    "vae_tiling": ("true", True),
    "vae_tile_size": ("320", 320),
    "vae_tile_stride": ("160", 160),
    "cache_policy": ("cfg_cache", "cfg_cache"),
    "cache_model": ("wan2.1-t2v-1.3b", "wan2.1-t2v-1.3b"),
    "magcache_thresh": ("0.06", 0.06),
    "magcache_K": ("4", 4),
    "retention_ratio": ("0.3", 0.3),
    "mag_ratios": ("1.0,1.0,0.98,0.97", (1.0, 1.0, 0.98, 0.97)),
    "mag_ratios_split": ("1", 1),
    "magcache_calibration": ("true", True),
    "teacache_thresh": ("0.3", 0.3),
    "teacache_use_ret_steps": ("false", False),
    "teacache_coefficients": ("1.5,-2,0.25", (1.5, -2.0, 0.25)),
    "cfg_cache_interval": ("3", 3),
    "cfg_cache_start_ratio": ("0.25", 0.25),
    "cfg_cache_end_ratio": ("0.8", 0.8),
    "cfg_cache_alpha": ("0.5", 0.5),
    "sencache_thresh": ("0.2", 0.2),
    "sencache_alpha_x": ("2", 2.0),
    "sencache_alpha_t": ("0.5", 0.5),
    "sencache_K": ("2", 2),
    "sencache_start_ratio": ("0.2", 0.2),
    "sencache_end_ratio": ("0.2", 0.2),
    "Fn_compute_blocks": ("4", 4),
    "Bn_compute_blocks": ("2", 2),
    "residual_diff_threshold": ("0.12", 0.12),
    "max_warmup_steps": ("4", 4),
    "warmup_interval": ("2", 2),
    "max_cached_steps": ("20", 20),
    "max_continuous_cached_steps": ("3", 3),
    "enable_taylorseer": ("true", True),
    "taylorseer_order": ("2", 2),
    "weights_dtype": ("float8_e4m3fn", "float8_e4m3fn"),
    "transformer_file": ("/data/t.safetensors", "/data/t.safetensors"),
    "transformer_2_file": ("/data/t2.safetensors", "/data/t2.safetensors"),
    "vae_file": ("/data/Wan2.1_VAE.pth", "/data/Wan2.1_VAE.pth"),
    "text_encoder_file": ("/data/t5.pth", "/data/t5.pth"),
    "image_encoder_file": ("/data/clip.pth", "/data/clip.pth"),
    "weights_cache": ("true", True),
    "weights_cache_dir": ("/tmp/w", "/tmp/w"),
    "compilation_cache_dir": ("none", "none"),
    "text_embeddings_cache_dir": ("", ""),
    "warmup": ("true", True),
    "mesh_data": ("2", 2),
    "mesh_fsdp": ("2", 2),
    "mesh_tensor": ("2", 2),
    "mesh_context": ("2", 2),
    "context_parallel": ("ring", "ring"),
    "logical_axis_rules": ("embed=tensor,mlp=", ("embed=tensor", "mlp=")),
    "height": ("64", 64),
    "width": ("96", 96),
    "num_frames": ("9", 9),
    "num_inference_steps": ("4", 4),
    "guidance_scale": ("3.5", 3.5),
    "guidance_scale_low": ("2.5", 2.5),
    "boundary_ratio": ("0.9", 0.9),
    "flow_shift": ("5", 5.0),
    "sample_solver": ("euler", "euler"),
    "sigma_schedule": ("diffusers", "diffusers"),
    "sample_timesteps": ("1000,750,500,250", (1000.0, 750.0, 500.0, 250.0)),
    "expert_switch_step": ("2", 2),
    "strength": ("0.6", 0.6),
    "segment_frame_length": ("33", 33),
    "prev_segment_conditioning_frames": ("5", 5),
    "infer_frames": ("48", 48),
    "num_repeat": ("2", 2),
    "base_num_frames": ("121", 121),
    "overlap_history": ("17", 17),
    "ar_step": ("5", 5),
    "causal_block_size": ("5", 5),
    "addnoise_condition": ("20", 20.0),
    "negative_prompt": ("blurry, static", "blurry, static"),
    "seed": ("42", 42),
    "fps": ("24", 24),
}


def test_the_list_is_every_key_there_is() -> None:
    assert sorted(ACCEPTED) == sorted(GenerationConfig.keys())


@pytest.mark.parametrize("key", sorted(ACCEPTED))
def test_generate_accepts_the_key(key: str) -> None:
    text, expected = ACCEPTED[key]
    args = build_parser().parse_args(["generate", "--prompt", "a fox", "--set", f"{key}={text}"])
    config = resolve_config(None, set_overrides(args), read_checkpoint=False)
    assert config.value(key) == expected
    assert config.origin(key) == "--set"

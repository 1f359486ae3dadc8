"""KV-cache capacity of an engine pool, in tokens: the number admission budgets by.

vLLM preempts (or, with prefix caching off, recomputes) sequences once the KV
cache is full, so the concurrent tokens admitted to one engine must stay within
what its cache holds. Where that number comes from differs by device:

* **CPU**: the cache is exactly ``VLLM_CPU_KVCACHE_SPACE`` GiB
  (``cpu.kvcache_space_gib``), so the tokens it holds follow from the model's
  KV bytes per token: layers × KV heads × head dim × 2 (K and V) × dtype bytes,
  read from the prepared model's ``config.json``. The bundled SmolLM2-135M in
  float32 is 30 × 3 × 64 × 2 × 4 = 46,080 B/token, so 1 GiB holds 23,301 tokens.
  Without the file (the model not prepared yet, e.g. generating manifests on a
  machine that never ran ``make model``) the bundled model's published geometry
  (:data:`BUNDLED_MODEL_GEOMETRY`) stands in, so generated manifests do not depend
  on the machine; any other model falls back to :data:`FALLBACK_KV_BYTES_PER_TOKEN`,
  64 KiB/token, more than the bundled model's 45 KiB, so its budget errs low.
* **GPU**: vLLM sizes the cache at start-up from the memory left after weights
  and activations, which this file cannot know; the pool states it as
  ``kv_cache_tokens`` (per replica), read from the engine's start-up log line
  ``GPU KV cache size: N tokens``.

Either way a replica never holds more than ``max_num_seqs × max_model_len``
tokens at once, so that caps the per-replica number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployments.pools import PoolConfig

GIB = 1 << 30
#: KV bytes per token assumed when the model's config.json cannot be read: 64 KiB,
#: above the bundled SmolLM2's 45 KiB (float32), so the derived budget is smaller
#: than the real cache, never larger.
FALLBACK_KV_BYTES_PER_TOKEN = 64 * 1024
#: SmolLM2-135M-Instruct's ``config.json`` fields that size its KV cache.
BUNDLED_MODEL_GEOMETRY: dict[str, int] = {
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_size": 576,
}
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def kv_bytes_per_token(model_config: Mapping[str, Any], dtype_bytes: int) -> int:
    """Bytes of K and V one token occupies across all layers of a decoder.

    ``head_dim`` defaults to ``hidden_size / num_attention_heads`` and the KV heads
    to the attention heads (no grouped-query attention), as Hugging Face configs do.
    """
    heads = int(model_config["num_attention_heads"])
    kv_heads = int(model_config.get("num_key_value_heads") or heads)
    head_dim = int(model_config.get("head_dim") or int(model_config["hidden_size"]) // heads)
    layers = int(model_config["num_hidden_layers"])
    return layers * kv_heads * head_dim * 2 * dtype_bytes


def dtype_bytes(dtype: str) -> int:
    """Bytes per KV element; ``auto`` counts as float32, the larger (conservative)."""
    return _DTYPE_BYTES.get(dtype, 4)


def model_kv_bytes_per_token(pool: PoolConfig) -> int:
    """The pool's model's KV bytes per token, from its ``config.json`` if readable."""
    from deployments.model_prepare import BUNDLED_ALIAS

    config_file = Path(pool.resolved_model()) / "config.json"
    try:
        config = json.loads(config_file.read_text())
        return kv_bytes_per_token(config, dtype_bytes(pool.dtype))
    except (OSError, ValueError, KeyError):
        if pool.model == BUNDLED_ALIAS:
            return kv_bytes_per_token(BUNDLED_MODEL_GEOMETRY, dtype_bytes(pool.dtype))
        return FALLBACK_KV_BYTES_PER_TOKEN


def replica_kv_cache_tokens(pool: PoolConfig) -> int:
    """Tokens one replica's KV cache holds, capped by ``max_num_seqs × max_model_len``.

    Raises:
        ValueError: a GPU pool without ``kv_cache_tokens``.
    """
    if pool.device == "cpu":
        cache = pool.cpu.kvcache_space_gib * GIB // model_kv_bytes_per_token(pool)
    elif pool.kv_cache_tokens is not None:
        cache = pool.kv_cache_tokens
    else:
        raise ValueError(
            f"pool {pool.name}: a GPU pool needs kv_cache_tokens (per replica), the N of "
            "vLLM's start-up log line 'GPU KV cache size: N tokens'"
        )
    return min(cache, pool.max_num_seqs * pool.max_model_len)


def engine_kv_cache_tokens(pool: PoolConfig) -> int:
    """Tokens the KV caches of a pool's engine hold over its (maximum) replicas."""
    replicas = pool.autoscaling.max_replicas if pool.autoscaling else pool.replicas
    return replica_kv_cache_tokens(pool) * replicas

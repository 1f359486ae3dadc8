"""A pool's LoRA adapter: where it lives, which ranks vLLM takes, and whether it loads here.

The pools file names the adapter (``lora:`` of a pool, :mod:`deployments.pools`);
the folder is read where the engine starts, so a relative path resolves against
the code's own root, not the reader's working directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The ranks vLLM 0.32 accepts for ``max_lora_rank`` (``vllm.config.lora.MaxLoRARanks``).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

#: Relative adapter paths resolve against this folder (the one holding ``deployments/``):
#: the repository in a checkout, ``/app`` in the image, the unpacked ``working_dir`` of a
#: Serve ``runtime_env``, ``site-packages`` in an installed wheel.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class LoraAdapter(BaseModel):
    """A peft LoRA adapter every request of the pool runs with.

    ``path`` is a folder with ``adapter_config.json`` and ``adapter_model.safetensors``;
    a relative path is relative to :data:`PROJECT_ROOT` and is resolved where the
    engine starts (the replica), not where the file is read. The adapter must have
    been trained on the pool's ``model``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    path: str = Field(min_length=1)
    #: vLLM's ``max_lora_rank``: at least the adapter's ``r``, one of :data:`LORA_RANKS`.
    max_rank: int = 16

    @model_validator(mode="after")
    def _rank(self) -> LoraAdapter:
        if self.max_rank not in LORA_RANKS:
            raise ValueError(f"lora.max_rank {self.max_rank} is not one of {LORA_RANKS}")
        return self

    def resolved_path(self) -> Path:
        path = Path(self.path).expanduser()
        return path if path.is_absolute() else PROJECT_ROOT / path

    def trained_prompt(self) -> str | None:
        """The prompt version the adapter was trained on, as its ``manifest.json``
        records it (``benchmarks.adapter_train``); None where nothing records it."""
        try:
            manifest = json.loads((self.resolved_path() / "manifest.json").read_text())
        except (OSError, ValueError):
            return None
        version = manifest.get("prompt_version") if isinstance(manifest, dict) else None
        return version if isinstance(version, str) else None

    def checked_path(self, pool: str) -> Path:
        """The adapter folder, after checking it holds an adapter vLLM can load here.

        Raises:
            FileNotFoundError: the folder or its peft files are missing (names the path
                and how to train it).
            ValueError: the adapter's rank exceeds ``max_rank``.
        """
        path = self.resolved_path()
        missing = [
            name
            for name in ("adapter_config.json", "adapter_model.safetensors")
            if not (path / name).is_file()
        ]
        if missing:
            raise FileNotFoundError(
                f"pool {pool}: LoRA adapter {self.name!r} not found: {path} "
                f"(lora.path {self.path!r}) lacks {', '.join(missing)}. Train it with "
                "`make adapter` (python -m benchmarks.adapter_train), or remove `lora:` "
                "from the pool to serve the base model."
            )
        rank = json.loads((path / "adapter_config.json").read_text()).get("r")
        if isinstance(rank, int) and rank > self.max_rank:
            raise ValueError(
                f"pool {pool}: LoRA adapter {path} has rank {rank} > lora.max_rank "
                f"{self.max_rank}; raise max_rank to one of {LORA_RANKS}"
            )
        return path

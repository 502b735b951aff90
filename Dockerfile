# ktune service image: `ktune serve` (REST API, dashboard, job runner) by default, or
# `ktune worker`, or a Ray node (`ray start`). docker-compose.yml builds one image for every
# service, FROM a CUDA runtime image with the gpu and ray extras, so that the API, the runners
# and every Ray node run the same Python and the same Ray (a Ray cluster refuses a mix):
#   docker build --build-arg BASE=nvidia/cuda:13.0.2-runtime-ubuntu24.04 --build-arg EXTRAS=gpu,ray .
# Without build arguments: a lean image for the API and replayed or CPU jobs.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ARG EXTRAS=""
# A C compiler with OpenMP, for jobs of the CPU operators (cpu_matmul, cpu_conv2d); empty: none
ARG CC_PACKAGES="gcc libc6-dev"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/ktune/bin:$PATH

# CUDA base images come without Python; the slim Python image has it.
RUN packages="$CC_PACKAGES"; \
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv --help >/dev/null 2>&1; then \
        packages="$packages python3 python3-venv"; \
    fi; \
    if [ -n "${packages# }" ]; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $packages \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/ktune \
    && useradd --create-home --uid 10001 ktune

WORKDIR /app
COPY pyproject.toml README.md ./
COPY db db
COPY search_space search_space
COPY cost_model cost_model
COPY tuner tuner
COPY server server
COPY ktune ktune
RUN pip install ".${EXTRAS:+[$EXTRAS]}"

USER ktune
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["ktune", "serve", "--host", "0.0.0.0", "--port", "8000"]

# torchrig workstation image: PyTorch, JupyterLab and sshd for multi-GPU work.
#
# No `# syntax=` line on purpose: the engine's built-in Dockerfile frontend is used, so a build
# never has to pull a frontend image (air-gapped and proxied builders work).
#
# Build: `make build` (= `docker compose build`). Knobs (build args):
#   CUDA_FLAVOUR   which CUDA PyTorch is built for; picks the base image tag below AND the lock
#                  (locks/<flavour>.txt) that holds the matching torch wheels.
#                  Minimum NVIDIA driver: cu130 >= 580; cu128 and cu126 >= 525.60 (CUDA 12
#                  minor-version compatibility). The banner checks this at start.
#   BASE_IMAGE     any Debian-family image instead of the flavour's nvidia/cuda base.
#   UV_VERSION     the uv that installs the lock, and that dev's `uv` runs in the container.
#   PYTORCH_VERSION  torch's version in the lock, passed by `make build`, which reads it there;
#                  the build checks it against the torch it installed. Set in the image's
#                  environment: enroot's PyTorch hook (pyxis on Slurm) acts on images that set
#                  it. A plain `docker compose build` leaves it empty (the hook needs it set only).
# Secret: `extra_ca` (a PEM file, e.g. a TLS-intercepting proxy's CA), trusted during the build
# and kept in the image's trust store.
# Targets: `runtime` (default, last stage) and `devel` (adds nvcc and CUDA headers matching
# torch's CUDA, for building extensions; needs an nvidia/cuda base for NVIDIA's apt repository).

ARG CUDA_FLAVOUR=cu130
ARG BASE_IMAGE=cuda-${CUDA_FLAVOUR}
ARG UV_VERSION=0.13.9

# One stage per flavour: `-base` only, since torch's wheels bring their own CUDA runtime, cuDNN
# and NCCL. BuildKit pulls only the stage that BASE_IMAGE names.
FROM nvidia/cuda:13.0.2-base-ubuntu24.04 AS cuda-cu130
FROM nvidia/cuda:12.8.1-base-ubuntu24.04 AS cuda-cu128
FROM nvidia/cuda:12.6.3-base-ubuntu24.04 AS cuda-cu126

# --- os: the base plus CA trust and the system Python the venv is made from ---------------------
FROM ${BASE_IMAGE} AS os
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive
# Ubuntu images delete downloaded .debs after each install, which would empty the apt cache
# mount; keep them (the cache mount lives outside the image). policy-rc.d stops package scripts
# from starting daemons (openssh-server) during the build.
RUN rm -f /etc/apt/apt.conf.d/docker-clean \
    && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-cache \
    && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
# The extra CA goes in before anything talks HTTPS. apt gets it explicitly for the first install
# (ca-certificates itself may come from an https mirror behind the same proxy).
RUN --mount=type=secret,id=extra_ca \
    --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    apt_ca=() \
    && if [ -s /run/secrets/extra_ca ]; then \
         apt_ca=(-o Acquire::https::CAInfo=/run/secrets/extra_ca); \
       fi \
    && apt-get "${apt_ca[@]}" update \
    && apt-get "${apt_ca[@]}" install -y --no-install-recommends ca-certificates python3 \
    && if [ -s /run/secrets/extra_ca ]; then \
         install -m 644 /run/secrets/extra_ca /usr/local/share/ca-certificates/torchrig-extra-ca.crt; \
       fi \
    && update-ca-certificates
# Everything that speaks TLS uses the system bundle, so the extra CA also works for the user's
# own `pip install` at run time.
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    LANG=C.UTF-8

# --- uv: the installer, from PyPI; the runtime image takes its binary alone ---------------------
FROM os AS uv
ARG UV_VERSION
ARG DEBIAN_FRONTEND=noninteractive
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    apt-get update && apt-get install -y --no-install-recommends python3-venv
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/uv && /opt/uv/bin/pip install --disable-pip-version-check "uv==${UV_VERSION}"

# --- venv: every locked package, bytecode precompiled ----------------------------------------
FROM uv AS venv
ARG CUDA_FLAVOUR
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never
COPY locks/ /tmp/locks/
RUN if [ ! -f "/tmp/locks/${CUDA_FLAVOUR}.txt" ]; then \
      echo "error: no lock for CUDA_FLAVOUR=${CUDA_FLAVOUR} (locks/${CUDA_FLAVOUR}.txt)." \
           "Create it with: make lock CUDA_FLAVOUR=${CUDA_FLAVOUR}" >&2; \
      exit 1; \
    fi
# The venv is root's, read-only to everyone else: what dev installs goes to the kept packages
# (/opt/packages, a volume), so the stack cannot be replaced by accident, and nothing dev can
# write is on root's PATH (torchrig/packages/__init__.py).
RUN --mount=type=cache,target=/root/.cache/uv \
    /opt/uv/bin/uv venv --python /usr/bin/python3 /opt/venv \
    && /opt/uv/bin/uv pip sync --python /opt/venv/bin/python --require-hashes \
         "/tmp/locks/${CUDA_FLAVOUR}.txt" \
    && chmod -R go-w /opt/venv
ARG PYTORCH_VERSION
RUN installed="$(/opt/venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))')" \
    && if [ -n "${PYTORCH_VERSION}" ] && [ "${PYTORCH_VERSION}" != "${installed}" ]; then \
         echo "error: PYTORCH_VERSION=${PYTORCH_VERSION}, but the lock installed torch" \
              "${installed}: leave it to \`make build\`, which reads it from the lock." >&2; \
         exit 1; \
       fi

# --- workstation: the runtime image's content --------------------------------------------------
FROM os AS workstation
ARG CUDA_FLAVOUR
ARG BASE_IMAGE
ARG PYTORCH_VERSION
ARG DEBIAN_FRONTEND=noninteractive
LABEL org.opencontainers.image.title="torchrig workstation" \
      org.opencontainers.image.description="PyTorch multi-GPU workstation: JupyterLab, sshd, torchrig helpers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.torchrig.cuda-flavour="${CUDA_FLAVOUR}"
# gcc/g++ and Python headers: torch.compile (Triton on GPU, C++ codegen on CPU) compiles at run
# time. The rest is what a remote workstation session needs.
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    apt-get update \
    && apt-get install -y --no-install-recommends \
         gcc g++ libc6-dev python3-dev \
         openssh-server tini sudo \
         git tmux htop curl less procps nano vim-tiny rsync \
    && rm -f /etc/ssh/ssh_host_*
# User dev (1000:1000). Ubuntu images ship `ubuntu` at 1000.
# Password '*': no password login, but not "locked", which sshd would refuse for key logins.
# /opt/packages: the kept packages' volume (a fresh volume copies this folder's owner).
RUN if id -u ubuntu >/dev/null 2>&1; then userdel --remove ubuntu; fi \
    && groupadd --gid 1000 dev \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash dev \
    && usermod -p '*' dev \
    && install -d -o dev -g dev -m 755 /workspace /checkpoints /data /run/torchrig \
         /var/lib/torchrig/ssh /opt/packages \
    && install -d -o dev -g dev -m 700 /home/dev/.ssh \
    && install -d -o dev -g dev -m 755 /home/dev/.cache
COPY --from=venv /opt/venv /opt/venv
# The venv's Python also sees each user's own site (~/.local under that user's HOME), so that
# under Apptainer or pyxis, where any uid runs the image read-only, `pip install --user` installs
# to that user's home and is imported from there. Turned on only once the lock is installed:
# the install sees the venv alone.
RUN sed -i 's/^include-system-site-packages = false$/include-system-site-packages = true/' \
      /opt/venv/pyvenv.cfg \
    && grep -qx 'include-system-site-packages = true' /opt/venv/pyvenv.cfg
# uv for dev: the kept venv's `uv` wraps it (torchrig/packages/wrappers.py); on no one's PATH.
COPY --from=uv /opt/uv/bin/uv /opt/uv/bin/uv
# The NVIDIA runtime exposes all GPUs with compute+utility (nvidia-smi, NVML). Its own CUDA
# version gate (NVIDIA_REQUIRE_CUDA, set by nvidia/cuda bases) is turned off: with a too-old
# driver the container still starts and the banner names the minimum driver and the rebuild knob
# instead of a bare "unsatisfied condition: cuda>=13.0" from the runtime.
# No cache folder in this environment: root gets it too, and a compile cache runs the code it
# holds. Each user's caches follow their own HOME (torchrig/pth/caches.py, through a .pth
# file below); dev's are on the cache volume, set by the start for dev alone.
# UV_LINK_MODE: uv's cache and the kept packages are two volumes, where hard links cannot reach.
# TORCH_DISABLE_SHARE_RDZV_TCP_STORE: each torchrun restart round gets a store of its own, so the
# round re-forms the process group (with the agent's shared store the workers find the keys of the
# round before: "Gloo connectFullMesh failed", or a hang), for plain torchrun too (docs/training.md).
# CUDA_DEVICE_ORDER: torch numbers the GPUs as nvidia-smi does (PCI bus order), not fastest first,
# so "GPU 1" means one GPU in both, and the banner can name each by its host index.
# No PYTHONUNBUFFERED: unbuffered, print() writes the text and its newline separately, so the
# ranks of `torchrun` sharing one stdout run their lines together. The start-up logs flush
# themselves; set it in compose's environment if you want it for your own scripts.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_DISABLE_REQUIRE=1 \
    CUDA_DEVICE_ORDER=PCI_BUS_ID \
    TORCHRIG_CUDA_FLAVOUR=${CUDA_FLAVOUR} \
    PYTORCH_VERSION=${PYTORCH_VERSION} \
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 \
    UV_LINK_MODE=copy
COPY entrypoint/entrypoint.sh /usr/local/bin/torchrig-entrypoint
COPY entrypoint/sshd_config /etc/torchrig/sshd_config
COPY entrypoint/profile.sh /etc/profile.d/torchrig.sh
COPY entrypoint/page_config.json /opt/venv/etc/jupyter/labconfig/page_config.json
# TensorBoard as a JupyterLab Launcher item, served by jupyter-server-proxy at /tensorboard/
# behind Jupyter's token (it listens on localhost only: no port of its own is published).
COPY entrypoint/jupyter_server_config.json /opt/venv/etc/jupyter/jupyter_server_config.json
COPY entrypoint/tensorboard.svg /etc/torchrig/tensorboard.svg
# Without a GPU, NVIDIA's GPU dashboard panel says so (its charts would just stay empty).
COPY entrypoint/gpu-notice/ /opt/venv/share/jupyter/labextensions/@torchrig/gpu-notice/
# This project last, so editing a helper rebuilds in seconds. Its dependencies are all in the
# lock; setuptools (a torch dependency) builds it without reaching an index. Three .pth files run
# at every start of the venv's Python, each calling a module of torchrig/pth/: the first
# points the caches the user did not name at that user's own home (caches); the second puts dev's
# kept packages in front of the image's, for every user but root (kept_packages); the third, only
# in a worker that torchrun started or a child of mp.spawn, makes the rank end with its script's
# status, not with an abort in Python's teardown (rank_exit). The "Python 3" kernel runs the kept
# venv's Python for dev (entrypoint/kernel-python.sh), so `%pip install` in a notebook is kept too.
RUN --mount=type=bind,target=/src \
    cp -r /src /tmp/torchrig-src \
    && UV_COMPILE_BYTECODE=1 /opt/uv/bin/uv pip install --python /opt/venv/bin/python \
         --no-deps --no-build-isolation --no-cache --offline /tmp/torchrig-src \
    && rm -rf /tmp/torchrig-src \
    && site="$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && install -m 644 /src/entrypoint/torchrig-caches.pth \
         /src/entrypoint/torchrig-kept-packages.pth \
         /src/entrypoint/torchrig-rank-exit.pth "${site}/" \
    && install -m 755 /src/entrypoint/kernel-python.sh /opt/venv/bin/torchrig-kernel-python \
    && /opt/venv/bin/python -c 'import json, sys; spec = json.load(open(sys.argv[1])); \
         spec["argv"][0] = sys.argv[2]; json.dump(spec, open(sys.argv[1], "w"), indent=1)' \
         /opt/venv/share/jupyter/kernels/python3/kernel.json /opt/venv/bin/torchrig-kernel-python
# Root's own copy of torchrig, for what root runs (the start's root steps, the healthcheck): the
# venv is dev's, so root runs this copy with the system Python in isolated mode and without
# site-packages (scripts/torchrig/image/root_main.py). Owned and writable by root alone.
RUN --mount=type=bind,target=/src \
    install -d -m 755 /usr/lib/torchrig \
    && cp -r /src/scripts/torchrig /usr/lib/torchrig/torchrig \
    && cp /usr/lib/torchrig/torchrig/image/root_main.py /usr/lib/torchrig/__main__.py \
    && chown -R root:root /usr/lib/torchrig \
    && chmod -R u=rwX,go=rX /usr/lib/torchrig \
    && /usr/bin/python3 -I -S -m compileall -q /usr/lib/torchrig \
    && /usr/bin/python3 -I -S /usr/lib/torchrig constraints \
         "$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
         > /etc/torchrig/constraints.txt
# The stack's pins, for dev's pip and uv (and root's): an install that would replace torch,
# torchvision, triton or an nvidia-* library is refused (torchrig/shared/stack.py).
ENV PIP_CONSTRAINT=/etc/torchrig/constraints.txt \
    UV_CONSTRAINT=/etc/torchrig/constraints.txt
# The checkout's examples/ (the training example and its notebook), root's and read-only: what a
# pod without the workspace mount runs (deploy/k8s), and what the start copies, as dev, to
# /workspace/examples when the workspace has none (torchrig/image/examples.py). Never the
# workspace the container writes.
COPY examples/ /opt/torchrig/examples/
WORKDIR /workspace
EXPOSE 8888 2222
# Docker runs these as root: absolute paths only, and root's own copy of torchrig.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/bin/python3", "-I", "-S", "/usr/lib/torchrig", "healthcheck"]
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/torchrig-entrypoint"]

# --- devel: adds nvcc + CUDA headers for torch's CUDA (from NVIDIA's apt repository) ---------
FROM workstation AS devel
ARG CUDA_FLAVOUR
ARG DEBIAN_FRONTEND=noninteractive
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    version="${CUDA_FLAVOUR#cu}" && major="${version%?}" && minor="${version#"${major}"}" \
    && package="cuda-minimal-build-${major}-${minor}" \
    && apt-get update \
    && if ! apt-cache show "${package}" >/dev/null 2>&1; then \
         echo "error: ${package} is not in this base's apt sources: the devel target needs" \
              "an nvidia/cuda base (NVIDIA's apt repository); BASE_IMAGE has none." >&2; \
         exit 1; \
       fi \
    && apt-get install -y --no-install-recommends "${package}" \
    && ln -sfn "/usr/local/cuda-${major}.${minor}" /usr/local/cuda
ENV CUDA_HOME=/usr/local/cuda \
    PATH=/opt/venv/bin:/usr/local/cuda/bin:$PATH

# --- runtime: the default target ---------------------------------------------------------------
FROM workstation AS runtime

# syntax=docker/dockerfile:1
# The Gantry GPU agent on the CUDA 12 runtime with cuDNN (what onnxruntime's CUDA provider
# links against). Build from the repository root:
#   docker build -f infra/docker/agent.Dockerfile -t gantry-agent .
# Run on a host with the NVIDIA Container Toolkit:
#   docker run --gpus all -e GANTRY_GATEWAY_URL=... -e GANTRY_QUEUE_URL=... \
#     -e GANTRY_AGENT_TOKEN=... gantry-agent

ARG CUDA_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04
ARG NODE_IMAGE=node:20-bookworm-slim

# Node.js 20 comes from the official image: its binaries are built for old glibc and run on
# Ubuntu 22.04 as they are.
FROM ${NODE_IMAGE} AS node

FROM ${CUDA_IMAGE} AS build
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 make g++ \
 && rm -rf /var/lib/apt/lists/* \
 # package.json's allowScripts needs npm 11 (Node 20 ships npm 10).
 && npm install -g npm@11 --no-audit --no-fund
WORKDIR /opt/gantry
COPY package.json package-lock.json ./
# No lifecycle script runs: the checkout's `prepare` builds the SDK and console with
# devDependencies and sources this stage has not, and the CUDA provider libraries are
# fetched on purpose below, never by a postinstall script. The native builds the agent needs
# are run on purpose (better-sqlite3 for a sqlite: queue, esbuild for tsx).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 esbuild \
 && ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install \
 && find node_modules/onnxruntime-node/bin -name libonnxruntime_providers_cuda.so | grep -q . \
 && npm cache clean --force
COPY tsconfig.json ./
COPY bin ./bin
COPY cli ./cli
COPY gateway ./gateway
COPY gpu-agent ./gpu-agent
COPY shared ./shared

FROM ${CUDA_IMAGE}
COPY --from=node /usr/local/bin/node /usr/local/bin/node
# tini as PID 1 forwards SIGTERM to the agent and reaps exited runner processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gantry \
 && useradd --system --uid 10001 --gid gantry --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gantry \
 && install -d -o gantry -g gantry -m 0750 /var/cache/gantry
COPY --from=build /opt/gantry /opt/gantry
RUN ln -s /opt/gantry/bin/gantry-agent.js /usr/local/bin/gantry-agent

# GANTRY_MODEL_CACHE_DIR: the folder made for the agent's user above (rmbg, models.yaml files;
# a volume on Kubernetes, whose root filesystem is read-only); the default, ./model-cache,
# would be under /opt/gantry, which is root's.
ENV NODE_ENV=production \
    GANTRY_MODEL_CACHE_DIR=/var/cache/gantry \
    GANTRY_EXECUTION_PROVIDERS=cuda,cpu \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /opt/gantry
USER 10001:10001
# SIGTERM drains: no new jobs, in-flight jobs get GANTRY_DRAIN_TIMEOUT_SECONDS. Give
# `docker stop` more than that: docker stop --time 90.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "gantry-agent"]
CMD ["run"]

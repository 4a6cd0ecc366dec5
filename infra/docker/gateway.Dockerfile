# syntax=docker/dockerfile:1
# The Gantry gateway on Node (`gantry gateway`). Build from the repository root:
#   docker build -f infra/docker/gateway.Dockerfile -t gantry-gateway .
#   docker run -p 8787:8787 -v gantry-data:/var/lib/gantry gantry-gateway

ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/* \
 # package.json's allowScripts needs npm 11 (Node 20 ships npm 10).
 && npm install -g npm@11 --no-audit --no-fund
WORKDIR /opt/gantry
COPY package.json package-lock.json ./
# The gateway runs no inference: never fetch onnxruntime's CUDA libraries here.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force
COPY tsconfig.json ./
COPY bin ./bin
COPY cli ./cli
COPY gateway ./gateway
COPY gpu-agent ./gpu-agent
COPY shared ./shared

FROM ${NODE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o node -g node -m 0750 /var/lib/gantry
COPY --from=build /opt/gantry /opt/gantry
RUN ln -s /opt/gantry/bin/gantry.js /usr/local/bin/gantry

ENV NODE_ENV=production \
    GANTRY_HOST=0.0.0.0 \
    PORT=8787 \
    GANTRY_DATA_DIR=/var/lib/gantry
WORKDIR /opt/gantry
VOLUME ["/var/lib/gantry"]
EXPOSE 8787
# The official image's unprivileged user (uid 1000).
USER node
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "gantry"]
CMD ["gateway"]

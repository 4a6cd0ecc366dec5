#!/usr/bin/env bash
# Installs the Gantry GPU agent on a GPU host as the systemd service gantry-agent.
# Idempotent: a second run with the same settings changes nothing. Run with --help.
set -euo pipefail
umask 022

readonly PROG=${0##*/}
readonly SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly UNIT_NAME=gantry-agent.service
readonly UNIT_TEMPLATE=$SCRIPT_DIR/$UNIT_NAME
# The agent's default drain; the unit's TimeoutStopSec (90) must stay above it.
readonly DRAIN_TIMEOUT_SECONDS=60
# What the agent needs from a checkout; tests, benchmarks and infra stay behind.
readonly APP_PATHS=(package.json package-lock.json tsconfig.json bin cli gateway gpu-agent shared)
readonly STEPS=8

usage() {
  cat <<EOF
Usage: $PROG [options]

Installs the Gantry GPU agent as the systemd service gantry-agent: creates the user
"gantry", copies the agent to /opt/gantry, installs its Node dependencies and the CUDA 12
provider libraries, writes /etc/gantry/agent.env (mode 0600), installs and starts the unit.
Running it again with the same settings changes nothing; with new settings or a newer
checkout it updates what changed and restarts the agent (which drains first).

Required settings (a flag, else the environment, else the existing /etc/gantry/agent.env):
  --gateway URL        GANTRY_GATEWAY_URL   the gateway agents report to (http or https)
  --token TOKEN        GANTRY_AGENT_TOKEN   the gateway's agent token; prefer the environment
                                            variable: a flag shows in the process list
Optional settings:
  --queue URL          GANTRY_QUEUE_URL     only when the gateway's queue is a broker (amqp://,
                                            sqs://, redis://, nats://); with the sql queue the
                                            agent takes its jobs from the gateway: --queue ""
                                            removes one an earlier run wrote
  --models LIST        GANTRY_MODELS        models to serve, comma-separated (ocr)
  --slots N            GANTRY_SLOTS         runner processes, so jobs at once (1)

Options:
  --source DIR         Gantry checkout to install (default: the one this script is in)
  --prefix DIR         install under DIR instead of / (or GANTRY_INSTALL_ROOT); no users
                       are created and systemctl only enables the unit inside DIR
  --cpu-only           skip the CUDA provider download; the agent runs on CPU
  --skip-npm           skip npm ci and the CUDA step (node_modules managed elsewhere)
  --no-systemctl       do not call systemctl (containers, image builds, tests)
  --dry-run            print what would be done and change nothing
  -h, --help           show this help

Example:
  sudo GANTRY_AGENT_TOKEN=... $PROG --gateway https://gantry.example.com \\
    --queue amqp://gantry:secret@rabbit.example.com:5672/gantry --slots 2
(sudo drops most of the environment; keep the variable on the sudo command line as shown.)
EOF
}

die() {
  printf '%s: %s\n' "$PROG" "$1" >&2
  exit "${2:-1}"
}
usage_error() { die "$1 (see $PROG --help)" 2; }

# ---------------------------------------------------------------- options
flag_gateway="" flag_queue="" flag_token="" flag_models="" flag_slots=""
queue_given=0 # --queue "" is given: it removes a queue URL an earlier run wrote
source_dir="$SCRIPT_DIR/../.."
root=${GANTRY_INSTALL_ROOT:-/}
dry_run=0 cpu_only=0 skip_npm=0 use_systemctl=1

# --name=value becomes --name value, so each option is handled once below.
args=()
for arg in "$@"; do
  case $arg in
    --*=*) args+=("${arg%%=*}" "${arg#*=}") ;;
    *) args+=("$arg") ;;
  esac
done
set -- ${args[@]+"${args[@]}"}

while (($# > 0)); do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --gateway | --queue | --token | --models | --slots | --source | --prefix)
      (($# >= 2)) || usage_error "$1 needs a value"
      case $1 in
        --gateway) flag_gateway=$2 ;;
        --queue) flag_queue=$2 queue_given=1 ;;
        --token) flag_token=$2 ;;
        --models) flag_models=$2 ;;
        --slots) flag_slots=$2 ;;
        --source) source_dir=$2 ;;
        --prefix) root=$2 ;;
      esac
      shift 2
      ;;
    --cpu-only) cpu_only=1 && shift ;;
    --skip-npm) skip_npm=1 && shift ;;
    --no-systemctl) use_systemctl=0 && shift ;;
    --dry-run) dry_run=1 && shift ;;
    *) usage_error "unknown option: $1" ;;
  esac
done

[[ $root == /* ]] || usage_error "--prefix must be an absolute path (got \"$root\")"
root=${root%/}                     # "" for /, so "$root/etc" is always right
readonly ROOT=$root
readonly APP_DIR=$ROOT/opt/gantry
readonly CONFIG_DIR=$ROOT/etc/gantry
readonly ENV_FILE=$CONFIG_DIR/agent.env
readonly CACHE_DIR=$ROOT/var/cache/gantry
readonly UNIT_DIR=$ROOT/etc/systemd/system
readonly SERVICE_USER=gantry

# ---------------------------------------------------------------- settings
# A flag wins over the environment, which wins over the file an earlier run wrote, so an
# upgrade is just `sudo ./install.sh`. The file is parsed, never sourced.
declare -A existing=()
if [[ -r $ENV_FILE ]]; then
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^GANTRY_[A-Z_]+= ]] || continue
    existing[${line%%=*}]=${line#*=}
  done <"$ENV_FILE"
fi

pick() { # flag value, variable name → the setting's value, or ""
  local from_flag=$1 name=$2
  if [[ -n $from_flag ]]; then
    printf '%s' "$from_flag"
  elif [[ -n ${!name:-} ]]; then
    printf '%s' "${!name}"
  else
    printf '%s' "${existing[$name]:-}"
  fi
}
gateway_url=$(pick "$flag_gateway" GANTRY_GATEWAY_URL)
if ((queue_given)); then
  queue_url=$flag_queue
else
  queue_url=$(pick "" GANTRY_QUEUE_URL)
fi
agent_token=$(pick "$flag_token" GANTRY_AGENT_TOKEN)
models=$(pick "$flag_models" GANTRY_MODELS)
slots=$(pick "$flag_slots" GANTRY_SLOTS)
models=${models:-ocr}
slots=${slots:-1}

missing=()
[[ -n $gateway_url ]] || missing+=("GANTRY_GATEWAY_URL (--gateway)")
[[ -n $agent_token ]] || missing+=("GANTRY_AGENT_TOKEN (environment variable or --token)")
if ((${#missing[@]} > 0)); then
  {
    printf '%s: missing required settings:\n' "$PROG"
    printf '  %s\n' "${missing[@]}"
    printf 'Nothing was changed. See %s --help.\n' "$PROG"
  } >&2
  exit 2
fi

problems=()
# Values go unquoted into a systemd EnvironmentFile: no whitespace, quotes or backslashes.
for pair in "GANTRY_GATEWAY_URL=$gateway_url" "GANTRY_QUEUE_URL=$queue_url" \
  "GANTRY_AGENT_TOKEN=$agent_token" "GANTRY_MODELS=$models" "GANTRY_SLOTS=$slots"; do
  if [[ ${pair#*=} =~ [[:space:]\"\'\\] ]]; then
    problems+=("${pair%%=*} must not contain whitespace, quotes or backslashes")
  fi
done
[[ $gateway_url =~ ^https?://[^/]+ ]] || problems+=("GANTRY_GATEWAY_URL must be an http(s) URL (got \"$gateway_url\")")
[[ $models =~ ^[a-z0-9][a-z0-9._-]*(,[a-z0-9][a-z0-9._-]*)*$ ]] ||
  problems+=("GANTRY_MODELS must be a comma list of model ids such as ocr (got \"$models\")")
if [[ ! $slots =~ ^[1-9][0-9]*$ ]] || ((slots > 64)); then
  problems+=("GANTRY_SLOTS must be a whole number from 1 to 64 (got \"$slots\")")
fi
if ((${#problems[@]} > 0)); then
  {
    printf '%s: invalid settings:\n' "$PROG"
    printf '  %s\n' "${problems[@]}"
    printf 'Nothing was changed.\n'
  } >&2
  exit 2
fi
if [[ -n $flag_token ]]; then
  echo "note: --token shows in the process list; prefer GANTRY_AGENT_TOKEN in the environment"
fi

# ---------------------------------------------------------------- pre-flight
# Everything that can refuse the install is checked here, before anything is touched.
source_dir=$(cd "$source_dir" 2>/dev/null && pwd) || die "--source: no such directory"
[[ -f $source_dir/package.json && -f $source_dir/bin/gantry-agent.js ]] ||
  die "$source_dir is not a Gantry checkout (no package.json and bin/gantry-agent.js)"
[[ -f $UNIT_TEMPLATE ]] || die "unit file $UNIT_TEMPLATE is missing"
if [[ -z $ROOT && $dry_run -eq 0 && $EUID -ne 0 ]]; then
  die "installing to / needs root: run it with sudo (or try --dry-run, or --prefix DIR)"
fi

node_bin=$(command -v node) || die "Node.js 20+ is required: install it system-wide (distro package or NodeSource)"
node_version=$("$node_bin" -p process.versions.node) # one start: node is slow to start on small hosts
((${node_version%%.*} >= 20)) || die "Node.js 20+ is required; $node_bin is v$node_version"
if [[ -z $ROOT && $node_bin =~ ^/(root|home)/ ]]; then
  die "$node_bin is under a home directory, which the service cannot see (ProtectHome=yes); install Node.js system-wide"
fi
if ((skip_npm == 0)); then
  command -v npm >/dev/null || die "npm is required (it comes with Node.js)"
fi
if ((use_systemctl == 1)); then
  command -v systemctl >/dev/null || die "systemctl not found: is this a systemd host? (--no-systemctl skips it)"
fi

if [[ -z $ROOT ]]; then
  if command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null); then
    echo "GPU: ${gpus//$'\n'/; }"
    [[ -e /dev/nvidia-uvm ]] || echo "warning: /dev/nvidia-uvm is missing; enable nvidia-persistenced (or run nvidia-modprobe -u -c=0 at boot): the hardened service cannot load modules"
  else
    echo "warning: no NVIDIA driver found (nvidia-smi): the agent will run on CPU"
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- helpers
changes=0 step=0
code_changed=0 config_changed=0
step() {
  step=$((step + 1))
  printf '[%d/%d] %s\n' "$step" "$STEPS" "$1"
}
say() { printf '      %s\n' "$1"; }
changed() {
  changes=$((changes + 1))
  if ((dry_run)); then say "would $1"; else say "$2"; fi
}
mode_of() { stat -c %a "$1"; }

# Copies src to dst with mode unless dst already has that content and mode.
# Prints nothing; returns 0 when it copied (or would), 1 when dst was up to date.
sync_file() {
  local src=$1 dst=$2 mode=$3
  if [[ -f $dst ]] && cmp -s "$src" "$dst" && [[ $(mode_of "$dst") == "${mode#0}" ]]; then
    return 1
  fi
  ((dry_run)) && return 0
  mkdir -p "$(dirname "$dst")"
  # Same-directory temp file and rename: readers never see a half-written file.
  local partial
  partial=$(mktemp "$dst.XXXXXX")
  cat "$src" >"$partial"
  chmod "$mode" "$partial"
  mv -f "$partial" "$dst"
}

# ---------------------------------------------------------------- 1. user
step "Service user '$SERVICE_USER'"
if [[ -n $ROOT ]]; then
  say "skipped: users are only created when installing to / (--prefix $ROOT)"
elif id -u "$SERVICE_USER" >/dev/null 2>&1; then
  say "unchanged: user $SERVICE_USER exists"
else
  ((dry_run)) || useradd --system --user-group --no-create-home --home-dir /var/lib/gantry \
    --shell /usr/sbin/nologin --comment "Gantry GPU agent" "$SERVICE_USER"
  changed "create system user $SERVICE_USER" "created system user $SERVICE_USER"
fi

# ---------------------------------------------------------------- 2. application files
step "Agent files in ${APP_DIR:-/}"
created=0 updated=0 same=0
for path in "${APP_PATHS[@]}"; do
  [[ -e $source_dir/$path ]] || continue
  while IFS= read -r -d '' file; do
    rel=${file#"$source_dir"/}
    mode=0644
    [[ -x $file ]] && mode=0755
    existed=0
    [[ -e $APP_DIR/$rel ]] && existed=1
    if sync_file "$file" "$APP_DIR/$rel" "$mode"; then
      if ((existed)); then updated=$((updated + 1)); else created=$((created + 1)); fi
    else
      same=$((same + 1))
    fi
  done < <(find "$source_dir/$path" -name node_modules -prune -o -type f -print0)
done
if ((created + updated > 0)); then
  code_changed=1
  changed "copy $created new and $updated changed file(s) ($same unchanged)" \
    "copied $created new and $updated changed file(s) ($same unchanged)"
else
  say "unchanged: $same file(s) up to date"
fi

# ---------------------------------------------------------------- 3. npm ci
step "Node dependencies (npm ci --omit=dev)"
lock_hash=$(sha256sum "$source_dir/package-lock.json" 2>/dev/null | cut -d' ' -f1 || true)
wanted_stamp="$lock_hash node-v$node_version"
stamp=$APP_DIR/node_modules/.gantry-npm-ci
if ((skip_npm)); then
  say "skipped (--skip-npm)"
elif [[ -f $stamp && $(<"$stamp") == "$wanted_stamp" ]]; then
  say "unchanged: node_modules matches package-lock.json"
else
  if ((dry_run == 0)); then
    # No lifecycle script runs: the checkout's `prepare` builds the SDK and console with
    # devDependencies and sources this copy has not, and the CUDA libraries are fetched on
    # purpose in the next step. The native builds the agent needs are then run on purpose
    # (better-sqlite3 for a sqlite: queue, esbuild for tsx), as in the Docker images.
    (cd "$APP_DIR" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund &&
      npm rebuild better-sqlite3 esbuild)
    mkdir -p "$(dirname "$stamp")" # npm makes no node_modules for a lock without packages
    printf '%s\n' "$wanted_stamp" >"$stamp"
  fi
  code_changed=1
  changed "run npm ci --omit=dev in $APP_DIR" "installed node_modules (npm ci --omit=dev)"
fi

# ---------------------------------------------------------------- 4. CUDA provider
step "CUDA 12 provider libraries for onnxruntime-node"
ort_dir=$APP_DIR/node_modules/onnxruntime-node
if ((cpu_only)); then
  say "skipped (--cpu-only): the agent will run on CPU"
elif ((skip_npm)); then
  say "skipped (--skip-npm)"
elif [[ $(uname -m) != x86_64 ]]; then
  say "skipped: onnxruntime-node ships CUDA providers for linux x64 only; the agent will run on CPU"
elif [[ -d $ort_dir/bin ]] && find "$ort_dir/bin" -name libonnxruntime_providers_cuda.so | grep -q .; then
  say "unchanged: libonnxruntime_providers_cuda.so is installed"
else
  if ((dry_run == 0)); then
    (cd "$APP_DIR" && ONNXRUNTIME_NODE_INSTALL=cuda12 "$node_bin" node_modules/onnxruntime-node/script/install)
    find "$ort_dir/bin" -name libonnxruntime_providers_cuda.so | grep -q . ||
      die "the CUDA provider install finished but libonnxruntime_providers_cuda.so is missing"
  fi
  code_changed=1
  changed "run ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install" \
    "installed the CUDA 12 provider libraries"
fi

# ---------------------------------------------------------------- 5. cache directory
step "Cache directory ${CACHE_DIR}"
owner_ok=1
if [[ -z $ROOT && -d $CACHE_DIR ]] && id -u "$SERVICE_USER" >/dev/null 2>&1; then
  [[ $(stat -c %U "$CACHE_DIR") == "$SERVICE_USER" ]] || owner_ok=0
fi
if [[ -d $CACHE_DIR && $(mode_of "$CACHE_DIR") == 750 && $owner_ok -eq 1 ]]; then
  say "unchanged: exists with mode 0750"
else
  if ((dry_run == 0)); then
    mkdir -p "$CACHE_DIR"
    chmod 0750 "$CACHE_DIR"
    [[ -z $ROOT ]] && chown "$SERVICE_USER:$SERVICE_USER" "$CACHE_DIR"
  fi
  changed "create $CACHE_DIR (mode 0750, owned by $SERVICE_USER)" "created $CACHE_DIR (mode 0750)"
fi

# ---------------------------------------------------------------- 6. settings
step "Settings ${ENV_FILE} (mode 0600)"
(
  umask 077
  cat >"$tmp/agent.env" <<EOF
# Written by infra/systemd/install.sh; run it again to change these, or put extra
# settings (GANTRY_THREADS, GANTRY_LOG_LEVEL, ...) in /etc/gantry/agent.local.env.
GANTRY_GATEWAY_URL=$gateway_url
# Empty: jobs come from the gateway (its sql queue); a broker's URL otherwise.
GANTRY_QUEUE_URL=$queue_url
GANTRY_AGENT_TOKEN=$agent_token
GANTRY_MODELS=$models
GANTRY_SLOTS=$slots
GANTRY_DRAIN_TIMEOUT_SECONDS=$DRAIN_TIMEOUT_SECONDS
EOF
)
if [[ ! -d $CONFIG_DIR ]]; then
  ((dry_run)) || mkdir -p -m 0750 "$CONFIG_DIR"
fi
if sync_file "$tmp/agent.env" "$ENV_FILE" 0600; then
  config_changed=1
  changed "write $ENV_FILE (gateway $gateway_url, models $models, slots $slots; token not shown)" \
    "wrote $ENV_FILE"
else
  say "unchanged: $ENV_FILE has these settings"
fi

# ---------------------------------------------------------------- 7. unit
step "systemd unit ${UNIT_DIR}/$UNIT_NAME"
# The unit runs /usr/bin/node; point it at this host's node when that lives elsewhere.
sed "s|^ExecStart=/usr/bin/node |ExecStart=$node_bin |" "$UNIT_TEMPLATE" >"$tmp/$UNIT_NAME"
unit_changed=0
if sync_file "$tmp/$UNIT_NAME" "$UNIT_DIR/$UNIT_NAME" 0644; then
  unit_changed=1
  changed "install $UNIT_DIR/$UNIT_NAME" "installed $UNIT_DIR/$UNIT_NAME"
else
  say "unchanged: the unit is up to date"
fi

# ---------------------------------------------------------------- 8. systemctl
step "Enable and start gantry-agent"
if ((use_systemctl == 0)); then
  say "skipped (--no-systemctl); later: systemctl daemon-reload && systemctl enable --now gantry-agent"
elif [[ -n $ROOT ]]; then
  if [[ -L $UNIT_DIR/multi-user.target.wants/$UNIT_NAME ]]; then
    say "unchanged: enabled in $ROOT"
  else
    ((dry_run)) || systemctl --root="$ROOT" enable "$UNIT_NAME"
    changed "enable $UNIT_NAME inside $ROOT" "enabled $UNIT_NAME inside $ROOT"
  fi
else
  if ((unit_changed)); then
    ((dry_run)) || systemctl daemon-reload
    changed "reload systemd (daemon-reload)" "reloaded systemd"
  fi
  if ! systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
    ((dry_run)) || systemctl enable --quiet "$UNIT_NAME"
    changed "enable $UNIT_NAME" "enabled $UNIT_NAME"
  fi
  if ! systemctl is-active --quiet "$UNIT_NAME"; then
    ((dry_run)) || systemctl start "$UNIT_NAME"
    changed "start $UNIT_NAME" "started $UNIT_NAME"
  elif ((code_changed || config_changed || unit_changed)); then
    # A restart is a SIGTERM first: in-flight jobs drain before the new version starts.
    ((dry_run)) || systemctl restart "$UNIT_NAME"
    changed "restart $UNIT_NAME (it drains in-flight jobs first)" "restarted $UNIT_NAME"
  else
    say "unchanged: $UNIT_NAME is enabled and running"
  fi
fi

# ---------------------------------------------------------------- summary
if ((dry_run)); then
  echo "Dry run: $changes change(s) would be made; nothing was changed."
elif ((changes == 0)); then
  echo "Nothing changed: gantry-agent is installed as configured."
else
  echo "Done: $changes change(s)."
  if [[ -z $ROOT ]]; then
    echo "Follow the agent with: journalctl -u gantry-agent -f (it logs the execution provider: cuda or cpu)"
  fi
fi

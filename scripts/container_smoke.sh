#!/usr/bin/env bash
# Build the container image and check it end to end (docs/docker.md). Not part of the test suite: minutes.
#
#   scripts/container_smoke.sh
#
# Checks, in order: the image runs as non-root and no secret is in its history; `teleton doctor` is green;
# `teleton chat` with piped input answers through a fake model on the host's loopback; `teleton start` over the
# loopback transport answers, is healthy, and a kill of the container then a restart answers what was owed;
# SIGTERM stops it cleanly; the data survives down/up on the volume; --read-only works; the image size.
#
# Environment:
#   ENGINE=podman|docker     default: podman when installed, else docker
#   BASE_IMAGE=IMAGE         build from this base; default python:3.11-slim, and when that cannot be pulled a
#                            local Debian bookworm + Python 3.11 base made with mmdebstrap (said so)
#   SMOKE_VOICE=0            skip the second build with EXTRAS=voice (its size)
#   SMOKE_GIT_REF=REF        build from `git archive REF` (plus this tree's container files), not the work tree
#   KEEP=1                   keep the image and the volume at the end
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${IMAGE:-localhost/teleton:smoke}
IMAGE_VOICE=${IMAGE}-voice
NAME=teleton-smoke
VOLUME=teleton-smoke-data
SOCK=/var/lib/teleton/loopback/chat.sock  # its record of what the chats received lies beside it
WORK=$(mktemp -d /tmp/teleton-smoke.XXXXXX)
FAILED=0
FAKE_PID=

say() { printf '%s\n' "$*"; }
pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; FAILED=1; }
die() { fail "$*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- the engine ----------------------------------------------------------------------------------------
if [[ -z ${ENGINE:-} ]]; then
  if command -v podman >/dev/null; then ENGINE=podman; else ENGINE=docker; fi
fi
command -v "$ENGINE" >/dev/null || { echo "neither podman nor docker is installed" >&2; exit 2; }
E=("$ENGINE")
BUILD_FORMAT=()
[[ $ENGINE == podman ]] && BUILD_FORMAT=(--format docker)   # HEALTHCHECK is kept in the docker format only

cleanup() {
  set +e
  "${E[@]}" rm -f -t 0 "$NAME" "$NAME-ro" >/dev/null 2>&1
  if [[ -n ${COMPOSE:-} ]]; then
    "${COMPOSE[@]}" down >/dev/null 2>&1
    "${E[@]}" network rm -f teleton-smoke_default >/dev/null 2>&1
  fi
  [[ -n $FAKE_PID ]] && kill "$FAKE_PID" 2>/dev/null
  if [[ ${KEEP:-0} != 1 ]]; then
    "${E[@]}" volume rm -f "$VOLUME" teleton-smoke_teleton-data >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the base image ----------------------------------------------------------------------------------------
LOCAL_BASE=localhost/teleton-base:bookworm
local_base() {
  # Debian bookworm's own packages: Python 3.11 with venv and pip, CA certificates; no docs, no man pages.
  if "${E[@]}" image exists "$LOCAL_BASE" 2>/dev/null || "${E[@]}" image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    say "base: $LOCAL_BASE (local, made earlier with mmdebstrap)"
    return
  fi
  command -v mmdebstrap >/dev/null || { echo "no base image: install mmdebstrap or set BASE_IMAGE" >&2; exit 2; }
  say "base: building $LOCAL_BASE with mmdebstrap from Debian bookworm's packages"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$WORK/base.tar" http://deb.debian.org/debian
  "${E[@]}" import --change 'CMD ["/usr/bin/python3"]' "$WORK/base.tar" "$LOCAL_BASE" >/dev/null
  rm -f "$WORK/base.tar"
}
if [[ -n ${BASE_IMAGE:-} ]]; then
  say "base: $BASE_IMAGE (BASE_IMAGE)"
elif timeout 90 "${E[@]}" pull -q docker.io/library/python:3.11-slim >/dev/null 2>&1; then
  BASE_IMAGE=docker.io/library/python:3.11-slim
  say "base: $BASE_IMAGE (pulled)"
else
  say "base: docker.io/library/python:3.11-slim cannot be pulled here; building from a local base instead"
  local_base
  BASE_IMAGE=$LOCAL_BASE
fi

# ---- what this machine needs to run containers ---------------------------------------------------------------
# A sandbox may refuse crun's cgroup setup (a cgroup v1/v2 hybrid) or raising rlimits (no CAP_SYS_RESOURCE).
# Only when the defaults fail: runc, and rlimits no higher than this shell's. (Without systemd, podman also
# logs that it cannot schedule HEALTHCHECK timers: those lines go to a log; `podman healthcheck run` is used.)
SANDBOX_FLAGS="none (the engine's defaults work)"
if [[ $ENGINE == podman ]] && ! "${E[@]}" run --rm "$BASE_IMAGE" true >"$WORK/probe.log" 2>&1; then
  say "podman's defaults cannot run a container here: $(tail -1 "$WORK/probe.log")"
  nofile=$(ulimit -n)
  cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF=$WORK/containers.conf
  if ! "${E[@]}" run --rm "$BASE_IMAGE" true >"$WORK/probe.log" 2>&1; then
    die "podman cannot run a container, even with runc and lower rlimits: $(tail -1 "$WORK/probe.log")"
  fi
  SANDBOX_FLAGS="runtime=runc, ulimits nofile=$nofile:$nofile nproc=4096:4096 (containers.conf)"
fi
say "sandbox flags: $SANDBOX_FLAGS"

# ---- the build: pip's index and CA as build secrets, never build arguments ----------------------------------
PIP=$ROOT/.venv/bin/pip
[[ -x $PIP ]] || PIP="python3 -m pip"
SECRETS=()
ca=${PIP_CERT:-$($PIP config get global.cert 2>/dev/null || true)}
ca=${ca:-${SSL_CERT_FILE:-}}
if [[ -n $ca && -s $ca ]]; then
  SECRETS+=(--secret "id=pip_ca,src=$ca")
  say "pip: CA bundle $ca (a build secret)"
fi
index=${PIP_INDEX_URL:-$($PIP config get global.index-url 2>/dev/null || true)}
extra=${PIP_EXTRA_INDEX_URL:-$($PIP config get global.extra-index-url 2>/dev/null || true)}
extra=$(tr ' ' '\n' <<<"$extra" | grep -E '^https?://' | tr '\n' ' ' || true)  # a file:// index is this host's
if [[ -n $index || -n ${extra// /} ]]; then
  (umask 077; { echo "[global]"; [[ -n $index ]] && echo "index-url = $index"
    [[ -n ${extra// /} ]] && echo "extra-index-url = $extra"; } >"$WORK/pip.conf")
  SECRETS+=(--secret "id=pip_conf,src=$WORK/pip.conf")
  say "pip: index settings from this machine's pip config (a build secret)"
fi

CONTEXT=$ROOT
if [[ -n ${SMOKE_GIT_REF:-} ]]; then
  CONTEXT=$WORK/context
  mkdir -p "$CONTEXT"
  git -C "$ROOT" archive "$SMOKE_GIT_REF" | tar -x -C "$CONTEXT"
  cp "$ROOT/Containerfile" "$ROOT/.dockerignore" "$CONTEXT/"
  say "context: git archive $SMOKE_GIT_REF $(git -C "$ROOT" rev-parse --short "$SMOKE_GIT_REF") with this tree's Containerfile"
fi

build() {  # build TAG [EXTRAS]
  local start
  start=$(now)
  if ! "${E[@]}" build "${BUILD_FORMAT[@]}" -f "$ROOT/Containerfile" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --build-arg "EXTRAS=${2:-}" "${SECRETS[@]}" -t "$1" "$CONTEXT" >"$WORK/build-$2.log" 2>&1; then
    tail -20 "$WORK/build-$2.log"
    die "build $1 (EXTRAS=${2:-})"
  fi
  pass "build $1 (EXTRAS=${2:-none}) in $(since "$start") s"
}
size_mb() { "${E[@]}" image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.0f", $1 / 1e6 }'; }

build "$IMAGE" ""

# ---- the fake model, on the host's loopback; the containers share the host's network -------------------------
# (compose's containers are on its bridge network: they reach it as host.containers.internal, hence 0.0.0.0)
PY=$ROOT/.venv/bin/python
[[ -x $PY ]] || PY=python3
"$PY" "$ROOT/scripts/container_fake_model.py" --url-file "$WORK/url" --log "$WORK/model.jsonl" --slow-s 120 \
  --host 0.0.0.0 >"$WORK/fake.log" 2>&1 &
FAKE_PID=$!
for _ in $(seq 100); do [[ -s $WORK/url ]] && break; sleep 0.1; done
[[ -s $WORK/url ]] || die "the fake model did not start: $(cat "$WORK/fake.log")"
URL=$(cat "$WORK/url")
say "fake model: $URL"

RUN=("${E[@]}" run --network=host -v "$VOLUME:/var/lib/teleton")
ONCE=(--rm --no-healthcheck)  # a one-off command needs no health check (podman's timers need systemd)
"${E[@]}" volume rm -f "$VOLUME" >/dev/null 2>&1 || true

# 1. not root, and no secret in the image's history
uid=$("${E[@]}" run "${ONCE[@]}" --entrypoint id "$IMAGE" -u)
user=$("${E[@]}" image inspect --format '{{.Config.User}}' "$IMAGE")
if [[ $uid != 0 && $user == 10001:10001 ]]; then pass "runs as non-root (uid $uid, image user $user)"
else fail "runs as non-root (uid $uid, image user $user)"; fi
"${E[@]}" history --no-trunc --format '{{.CreatedBy}}' "$IMAGE" >"$WORK/history.txt"
inside=$("${E[@]}" run "${ONCE[@]}" --entrypoint sh "$IMAGE" -c \
  'find / -xdev \( -name pip.conf -o -path "/run/secrets/*" -o -name "*.session" -o -name teleton.env \) -print 2>/dev/null || true')
if grep -Eiq 'sk-ant|api_key=|token=|password|index-url|BEGIN CERT' "$WORK/history.txt" || [[ -n $inside ]]; then
  fail "no secret in the image's history"; grep -Ei 'sk-ant|api_key=|token=|password|index-url' "$WORK/history.txt"
  printf '%s\n' "$inside"
else pass "no secret in the image: history ($(wc -l <"$WORK/history.txt") steps) names none; no pip.conf, /run/secrets or session in its files"; fi

# 2. setup, then doctor
"${RUN[@]}" "${ONCE[@]}" "$IMAGE" setup --non-interactive --mode terminal --provider ollama --model qwen3:8b \
  --base-url "$URL" >"$WORK/setup.log" 2>&1 || { cat "$WORK/setup.log"; die "setup"; }
loopdir() { "${E[@]}" run "${ONCE[@]}" -v "$1:/var/lib/teleton" --entrypoint mkdir "$IMAGE" -p -m 700 "${SOCK%/*}"; }
loopdir "$VOLUME"
if "${RUN[@]}" "${ONCE[@]}" "$IMAGE" doctor >"$WORK/doctor.log" 2>&1 && ! grep -q '^FAIL' "$WORK/doctor.log"; then
  pass "doctor green ($(grep -c '^OK' "$WORK/doctor.log") OK, $(grep -c '^SKIP' "$WORK/doctor.log") SKIP, 0 FAIL)"
else cat "$WORK/doctor.log"; fail "doctor green"; fi

# 3. chat with piped input
answer=$(printf 'hello from a pipe\n' | "${RUN[@]}" "${ONCE[@]}" -i "$IMAGE" chat 2>"$WORK/chat.err" || true)
if grep -q 'pong: hello from a pipe' <<<"$answer"; then pass "chat with piped input answers (pong: hello from a pipe)"
else printf '%s\n' "$answer"; cat "$WORK/chat.err"; fail "chat with piped input answers"; fi

# 4. start over the loopback transport; ready time; healthy; a kill and a restart answer what was owed
loop() { "${E[@]}" exec -i "$1" python3 - "${@:2}" <"$ROOT/scripts/container_loopback.py"; }
ready() {  # ready CONTAINER START: seconds until `teleton status` exits 0
  local t
  for _ in $(seq 600); do
    if "${E[@]}" exec "$1" teleton status >/dev/null 2>&1; then since "$2"; return 0; fi
    t=$("${E[@]}" inspect --format '{{.State.Running}}' "$1" 2>/dev/null || echo false)
    [[ $t == true ]] || return 1
    sleep 0.2
  done
  return 1
}
START=("${RUN[@]}" -d --init --name "$NAME" -e TELETON_TELEGRAM__OWNER_ID=1001 "$IMAGE" start --transport "loopback:$SOCK")
t0=$(now)
"${START[@]}" >/dev/null 2>"$WORK/start.err" || { cat "$WORK/start.err"; die "start"; }
if secs=$(ready "$NAME" "$t0"); then
  READY=$secs
  OWN=$("${E[@]}" logs "$NAME" 2>/dev/null | grep -o 'teleton ready in [0-9.]*s' | head -1 | grep -o '[0-9.]*s' || true)
  pass "start: ready in $secs s from \`run -d\` to \`teleton status\` exit 0 (the daemon's own count: ready in ${OWN:-?})"
else "${E[@]}" logs "$NAME" | tail -20; die "start: ready"; fi
reply=$(loop "$NAME" --timeout 60 send "$SOCK" 1 "ping over the loopback" --wait 2>&1 || true)
if [[ $reply == "pong: ping over the loopback" ]]; then pass "start over the loopback transport answers ($reply)"
else fail "start over the loopback transport answers: $reply"; fi
if [[ $ENGINE == podman ]]; then
  if "${E[@]}" healthcheck run "$NAME" >/dev/null 2>&1; then pass "HEALTHCHECK (teleton status): healthy"
  else fail "HEALTHCHECK (teleton status): healthy"; fi
fi
loop "$NAME" --timeout 30 send "$SOCK" 2 "SLOW tell me a long story" >/dev/null || fail "owed message archived"
for _ in $(seq 300); do grep -q '"said": "SLOW' "$WORK/model.jsonl" 2>/dev/null && break; sleep 0.1; done
"${E[@]}" kill "$NAME" >/dev/null 2>&1   # SIGKILL, mid-turn: the model has the message, nobody has an answer
"${E[@]}" wait "$NAME" >/dev/null 2>&1 || true
t0=$(now)
"${E[@]}" start "$NAME" >/dev/null 2>"$WORK/start.err"
got=$(loop "$NAME" --timeout 90 received "$SOCK" 2 2>&1 || true)
owed=$(grep -c 'pong: SLOW tell me a long story' <<<"$got" || true)
if [[ $owed == 1 ]]; then pass "kill -9 mid-turn, restart: the owed message answered once, $(since "$t0") s after the restart"
else printf '%s\n' "$got"; "${E[@]}" logs --tail 20 "$NAME"; fail "kill and restart answer what was owed"; fi
t0=$(now)
"${E[@]}" stop -t 30 "$NAME" >/dev/null 2>>"$WORK/engine.log"
code=$("${E[@]}" inspect --format '{{.State.ExitCode}}' "$NAME")
took=$(since "$t0")
if [[ $code == 0 ]] && awk -v t="$took" 'BEGIN { exit !(t < 30) }'; then pass "SIGTERM stops cleanly (exit $code in $took s)"
else fail "SIGTERM stops cleanly (exit $code in $took s)"; fi
messages() {  # messages VOLUME: how many messages the archive on that volume holds
  "${E[@]}" run "${ONCE[@]}" -v "$1:/var/lib/teleton" "$IMAGE" feed stats --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["messages"])'
}
"${E[@]}" rm -f "$NAME" >/dev/null 2>>"$WORK/engine.log"

# 5. down / up: the data survives on the volume
if [[ $ENGINE == podman ]] && command -v podman-compose >/dev/null; then
  COMPOSE=(podman-compose -p teleton-smoke -f "$ROOT/compose.yaml" -f "$WORK/compose.smoke.yaml")
elif [[ $ENGINE == docker ]] && docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose -p teleton-smoke -f "$ROOT/compose.yaml" -f "$WORK/compose.smoke.yaml")
fi
if [[ -n ${COMPOSE:-} ]]; then
  # The project's compose.yaml as it is, on its own volume and network; this run adds the loopback transport
  # and the fake model's address from the bridge.
  DATA=teleton-smoke_teleton-data
  "${E[@]}" volume rm -f "$DATA" >/dev/null 2>&1 || true
  "${E[@]}" run "${ONCE[@]}" --network=host -v "$DATA:/var/lib/teleton" "$IMAGE" setup --non-interactive \
    --mode terminal --provider ollama --model qwen3:8b --base-url "$URL" >>"$WORK/setup.log" 2>&1 || die "setup"
  loopdir "$DATA"
  : >"$WORK/teleton.env"
  chmod 600 "$WORK/teleton.env"
  cat >"$WORK/compose.smoke.yaml" <<EOT
services:
  teleton:
    command: ["start", "--transport", "loopback:$SOCK"]
    environment:
      TELETON_TELEGRAM__OWNER_ID: "1001"
      TELETON_AGENT__BASE_URL: "http://host.containers.internal:${URL##*:}"
EOT
  # podman names the host so on a bridge network by itself; docker is told to.
  [[ $ENGINE == docker ]] && printf '    extra_hosts: ["host.containers.internal:host-gateway"]\n' >>"$WORK/compose.smoke.yaml"
  export TELETON_IMAGE=$IMAGE TELETON_ENV_FILE=$WORK/teleton.env
  updown() { "${COMPOSE[@]}" "$@" >>"$WORK/compose.log" 2>&1; }
  cid() { "${E[@]}" ps -q --filter label=com.docker.compose.project=teleton-smoke | head -1; }
  updown up -d || { tail -20 "$WORK/compose.log"; die "compose up"; }
  c=$(cid)
  ready "$c" "$(now)" >/dev/null || { tail -20 "$WORK/compose.log"; die "compose up: ready"; }
  ro=$("${E[@]}" inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$c")
  first=$(loop "$c" --timeout 60 send "$SOCK" 3 "remember the blue door" --wait 2>&1 || true)
  updown down
  before=$(messages "$DATA")
  updown up -d
  c=$(cid)
  ready "$c" "$(now)" >/dev/null || die "compose down/up: ready"
  reply=$(loop "$c" --timeout 60 send "$SOCK" 4 "are you still there" --wait 2>&1 || true)
  got=$(loop "$c" --timeout 30 received "$SOCK" 2 2>&1 || true)
  updown down
  after=$(messages "$DATA")
  how="compose down/up ($(basename "${COMPOSE[0]}"); its read-only root: $ro)"
else
  DATA=$VOLUME
  up() { "${RUN[@]}" -d --init --name "$NAME" -e TELETON_TELEGRAM__OWNER_ID=1001 "$IMAGE" start --transport "loopback:$SOCK" >/dev/null 2>>"$WORK/engine.log"
    ready "$NAME" "$(now)" >/dev/null || die "up: ready"; }
  up
  first=$(loop "$NAME" --timeout 60 send "$SOCK" 3 "remember the blue door" --wait 2>&1 || true)
  "${E[@]}" rm -f -t 30 "$NAME" >/dev/null 2>>"$WORK/engine.log"
  before=$(messages "$DATA")
  up
  reply=$(loop "$NAME" --timeout 60 send "$SOCK" 4 "are you still there" --wait 2>&1 || true)
  got=$(loop "$NAME" --timeout 30 received "$SOCK" 2 2>&1 || true)
  "${E[@]}" rm -f -t 30 "$NAME" >/dev/null 2>>"$WORK/engine.log"
  after=$(messages "$DATA")
  how="rm, then run again on the volume (no compose tool)"
fi
if [[ $first == "pong: remember the blue door" && $reply == "pong: are you still there" && $after -gt $before ]] &&
  grep -q 'blue door' <<<"$got"; then
  pass "data survives $how: $before archived messages after down, $after after up and one more turn"
else fail "data survives $how: replies '$first' '$reply', messages $before -> $after"; fi

# 6. a read-only root filesystem (and /tmp a tmpfs): chat, doctor and the daemon
RO=("${RUN[@]}" --read-only --tmpfs /tmp)
answer=$(printf 'read-only hello\n' | "${RO[@]}" "${ONCE[@]}" -i "$IMAGE" chat 2>/dev/null || true)
"${RO[@]}" "${ONCE[@]}" "$IMAGE" doctor >"$WORK/doctor-ro.log" 2>&1 && doc=ok || doc=failed
"${RO[@]}" -d --init --name "$NAME-ro" -e TELETON_TELEGRAM__OWNER_ID=1001 "$IMAGE" start --transport "loopback:$SOCK" >/dev/null 2>>"$WORK/engine.log"
ready "$NAME-ro" "$(now)" >/dev/null && reply=$(loop "$NAME-ro" --timeout 60 send "$SOCK" 4 "read-only ping" --wait 2>&1 || true)
"${E[@]}" rm -f -t 30 "$NAME-ro" >/dev/null 2>>"$WORK/engine.log"
if grep -q 'pong: read-only hello' <<<"$answer" && [[ $doc == ok && ${reply:-} == "pong: read-only ping" ]]; then
  pass "--read-only --tmpfs /tmp: doctor green, chat and the daemon answer"
else cat "$WORK/doctor-ro.log"; fail "--read-only: chat '$answer', doctor $doc, daemon '${reply:-}'"; fi

# 7. sizes
SIZE=$(size_mb "$IMAGE")
BASE_SIZE=$(size_mb "$BASE_IMAGE")
pass "image size: $SIZE MB (EXTRAS none; the base $BASE_IMAGE is $BASE_SIZE MB of it)"
if [[ ${SMOKE_VOICE:-1} != 0 ]]; then
  build "$IMAGE_VOICE" voice
  line=$("${RUN[@]}" "${ONCE[@]}" "$IMAGE_VOICE" doctor 2>/dev/null | grep 'Transcription' || true)
  if [[ $line == OK* ]]; then pass "EXTRAS=voice: doctor's transcription line OK (${line#OK*Transcription })"
  else fail "EXTRAS=voice: doctor's transcription line: $line"; fi
  pass "image size: $(size_mb "$IMAGE_VOICE") MB (EXTRAS=voice)"
  [[ ${KEEP:-0} == 1 ]] || "${E[@]}" rmi "$IMAGE_VOICE" >/dev/null 2>&1 || true
fi

say "start-to-ready: $READY s (the daemon's own: ${OWN:-?}); engine: $ENGINE $("${E[@]}" --version | awk '{print $NF}'); base: $BASE_IMAGE; sandbox flags: $SANDBOX_FLAGS"
if [[ $FAILED == 0 ]]; then say "all checks passed"; else say "some checks FAILED"; fi
exit "$FAILED"

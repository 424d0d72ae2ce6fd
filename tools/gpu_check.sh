#!/usr/bin/env bash
# One GPU check: builds Shardlight with CUDA, runs the whole test suite (the CUDA parity tests,
# the cuDNN-vs-own-kernel comparisons of tests/cuda/test_cuda_cudnn_parity.cpp and the memory test
# included), then the GPU benchmark and PyTorch's side of it, and writes a markdown report.
#
#   tools/gpu_check.sh [OUTDIR]        (default: $OUT, else ./gpu_check_out)
#
# Environment:
#   SL_GPU_CHECK_BUILD=DIR   build folder (default: build-gpu)
#   SL_GPU_CHECK_JOBS=N      parallel build jobs (default: the number of cores)
#   SL_GPU_CHECK_NO_BENCH=1  skip the benchmarks (build and tests only)
#   SL_GPU_CHECK_QUICK=1     small benchmark sizes
#   SL_GPU_CHECK_NO_TORCH=1  skip PyTorch's side of the benchmark
#   SL_GPU_CHECK_BUDGET_S=N  wall-clock budget of the whole script (default 450 s): every phase
#                            runs under `timeout` with what is left of it (the build keeps 150 s
#                            back for the tests and benchmarks), so the report is always written
#   SL_GPU_CHECK_CASE_TIMEOUT_S=N  limit of one test_cuda case in its own process (default 120)
#   SL_GPU_CHECK_ARCH=NN     -Dgpu_arch of the build (default: the first GPU's compute capability
#                            as a CUDA probe reports it, else 90)
#   SL_GPU_CHECK_PY_LIBS=1   take cuDNN / NCCL from the Python environment even when CUDA_HOME
#                            has them (tests the discovery on a machine that has both)
#   SL_GPU_CHECK_CARRY_ONLY=1  take Eigen / doctest from .carry even when the system has them
#   SL_GPU_CHECK_TARGETS="T..."  ninja targets to build (default: all; a dry run on a machine
#                            without a GPU can name a cheap one, e.g. tests/libsl_test_main.a)
#   CUDA_HOME                CUDA toolkit (default: the folder above nvcc's bin/, or
#                            /usr/local/cuda)
#
# What it finds by itself (each step is logged; env.txt lists what was looked at):
#   - meson: on PATH, else python3 -m mesonbuild, else a .carry/meson-*.whl (unpacked).
#   - Eigen and doctest headers: the system's, else .carry/eigen3 and .carry/doctest (the folder
#     holding Eigen/Core, and the one holding doctest/doctest.h or doctest.h). A pkg-config file
#     is generated for Eigen; a small pkg-config stand-in is used when pkg-config is missing.
#   - cuDNN and NCCL: CUDA_HOME's, else the Python environment's nvidia/cudnn and nvidia/nccl
#     wheel folders (python3 -c 'import nvidia.cudnn'); wheels ship only libcudnn.so.9 and
#     libnccl.so.2, so a folder with the unversioned links is made under the build folder, and
#     LD_LIBRARY_PATH points at the real ones for the runs.
#   - cuBLAS / cudart: CUDA_HOME's lib64, lib or targets/x86_64-linux/lib; when those lack the
#     unversioned libcublas.so (a pip-installed toolkit), links to the Python environment's
#     nvidia/*/lib copies are made and put on LIBRARY_PATH.
#   - OpenBLAS and MPI are not needed: the build uses -Dblas=disabled -Dmpi=disabled.
# The report (report.md), logs (build.log, test.log, cuda_cases.log, cuda_cases.tsv, bench.log,
# torch_bench.log) and the environment (env.txt) go to OUTDIR: eight files. test_cuda's cases run
# first, one process each (a sticky kernel fault then costs one case, not the rest of the binary;
# failed ones are rerun with CUDA_LAUNCH_BLOCKING=1), then the rest of the suite. Exit status: 0 when the build and every test
# passed.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${1:-${OUT:-$ROOT/gpu_check_out}}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
BUILD=${SL_GPU_CHECK_BUILD:-$ROOT/build-gpu}
JOBS=${SL_GPU_CHECK_JOBS:-$(nproc)}
# outside the source tree: meson refuses include folders inside it that are not the project's
# (the first GPU run failed to configure with the cuDNN links in build-gpu-deps/)
DEPS=$(mktemp -d "${TMPDIR:-/tmp}/sl-gpu-check-deps.XXXXXX")
REPORT=$OUTDIR/report.md
mkdir -p "$DEPS"
T0=$(date +%s)
BUDGET=${SL_GPU_CHECK_BUDGET_S:-450}
# Seconds left of the budget after keeping $1 back (at least 1).
left() {
  local l=$((BUDGET - ($(date +%s) - T0) - ${1:-0}))
  [ $l -lt 1 ] && l=1
  echo $l
}

log() { echo "[gpu_check] $*" | tee -a "$OUTDIR/build.log" >&2; }
: >"$OUTDIR/build.log"
# Stops before the build with a report that says why (report.md is written on every path).
fail_early() {
  log "$1"
  {
    echo "# Shardlight GPU check"
    echo
    echo "- stopped before the build: $1"
    echo
    echo '```'
    cat "$OUTDIR/build.log"
    echo '```'
  } >"$REPORT"
  exit 2
}

# ---- environment -------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(uname -a)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "nvcc: $(command -v nvcc || echo none)"
  command -v nvcc >/dev/null && nvcc --version | tail -2
  echo "c++: $(c++ --version | head -1)"
  echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda)' 2>&1
  echo "ninja: $(ninja --version 2>&1)"
  echo "cores: $(nproc)"
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt" >>"$OUTDIR/build.log"

if command -v meson >/dev/null; then
  MESON=(meson)
elif python3 -c 'import mesonbuild' 2>/dev/null; then
  MESON=(python3 -m mesonbuild.mesonmain)
else
  whl=$(ls "$ROOT"/.carry/meson-*.whl 2>/dev/null | tail -1)
  if [ -n "$whl" ]; then
    rm -rf "$DEPS/meson" && mkdir -p "$DEPS/meson"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$whl" "$DEPS/meson"
    export PYTHONPATH=$DEPS/meson${PYTHONPATH:+:$PYTHONPATH}
  fi
  MESON=(python3 -m mesonbuild.mesonmain)
fi

if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null; then
    CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
  else
    CUDA_HOME=/usr/local/cuda
  fi
fi
export CUDA_HOME
export PATH=$CUDA_HOME/bin:$PATH
log "CUDA_HOME=$CUDA_HOME"
log "meson: ${MESON[*]} ($("${MESON[@]}" --version 2>&1 | head -1))"
{
  echo "meson: ${MESON[*]} $("${MESON[@]}" --version 2>&1 | head -1)"
  echo "--- where the CUDA libraries are"
  for d in "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/x86_64-linux/lib; do
    [ -d "$d" ] && echo "$d: $(cd "$d" && ls | grep -E '^lib(cudart|cublas|cublasLt|cudnn|nccl)\.so' | tr '\n' ' ')"
  done
  ls -d "$CUDA_HOME"/include/cudnn.h "$CUDA_HOME"/include/nccl.h 2>&1
  python3 - <<'PYEOF'
import glob, os, site
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    for d in sorted(glob.glob(os.path.join(sp, "nvidia", "*"))):
        libs = sorted(os.path.basename(f) for f in glob.glob(os.path.join(d, "lib", "lib*.so*")))
        inc = "include" if os.path.isdir(os.path.join(d, "include")) else "-"
        print(d, inc, " ".join(libs[:8]))
PYEOF
} >>"$OUTDIR/env.txt" 2>&1

# ---- what the CUDA runtime itself sees --------------------------------------------------------------
# A driver older than the toolkit needs makes cudaGetDeviceCount fail, and the library then
# reports no GPU: every CUDA test would be skipped, not failed. This probe (nvcc, a few seconds)
# puts the runtime's own answer, the driver and runtime versions and each GPU's compute
# capability into env.txt, and the build's -Dgpu_arch follows the first GPU's capability
# (SL_GPU_CHECK_ARCH overrides; 90, the H200's, when the probe finds none).
GPU_ARCH=${SL_GPU_CHECK_ARCH:-}
probe_dir=$DEPS/probe
mkdir -p "$probe_dir"
cat >"$probe_dir/probe.cu" <<'PROBE'
#include <cuda_runtime.h>
#include <cstdio>
int main() {
  int drv = 0, rt = 0, n = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaError_t e = cudaGetDeviceCount(&n);
  std::printf("cuda probe: driver %d, runtime %d, cudaGetDeviceCount: %s (%s), %d device(s)\n", drv,
              rt, cudaGetErrorName(e), cudaGetErrorString(e), e == cudaSuccess ? n : 0);
  for (int i = 0; e == cudaSuccess && i < n; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    std::printf("cuda probe: device %d: %s, sm_%d%d, %.1f GiB\n", i, p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1 << 30));
    if (i == 0) std::printf("arch %d%d\n", p.major, p.minor);
  }
  return e == cudaSuccess && n > 0 ? 0 : 1;
}
PROBE
if command -v nvcc >/dev/null &&
  timeout 120 nvcc -o "$probe_dir/probe" "$probe_dir/probe.cu" >"$probe_dir/nvcc.log" 2>&1; then
  timeout 60 "$probe_dir/probe" >"$probe_dir/out.txt" 2>&1
  grep '^cuda probe' "$probe_dir/out.txt" | tee -a "$OUTDIR/env.txt" >>"$OUTDIR/build.log"
  [ -z "$GPU_ARCH" ] && GPU_ARCH=$(sed -n 's/^arch //p' "$probe_dir/out.txt" | head -1)
else
  log "cuda probe: could not be built (see $probe_dir/nvcc.log)"
  tail -5 "$probe_dir/nvcc.log" >>"$OUTDIR/env.txt" 2>/dev/null
fi
GPU_ARCH=${GPU_ARCH:-90}
log "gpu_arch: $GPU_ARCH"

# ---- header-only dependencies: Eigen and doctest ----------------------------------------------
CXXFLAGS_EXTRA=""
PCDIR=$DEPS/pkgconfig
mkdir -p "$PCDIR"
CARRY_ONLY=${SL_GPU_CHECK_CARRY_ONLY:-0}
if [ "$CARRY_ONLY" != 1 ] && command -v pkg-config >/dev/null &&
  pkg-config --exists eigen3 2>/dev/null; then
  log "Eigen: system ($(pkg-config --modversion eigen3))"
else
  core=$(find "$ROOT/.carry" -path '*Eigen/Core' -type f 2>/dev/null | head -1)
  [ -z "$core" ] && [ "$CARRY_ONLY" != 1 ] && [ -f /usr/include/eigen3/Eigen/Core ] &&
    core=/usr/include/eigen3/Eigen/Core
  if [ -z "$core" ]; then
    fail_early "Eigen: not found (neither pkg-config eigen3 nor .carry/eigen3/**/Eigen/Core)"
  fi
  eigen_inc=$(dirname "$(dirname "$core")")
  printf 'Name: eigen3\nDescription: Eigen (carried)\nVersion: 3.4.0\nCflags: -I%s\n' \
    "$eigen_inc" >"$PCDIR/eigen3.pc"
  log "Eigen: $eigen_inc"
fi
export PKG_CONFIG_PATH=$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
NATIVE_FILE=()
if ! command -v pkg-config >/dev/null; then
  # A pkg-config stand-in that knows only the .pc files in $PCDIR (enough for Eigen).
  cat >"$DEPS/pkg-config" <<'EOF'
#!/usr/bin/env python3
import os, sys
args = [a for a in sys.argv[1:] if a not in ("--print-errors", "--short-errors", "--static")]
if "--version" in args:
    print("0.29.2"); sys.exit(0)
pkgs = [a for a in args if not a.startswith("-")]
def load(name):
    for d in os.environ.get("PKG_CONFIG_PATH", "").split(":"):
        p = os.path.join(d, name + ".pc")
        if d and os.path.exists(p):
            return dict(l.split(": ", 1) for l in open(p).read().splitlines() if ": " in l)
    return None
if not pkgs:
    sys.exit(1)
info = load(pkgs[0])
if info is None:
    sys.stderr.write("Package %s was not found\n" % pkgs[0]); sys.exit(1)
if "--modversion" in args: print(info.get("Version", "0"))
elif "--cflags" in args: print(info.get("Cflags", ""))
elif "--libs" in args: print(info.get("Libs", ""))
elif any(a.startswith("--variable") for a in args): print("")
sys.exit(0)
EOF
  chmod +x "$DEPS/pkg-config"
  printf "[binaries]\npkg-config = '%s'\n" "$DEPS/pkg-config" >"$DEPS/native.ini"
  NATIVE_FILE=(--native-file "$DEPS/native.ini")
  log "pkg-config: missing, using the stand-in $DEPS/pkg-config"
fi

if [ "$CARRY_ONLY" != 1 ] &&
  echo '#include <doctest/doctest.h>' | c++ -x c++ -fsyntax-only - >/dev/null 2>&1; then
  log "doctest: system"
else
  dt=$(find "$ROOT/.carry" -name doctest.h -type f 2>/dev/null | head -1)
  if [ -z "$dt" ]; then
    fail_early "doctest: not found (.carry/doctest/**/doctest.h)"
  fi
  if [ "$(basename "$(dirname "$dt")")" = doctest ] &&
    [ -f "$(dirname "$(dirname "$dt")")/doctest/doctest.h" ]; then
    doctest_inc=$(dirname "$(dirname "$dt")")
  else
    mkdir -p "$DEPS/doctest-include/doctest"
    ln -sfn "$dt" "$DEPS/doctest-include/doctest/doctest.h"
    doctest_inc=$DEPS/doctest-include
  fi
  CXXFLAGS_EXTRA="$CXXFLAGS_EXTRA -isystem $doctest_inc"
  log "doctest: $doctest_inc"
fi

# ---- cuDNN, NCCL, cuBLAS --------------------------------------------------------------------
# link_folder NAME LIB SRC_ROOT: DEPS/NAME/{include,lib} with unversioned links.
LD_EXTRA=""
link_folder() {
  local name=$1 lib=$2 src=$3
  local dst=$DEPS/$name
  rm -rf "$dst"
  mkdir -p "$dst/lib"
  ln -sfn "$src/include" "$dst/include"
  local f
  for f in "$src"/lib/lib*.so*; do
    [ -e "$f" ] || continue
    ln -sfn "$f" "$dst/lib/$(basename "$f")"
    local base
    base=$(basename "$f" | sed 's/\.so\..*$/.so/')
    [ -e "$dst/lib/$base" ] || ln -sfn "$f" "$dst/lib/$base"
  done
  [ -e "$dst/lib/lib$lib.so" ] || return 1
  echo "$dst"
}
MESON_OPTS=()
py_pkg_dir() { # folder of the Python package nvidia.<name> holding include/<header>
  local d
  d=$(python3 -c "import nvidia.$1 as m, os; print(os.path.dirname(m.__file__) if getattr(m, '__file__', None) else list(m.__path__)[0])" 2>/dev/null)
  if [ -n "$d" ] && [ -f "$d/include/$2" ]; then
    echo "$d"
    return
  fi
  # any nvidia/*/include/<header> in the environment's site-packages
  local sp
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    d=$(find "$sp/nvidia" -maxdepth 3 -path "*/include/$2" -type f 2>/dev/null | head -1)
    if [ -n "$d" ]; then
      dirname "$(dirname "$d")"
      return
    fi
  done
}
PY_LIBS=${SL_GPU_CHECK_PY_LIBS:-0}
if [ "$PY_LIBS" != 1 ] && [ -f "$CUDA_HOME/include/cudnn.h" ] &&
  ls "$CUDA_HOME"/lib*/libcudnn.so >/dev/null 2>&1; then
  log "cuDNN: $CUDA_HOME"
else
  d=$(py_pkg_dir cudnn cudnn.h)
  if [ -n "$d" ]; then
    if folder=$(link_folder cudnn cudnn "$d"); then
      MESON_OPTS+=("-Dcudnn_dir=$folder")
      LD_EXTRA="$d/lib${LD_EXTRA:+:$LD_EXTRA}"
      log "cuDNN: $d (links in $folder)"
    else
      log "cuDNN: $d has no lib/libcudnn.so*"
    fi
  else
    log "cuDNN: not found (CUDA_HOME or python3 nvidia.cudnn); conv runs without it"
  fi
fi
if [ "$PY_LIBS" != 1 ] && [ -f "$CUDA_HOME/include/nccl.h" ] &&
  ls "$CUDA_HOME"/lib*/libnccl.so >/dev/null 2>&1; then
  log "NCCL: $CUDA_HOME"
else
  d=$(py_pkg_dir nccl nccl.h)
  if [ -n "$d" ]; then
    if folder=$(link_folder nccl nccl "$d"); then
      MESON_OPTS+=("-Dnccl_dir=$folder")
      LD_EXTRA="$d/lib${LD_EXTRA:+:$LD_EXTRA}"
      log "NCCL: $d (links in $folder)"
    else
      log "NCCL: $d has no lib/libnccl.so*"
    fi
  else
    log "NCCL: not found; the NCCL process group is not built"
  fi
fi
# cuBLAS / cudart: the build looks in CUDA_HOME's lib folders and the linker's own paths.
have_unversioned() {
  local d
  for d in "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/x86_64-linux/lib; do
    [ -e "$d/lib$1.so" ] && return 0
  done
  return 1
}
for lib in cudart cublas cublasLt; do
  have_unversioned "$lib" && continue
  f=$(python3 - "$lib" <<'PYEOF' 2>/dev/null
import glob, site, sys
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    for f in sorted(glob.glob(sp + "/nvidia/*/lib/lib" + sys.argv[1] + ".so.*")):
        print(f)
        sys.exit(0)
PYEOF
  )
  if [ -n "$f" ]; then
    mkdir -p "$DEPS/cudalibs"
    ln -sfn "$f" "$DEPS/cudalibs/lib$lib.so"
    export LIBRARY_PATH=$DEPS/cudalibs${LIBRARY_PATH:+:$LIBRARY_PATH}
    LD_EXTRA="$(dirname "$f")${LD_EXTRA:+:$LD_EXTRA}"
    log "lib$lib.so: not under CUDA_HOME, using $f"
  else
    log "lib$lib.so: not found under CUDA_HOME nor in the Python environment"
  fi
done
export LD_LIBRARY_PATH=$CUDA_HOME/lib64${LD_EXTRA:+:$LD_EXTRA}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- build --------------------------------------------------------------------------------------
build_ok=0
log "configure: ${MESON[*]} setup $BUILD -Dcuda=enabled -Dblas=disabled -Dmpi=disabled -Dgpu_arch=$GPU_ARCH ${MESON_OPTS[*]:-}"
WIPE=()
[ -d "$BUILD/meson-private" ] && WIPE=(--wipe)
if CXXFLAGS="${CXXFLAGS:-}$CXXFLAGS_EXTRA" timeout "$(left 200)" "${MESON[@]}" setup "$BUILD" \
  "${WIPE[@]}" -Dcuda=enabled -Dblas=disabled -Dmpi=disabled -Dbuildtype=release \
  "-Dgpu_arch=$GPU_ARCH" \
  "${MESON_OPTS[@]}" "${NATIVE_FILE[@]}" >>"$OUTDIR/build.log" 2>&1; then
  start=$(date +%s)
  # shellcheck disable=SC2086  # a list of targets
  if timeout "$(left 150)" ninja -C "$BUILD" -j"$JOBS" ${SL_GPU_CHECK_TARGETS:-} \
    >>"$OUTDIR/build.log" 2>&1; then
    build_ok=1
    log "build: ok in $(($(date +%s) - start)) s"
  else
    log "build: FAILED or out of time after $(($(date +%s) - start)) s (see build.log)"
  fi
else
  log "configure: FAILED (see build.log)"
fi

# ---- CUDA test cases, one process each ------------------------------------------------------------
# A kernel fault (an illegal address, a misaligned access) is sticky: every later CUDA call of
# that process fails, so in one test_cuda process the first bad kernel would hide the results of
# every case after it. Here each case of test_cuda runs in a process of its own (8 at a time,
# SL_GPU_CHECK_CASE_TIMEOUT_S each, default 120), so one run reports every failing case; a failed
# case is then rerun once with CUDA_LAUNCH_BLOCKING=1, which makes the CUDA_CHECK after the
# faulting launch name its file:line. cuda_cases.tsv: case, exit status, seconds;
# cuda_cases.log: every case's output.
cases_done=0
cases_failed=0
CASE_TIMEOUT=${SL_GPU_CHECK_CASE_TIMEOUT_S:-120}
if [ $build_ok = 1 ] && [ -x "$BUILD/tests/test_cuda" ]; then
  start=$(date +%s)
  CASEDIR=$BUILD/gpu_check_cases
  rm -rf "$CASEDIR" && mkdir -p "$CASEDIR"
  # names one a line (doctest's rulers and [doctest] lines dropped); commas separate doctest
  # filters, so one.sh turns a comma in a name into the one-character wildcard '?'
  "$BUILD/tests/test_cuda" --list-test-cases --no-colors 2>/dev/null |
    grep -vE '^(=+|\[doctest\].*|)$' >"$CASEDIR/names.txt"
  cat >"$CASEDIR/one.sh" <<'ONE'
#!/usr/bin/env bash
# one.sh BINARY DIR TIMEOUT INDEX NAME [blocking]: runs one test case, writes DIR/INDEX.{log,rc,s}
bin=$1 dir=$2 t=$3 i=$4 name=$5
pattern=${name//,/?}
s0=$(date +%s)
if [ "${6:-}" = blocking ]; then
  CUDA_LAUNCH_BLOCKING=1 SL_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE timeout "$t" "$bin" \
    "--test-case=$pattern" --no-colors >"$dir/$i.blocking.log" 2>&1
  echo $? >"$dir/$i.blocking.rc"
else
  SL_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE timeout "$t" "$bin" "--test-case=$pattern" \
    --no-colors >"$dir/$i.log" 2>&1
  echo $? >"$dir/$i.rc"
  echo $(($(date +%s) - s0)) >"$dir/$i.s"
fi
ONE
  chmod +x "$CASEDIR/one.sh"
  ncases=$(wc -l <"$CASEDIR/names.txt")
  log "cuda cases: $ncases test cases of test_cuda, one process each"
  awk '{ print NR; print }' "$CASEDIR/names.txt" |
    timeout "$(left 120)" xargs -d '\n' -n 2 -P 8 "$CASEDIR/one.sh" "$BUILD/tests/test_cuda" \
      "$CASEDIR" "$CASE_TIMEOUT"
  : >"$OUTDIR/cuda_cases.log"
  printf 'case\texit\tseconds\n' >"$OUTDIR/cuda_cases.tsv"
  i=0
  while IFS= read -r name; do
    i=$((i + 1))
    rc=$(cat "$CASEDIR/$i.rc" 2>/dev/null || echo "not run (out of time)")
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(cat "$CASEDIR/$i.s" 2>/dev/null || echo -)" \
      >>"$OUTDIR/cuda_cases.tsv"
    { echo "===== [$i] $name: exit $rc"; cat "$CASEDIR/$i.log" 2>/dev/null; } >>"$OUTDIR/cuda_cases.log"
    [ "$rc" = 0 ] || cases_failed=$((cases_failed + 1))
  done <"$CASEDIR/names.txt"
  # reruns of the failed cases (at most 12) under CUDA_LAUNCH_BLOCKING=1
  reruns=0
  i=0
  while IFS= read -r name; do
    i=$((i + 1))
    rc=$(cat "$CASEDIR/$i.rc" 2>/dev/null || echo x)
    case $rc in 0 | x) continue ;; esac
    [ $reruns -ge 12 ] || [ "$(left 100)" -le 1 ] && break
    reruns=$((reruns + 1))
    t=$CASE_TIMEOUT
    [ "$(left 100)" -lt "$t" ] && t=$(left 100)
    "$CASEDIR/one.sh" "$BUILD/tests/test_cuda" "$CASEDIR" "$t" "$i" "$name" blocking
    { echo "===== [$i] $name: rerun with CUDA_LAUNCH_BLOCKING=1: exit $(cat "$CASEDIR/$i.blocking.rc")"
      cat "$CASEDIR/$i.blocking.log"; } >>"$OUTDIR/cuda_cases.log"
  done <"$CASEDIR/names.txt"
  [ "$ncases" -gt 0 ] && ! grep -q 'not run' "$OUTDIR/cuda_cases.tsv" && cases_done=1
  log "cuda cases: $((ncases - cases_failed)) of $ncases exited 0, $reruns rerun blocking, in $(($(date +%s) - start)) s"
fi

# ---- tests --------------------------------------------------------------------------------------
tests_ok=0
if [ $build_ok = 1 ]; then
  start=$(date +%s)
  # every test binary runs with SL_NUM_THREADS=2 (tests/meson.build); test_cuda's cases ran
  # above when every one of them got to run, so the suite leaves it out then
  suite=()
  if [ $cases_done = 1 ]; then
    # --list prints "shardlight / cuda" (meson 1.0) or "shardlight:cuda" (1.12, which then ran
    # test_cuda twice): the bare name is what follows the last " / " or ":"
    mapfile -t suite < <("${MESON[@]}" test -C "$BUILD" --no-rebuild --list 2>/dev/null |
      sed -E 's@^.* / @@; s@^.*:@@' | grep -v '^$' | grep -vx 'cuda')
  fi
  if timeout "$(left 70)" "${MESON[@]}" test -C "$BUILD" --no-rebuild --print-errorlogs \
    --num-processes 8 "${suite[@]}" >"$OUTDIR/test.log" 2>&1; then
    [ $cases_failed = 0 ] && tests_ok=1
  fi
  # the full log (every test's output) replaces the console's
  [ -s "$BUILD/meson-logs/testlog.txt" ] && cp "$BUILD/meson-logs/testlog.txt" "$OUTDIR/test.log"
  log "tests: $([ $tests_ok = 1 ] && echo passed || echo 'FAILED or out of time') in $(($(date +%s) - start)) s"
fi

# ---- benchmarks ---------------------------------------------------------------------------------
bench_args=()
[ "${SL_GPU_CHECK_QUICK:-0}" = 1 ] && bench_args=(--quick)
if [ $build_ok = 1 ] && [ "${SL_GPU_CHECK_NO_BENCH:-0}" != 1 ]; then
  # the full sizes took about 30 s for bench_gpu and 16 s for PyTorch's side on the H200
  # (2026-12-04); with less time left than that allows, the quick ones
  [ "$(left 20)" -lt 55 ] && bench_args=(--quick)
  if [ -x "$BUILD/tools/bench_gpu" ]; then
    # the trace goes to the build folder: the device tool brings back at most 8 files from $OUT
    SL_BENCH_GPU_TRACE="$BUILD/trace_encoder_step.json" \
      timeout "$(left 40)" "$BUILD/tools/bench_gpu" "${bench_args[@]}" >"$OUTDIR/bench.log" 2>&1
    log "bench_gpu ${bench_args[*]:-}: exit $? (124: out of time)"
  else
    log "bench_gpu: not built"
  fi
  if [ "${SL_GPU_CHECK_NO_TORCH:-0}" = 1 ]; then
    log "SL_GPU_CHECK_NO_TORCH=1: no PyTorch side"
  elif python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PYTHONUNBUFFERED=1 timeout "$(left 10)" python3 "$ROOT/tools/bench_gpu_torch.py" \
      "${bench_args[@]}" >"$OUTDIR/torch_bench.log" 2>&1
    log "bench_gpu_torch.py ${bench_args[*]:-}: exit $? (124: out of time)"
  else
    log "PyTorch with CUDA not available: no PyTorch side"
  fi
fi

# ---- report -------------------------------------------------------------------------------------
{
  echo "# Shardlight GPU check"
  echo
  echo '```'
  cat "$OUTDIR/env.txt"
  echo '```'
  echo
  if ! grep -q '^cuda probe: device 0:' "$OUTDIR/env.txt" 2>/dev/null; then
    echo "- **WARNING: the CUDA runtime reported no usable GPU (cuda probe in env.txt): the CUDA"
    echo "  test cases below were skipped, not run on a GPU.**"
  fi
  echo "- build (-Dcuda=enabled -Dblas=disabled -Dmpi=disabled -Dgpu_arch=$GPU_ARCH ${MESON_OPTS[*]:-}): $([ $build_ok = 1 ] && echo ok || echo FAILED)"
  if [ $build_ok = 1 ]; then
    echo "- tests: $([ $tests_ok = 1 ] && echo 'all passed' || echo 'FAILED or out of time')"
    if [ -s "$OUTDIR/cuda_cases.tsv" ]; then
      echo "- test_cuda, one process per case: $(($(wc -l <"$OUTDIR/cuda_cases.tsv") - 1)) cases," \
        "$cases_failed not exiting 0 (cuda_cases.tsv, cuda_cases.log)"
      if [ $cases_failed != 0 ]; then
        echo
        echo "Failed test_cuda cases: exit status, then their first error lines (CUDA_LAUNCH_BLOCKING=1"
        echo "reruns included; the first 80 lines; all of it is in cuda_cases.log):"
        echo
        echo '```'
        awk '/^===== / { head = $0; ok = ($NF == "0"); if (!ok) print head; next }
             !ok && /ERROR|error|FAILED|terminate|Segmentation|Aborted|CUDA|cuBLAS|cuDNN|logged:/ { print "  " $0 }' \
          "$OUTDIR/cuda_cases.log" | head -80
        echo '```'
      fi
    fi
    echo
    echo "| test | result | duration | doctest cases |"
    echo "|---|---|---|---|"
    awk '/^test:/ { if (t != "") print "| " t " | " r " | " d " | " c " |"; t = $0; sub(/^test: */, "", t); r = d = c = "" }
         /^duration:/ { d = $2 }
         /^result:/ { r = $0; sub(/^result: */, "", r) }
         /^\[doctest\] test cases:/ { c = $0; sub(/^\[doctest\] test cases: */, "", c); gsub(/ *\| */, ", ", c) }
         END { if (t != "") print "| " t " | " r " | " d " | " c " |" }' "$OUTDIR/test.log"
    echo
    if grep -qE 'ERROR:' "$OUTDIR/test.log" 2>/dev/null; then
      echo "Failed test cases and their errors (the first 60 lines; all of it is in test.log):"
      echo
      echo '```'
      awk '/^TEST CASE:/ { tc = $0; shown = 0 }
           /ERROR:/ { if (!shown) print tc; shown = 1; print "  " $0 }' "$OUTDIR/test.log" | head -60
      echo '```'
      echo
    fi
    echo "Skipped test cases (each prints why):"
    echo
    echo '```'
    grep -hE '^\[skipped\]' "$OUTDIR/test.log" 2>/dev/null | sort | uniq -c | sort -rn | head -40
    grep -E '^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$OUTDIR/test.log" 2>/dev/null
    echo '```'
    echo
    if [ $tests_ok != 1 ]; then
      echo "Failure lines (crashes and timeouts too; first 60; the whole log is test.log):"
      echo
      echo '```'
      grep -vE '^Inherited environment:' "$OUTDIR/test.log" 2>/dev/null |
        grep -nE 'ERROR|FAILED|error:|TIMEOUT|Segmentation|terminate called' | head -60
      echo '```'
    fi
  else
    echo
    echo "Last lines of build.log:"
    echo
    echo '```'
    tail -40 "$OUTDIR/build.log"
    echo '```'
  fi
  if [ -s "$OUTDIR/bench.log" ]; then
    echo
    cat "$OUTDIR/bench.log"
  fi
  if [ -s "$OUTDIR/torch_bench.log" ]; then
    echo
    cat "$OUTDIR/torch_bench.log"
  fi
  echo
  echo "Logs: build.log, test.log, cuda_cases.log, cuda_cases.tsv, bench.log, torch_bench.log, env.txt"
  echo "(gpu_check took $(($(date +%s) - T0)) s of its ${BUDGET} s budget)"
} >"$REPORT"
log "report: $REPORT ($(($(date +%s) - T0)) s)"
[ $build_ok = 1 ] && [ $tests_ok = 1 ]

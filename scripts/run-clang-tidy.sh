#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) on the hand-written C++ sources of the build in $1.
# Generated code is left out: the generator's output is checked by its tests instead.
#
# A file found clean is remembered (SILT_TIDY_CACHE, default ~/.cache/silt-tidy) under a hash
# of everything its result depends on: the clang-tidy version, .clang-tidy, the compile flags
# and the preprocessed translation unit with its comments (so NOLINT markers count), with the
# checkout's path taken out so that a clone elsewhere hits the same entries. A file is checked
# again whenever any of these change; findings are never remembered. SILT_TIDY_CACHE=off
# checks every file.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[[ -n "$tidy" ]] || { echo "run-clang-tidy: clang-tidy not found (run scripts/install-deps.sh)" >&2; exit 1; }
[[ -f "$build/compile_commands.json" ]] || { echo "run-clang-tidy: no $build/compile_commands.json" >&2; exit 1; }
exec python3 - "$tidy" "$build" "${SILT_TIDY_CACHE:-$HOME/.cache/silt-tidy}" <<'PY'
import concurrent.futures, hashlib, json, os, shlex, subprocess, sys

tidy, build, cache = sys.argv[1:4]
root = os.getcwd()
entries = {}
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    f = os.path.relpath(e["file"], root)
    # Hand-written sources that this build compiles (the fuzz targets only exist in clang builds).
    if not f.startswith("src/protocol/generated/") and not f.endswith("random_messages.cc"):
        entries.setdefault(f, e)
files = sorted(entries)
use_cache = cache != "off"
version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout
config = open(".clang-tidy", "rb").read()


def key(f):
    """The cache key of f, or None when it cannot be computed (the file is then checked)."""
    e = entries[f]
    args = shlex.split(e["command"])
    pp, skip = [args[0]], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-c"):
            skip = a == "-o"
        elif a != e["file"]:
            pp.append(a)
    pp += ["-E", "-P", "-C", e["file"]]
    r = subprocess.run(pp, cwd=e["directory"], capture_output=True)
    if r.returncode != 0:
        return None
    h = hashlib.sha256()
    for part in (version.encode(), config, " ".join(pp).replace(root, ".").encode(),
                 r.stdout.replace(root.encode(), b".")):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def check(f):
    k = key(f) if use_cache else None
    if k and os.path.exists(os.path.join(cache, k)):
        return f, True, ""
    r = subprocess.run([tidy, "-p", build, "--quiet", f], capture_output=True, text=True)
    out = r.stdout + r.stderr
    clean = r.returncode == 0
    if clean and k:
        os.makedirs(cache, exist_ok=True)
        open(os.path.join(cache, k), "w").close()
    return f, False, "" if clean else out


found, cached = [], 0
with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for f, hit, out in pool.map(check, files):
        cached += hit
        if out:
            found.append(out)
if found:
    lines = [l for out in found for l in out.splitlines()]
    shown = [i for i, l in enumerate(lines) if "error:" in l or "warning:" in l]
    keep = sorted({j for i in shown for j in range(i, min(i + 4, len(lines)))})
    print("\n".join(lines[j] for j in keep[:80]))
    print("run-clang-tidy: findings above", file=sys.stderr)
    sys.exit(1)
print(f"run-clang-tidy: {len(files)} files clean ({cached} unchanged since an earlier clean check)")
PY

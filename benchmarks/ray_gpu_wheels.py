"""Prepare the wheels `benchmarks/ray_gpus.py` needs on a GPU machine of this workplace (no package
index there; what one device call carries, working tree included, is at most 64 MiB) and print the
two device calls that run it.

    python benchmarks/ray_gpu_wheels.py [--image-list /work/.library/device/KINDS.md] [--ray-version 2.60.0]

The Ray wheel for CPython 3.12 (about 79 MB) is larger than one call may carry, so it travels in two
parts: call 1 carries part 1 (kept under /tmp/kgray on the machine, which stays warm 30 s after a
call) with KernelGen's own missing dependencies and runs the local engine; call 2 carries part 2 with
Ray's missing dependencies, joins and checks the wheel, installs it and runs the Ray engine. Every
wheel is found the way the device notes say: `pip download --no-deps` for Python 3.12 manylinux,
then each wheel's `Requires-Dist` (markers evaluated for that machine, extras left out) against the
image's package list, recursively. A package installed here is taken at the version installed here
(the one the CPU tests ran with); one version of each.

Writes `.whl-ray1/` and `.whl-ray2/` at the repository's root (ignored through git's info/exclude)
and checks that each, with the working tree, stays under --limit-mib.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_34_x86_64", "manylinux1_x86_64"]
TARGET = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
WORK = "/tmp/kgray"  # on the device machine: part 1 of the wheel, both engines' results
MIB = 1 << 20


def image_packages(kinds_md: Path) -> set[str]:
    """The names after 'Packages:' in the device notes' 'Python packages already there'."""
    text = kinds_md.read_text(encoding="utf-8")
    found = re.search(r"Packages: (.+?)\.\s*$", text, re.M)
    if not found:
        sys.exit(f"no 'Packages:' list in {kinds_md}")
    return {canonicalize_name(n.strip()) for n in found.group(1).split(",")}


def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def pinned(req: Requirement) -> str:
    """The requirement at the version installed here when that one satisfies it."""
    here = installed(req.name)
    if here and req.specifier.contains(here, prereleases=True):
        return f"{req.name}=={here}"
    return str(req).split(";")[0]


def download(spec: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(dest), spec]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    new = set(dest.glob("*.whl")) - before
    if len(new) != 1:
        sys.exit(f"pip download {spec}: expected one new wheel, got {sorted(w.name for w in new)}")
    return new.pop()


def requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode("utf-8").splitlines()
    reqs = [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(TARGET)]


def missing_closure(roots: list[Requirement], image: set[str], dest: Path, have: set[str]) -> list[Path]:
    """Wheels of `roots` and of everything they need that the image lacks (`have`: already fetched)."""
    wheels, todo = [], list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in image or name in have:
            continue
        have.add(name)
        wheel = download(pinned(req), dest)
        print(f"  {wheel.name} ({wheel.stat().st_size / MIB:.1f} MiB)")
        wheels.append(wheel)
        todo += requires(wheel)
    return wheels


def tree_bytes(root: Path) -> int:
    """What a device call sends besides the carried folders: tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def ignore(root: Path, folders: list[str]) -> None:
    exclude = Path(subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], cwd=root, capture_output=True,
                                  text=True, check=True).stdout.strip())
    exclude = exclude if exclude.is_absolute() else root / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    with open(exclude, "a", encoding="utf-8") as f:
        f.writelines(f"/{d}/\n" for d in folders if f"/{d}/" not in lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image-list", type=Path, default=Path("/work/.library/device/KINDS.md"))
    ap.add_argument("--ray-version", default=installed("ray") or "2.60.0", help="default: the one installed here")
    ap.add_argument("--limit-mib", type=float, default=60.0, help="what one call may carry, working tree included")
    ap.add_argument("--rounds", type=int, default=0, help="passed to ray_gpus.py")
    args = ap.parse_args()
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip())
    image = image_packages(args.image_list)
    one, two = root / ".whl-ray1", root / ".whl-ray2"
    ignore(root, [one.name, two.name])
    staging = root / ".whl-ray1" / "staging"
    for d in (one, two):
        shutil.rmtree(d, ignore_errors=True)
    staging.mkdir(parents=True)

    project = [Requirement(r) for r in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]]
    have: set[str] = set()
    print("KernelGen's dependencies missing on the image (call 1):")
    first = missing_closure(project, image, staging, have)
    print("Ray and its dependencies missing on the image (call 2):")
    second = missing_closure([Requirement(f"ray=={args.ray_version}")], image, staging, have)
    ray_wheel = next(w for w in second if canonicalize_name(w.name.split("-")[0]) == "ray")
    second.remove(ray_wheel)

    tree = tree_bytes(root)
    size1, size2, ray_size = (sum(w.stat().st_size for w in ws) for ws in (first, second, [ray_wheel]))
    cut = (ray_size + size2 - size1) // 2  # both calls carry about as much
    limit = int(args.limit_mib * MIB)
    if tree + size1 + cut > limit or tree + size2 + ray_size - cut > limit:
        sys.exit(f"does not fit two calls of {args.limit_mib} MiB: tree {tree / MIB:.1f}, call-1 wheels {size1 / MIB:.1f}, "
                 f"call-2 wheels {size2 / MIB:.1f}, ray {ray_size / MIB:.1f} MiB")
    data = ray_wheel.read_bytes()
    (one / "ray.whl.part1").write_bytes(data[:cut])
    two.mkdir()
    (two / "ray.whl.part2").write_bytes(data[cut:])
    for w in first:
        shutil.move(w, one / w.name)
    for w in second:
        shutil.move(w, two / w.name)
    shutil.rmtree(staging)
    for d in (one, two):
        carried = sum(f.stat().st_size for f in d.iterdir())
        print(f"{d.name}: {carried / MIB:.1f} MiB + working tree {tree / MIB:.1f} MiB = {(carried + tree) / MIB:.1f} MiB")

    install = "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site"
    head = f"set -o pipefail; export PYTHONUNBUFFERED=1 W={WORK}; nvidia-smi -L; mkdir -p $W && "
    call1 = (head + f"cp .whl-ray1/ray.whl.part1 $W/ && {install} .whl-ray1/*.whl && export PYTHONPATH=/tmp/site:$PWD && "
             f"python3 benchmarks/ray_gpus.py local --work $W --rounds {args.rounds} 2>&1 | tee $OUT/local_console.txt")
    whl = f"$W/{ray_wheel.name}"
    deps2 = " .whl-ray2/*.whl" if second else ""
    call2 = (head + "{ test -f $W/ray.whl.part1 || { echo 'part 1 is gone: the machine was given back after call 1; "
             "run call 1 again, then call 2 within 30 s'; exit 3; }; } && "
             f"cat $W/ray.whl.part1 .whl-ray2/ray.whl.part2 > {whl} && "
             f'echo "{hashlib.sha256(data).hexdigest()}  {whl}" | sha256sum -c - && {install} {whl}{deps2} && '
             f"export PYTHONPATH=/tmp/site:$PWD && "
             f"python3 benchmarks/ray_gpus.py ray --work $W --rounds {args.rounds} 2>&1 | tee $OUT/ray_console.txt")
    print("\nTwo device calls, the second within 30 s of the first one's end (the machine then goes back,\n"
          "and with it part 1 of the wheel). Each: kind, timeout_s, carry, then the command on one line.")
    for n, (folder, cmd) in enumerate(((one.name, call1), (two.name, call2)), 1):
        assert len(cmd) < 2000, f"call {n} is {len(cmd)} characters"
        print(f"\n# call {n}: kind nvidia-h200-x2, timeout_s 600, carry [\"{folder}\"], command ({len(cmd)} characters):\n{cmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

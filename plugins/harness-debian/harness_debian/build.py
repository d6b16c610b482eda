"""Rebuild the Debian SKB from an archive's ``Packages`` and ``Translation-en`` indexes.

    apt-get update -o Acquire::Languages=en
    python -m harness_debian.build --version 2   # reads /var/lib/apt/lists, writes data/v2/skb

or point ``--packages`` / ``--translations`` at files from any Debian mirror
(``dists/<release>/main/binary-amd64/Packages.xz``, ``dists/<release>/main/i18n/Translation-en.xz``;
plain, .gz, .xz and .lz4 files are read).

Nodes: packages (the candidates), maintainers, sections and debtags tags.
Relations: package→package ``depends``, ``recommends``, ``suggests`` (the first alternative
of each clause that names a real package) and the symmetric ``same_source``; package→maintainer
``maintained_by``; package→section ``in_section``; package→tag ``tagged``.

Versions (``--version``):

* ``1`` (the default; the shipped ``data/v1/skb``): one maintainer node per e-mail address
  (lower-cased), named by the Maintainer field's display name; the address itself is not
  stored (the first release stored it in an ``email`` field; its rankings do not depend on it,
  since maintainers are not candidates).
* ``2`` (the shipped ``data/v2/skb``): maintainers as people and teams, without e-mail
  addresses. One maintainer node per *normalized display name* (Unicode NFC, whitespace
  collapsed, compared case-insensitively; the node is named by the first spelling met in
  package-name order), with no fields. Any
  e-mail-like text is removed from the display name. A Maintainer field with no display name
  (``<someone@example.org>`` or a bare address) gives the package **no** ``maintained_by``
  edge: the only thing that could name such a maintainer is the address itself, and a
  placeholder node would assert nothing true about the package. E-mail addresses that package
  texts quote (upstream authors, mailing lists; in summaries, descriptions and homepages) are
  replaced by ``<e-mail removed>``. Everything else is as v1.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import lzma
import re
import subprocess
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from harness import SKB, EdgeType

DATA = Path(__file__).parent / "data"
APT_LISTS = Path("/var/lib/apt/lists")

NODE_TYPES = ["package", "maintainer", "section", "tag"]
EDGE_TYPES = [
    EdgeType("depends", "depends on", "required by"),
    EdgeType("recommends", "recommends", "recommended by"),
    EdgeType("suggests", "suggests", "suggested by"),
    EdgeType("same_source", "built from the same source as", None),
    EdgeType("maintained_by", "maintained by", "maintains"),
    EdgeType("in_section", "section", "packages"),
    EdgeType("tagged", "tags", "tagged packages"),
]


def _open_text(path: Path) -> str:
    if path.suffix == ".lz4":
        return subprocess.run(["lz4", "-dc", str(path)], check=True, capture_output=True).stdout.decode()
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8").read()
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8").read()
    return path.read_text(encoding="utf-8")


def stanzas(text: str) -> Iterator[dict[str, str]]:
    """Parse deb822 paragraphs; continuation lines are kept with their newlines."""
    for block in text.split("\n\n"):
        record: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                record[key] += "\n" + line[1:]
            elif ":" in line:
                key, value = line.split(":", 1)
                record[key] = value.strip()
        if record:
            yield record


def long_description(raw: str) -> str:
    """Debian's description body: ' .' lines are paragraph breaks."""
    paragraphs: list[list[str]] = [[]]
    for line in raw.split("\n"):
        if line.strip() == ".":
            paragraphs.append([])
        else:
            paragraphs[-1].append(line.strip())
    return "\n".join(" ".join(p) for p in paragraphs if p)


def _relation_targets(field: str, known: dict[str, int]) -> list[int]:
    targets = []
    for clause in field.split(","):
        for alternative in clause.split("|"):
            name = re.split(r"[\s(:\[]", alternative.strip(), maxsplit=1)[0]
            if name in known:
                targets.append(known[name])
                break
    return targets


EMAIL = re.compile(r"<[^>]*>|\S+@\S+")
# v2: an e-mail address quoted in package text, with the brackets around it (<…>, &lt;…&gt;)
ADDRESS = re.compile(r"(?:<|&lt;)?[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b(?:>|&gt;)?")
REDACTED = "<e-mail removed>"


def maintainer_display_name(field: str) -> str:
    """v2: the Maintainer field's display name with any e-mail address removed, NFC,
    whitespace collapsed ("" when the field names no one)."""
    name = EMAIL.sub(" ", unicodedata.normalize("NFC", field))
    return " ".join(name.replace('"', " ").split()).strip(" ,;")


def build(packages_path: Path, translations_path: Path, release: str, version: int = 1) -> SKB:
    if version not in (1, 2):
        raise ValueError(f"unknown SKB version {version}; 1 or 2")
    packages: dict[str, dict[str, str]] = {}
    for record in stanzas(_open_text(packages_path)):
        packages[record["Package"]] = record  # a later duplicate stanza wins
    translations = {
        (r["Package"], r.get("Description-md5", "")): r["Description-en"]
        for r in stanzas(_open_text(translations_path))
        if "Description-en" in r
    }
    names = sorted(packages)
    package_id = {name: i for i, name in enumerate(names)}
    node_types = [0] * len(names)
    node_names: list[str] = list(names)
    fields: list[Mapping[str, object]] = []
    extra: dict[tuple[int, str], int] = {}

    def entity(type_id: int, key: str, name: str, node_fields: dict[str, object]) -> int:
        if (type_id, key) not in extra:
            extra[(type_id, key)] = len(node_names)
            node_types.append(type_id)
            node_names.append(name)
            fields.append(node_fields)
        return extra[(type_id, key)]

    edges: list[tuple[int, int, int]] = []
    by_source: dict[str, list[int]] = defaultdict(list)
    for name in names:
        record = packages[name]
        text = translations.get((name, record.get("Description-md5", "")), record.get("Description", ""))
        summary, _, body = text.partition("\n")
        package_fields = {
            "summary": summary.strip(),
            "description": long_description(body),
            "version": record.get("Version", ""),
            "homepage": record.get("Homepage", ""),
        }
        if version == 2:  # upstream authors' addresses quoted in descriptions (and one homepage)
            package_fields = {key: ADDRESS.sub(REDACTED, value) for key, value in package_fields.items()}
        fields.append(package_fields)
    for name in names:
        record, node = packages[name], package_id[name]
        for rel, key in ((0, "Depends"), (1, "Recommends"), (2, "Suggests")):
            for target in sorted(set(_relation_targets(record.get(key, ""), package_id)) - {node}):
                edges.append((node, target, rel))
        by_source[record.get("Source", name).split(" ")[0]].append(node)
        maintainer = record.get("Maintainer", "")
        if version == 2:
            person = maintainer_display_name(maintainer)
            if person:  # keyed by the normalized name: no address is kept anywhere
                edges.append((node, entity(1, person.casefold(), person, {}), 4))
        else:
            match = re.match(r"\s*(.*?)\s*<(.*)>", maintainer)
            person, email = (match.group(1), match.group(2).lower()) if match else (maintainer, maintainer)
            if person:
                # keyed by the address (v1's identity of a maintainer), which is not stored
                edges.append((node, entity(1, email, person, {}), 4))
        section = record.get("Section", "")
        if section:
            edges.append((node, entity(2, section, section, {}), 5))
        for tag in re.split(r"[,\s]+", record.get("Tag", "")):
            if "::" in tag:
                facet, value = tag.split("::", 1)
                edges.append((node, entity(3, tag, tag, {"facet": facet, "value": value}), 6))
    for members in by_source.values():
        for i, a in enumerate(members):
            edges.extend((a, b, 3) for b in members[i + 1 :])
    array = np.asarray(edges, dtype=np.int64)
    description = f"Debian {release} main archive (amd64): packages, maintainers, sections, debtags"
    if version == 2:
        description += " (SKB v2: maintainers by name, no e-mail addresses)"
    return SKB(
        name="debian",
        description=description,
        node_type_names=NODE_TYPES,
        node_types=np.asarray(node_types, dtype=np.int32),
        names=node_names,
        fields=fields,
        edge_types=EDGE_TYPES,
        src=array[:, 0],
        dst=array[:, 1],
        edge_type=array[:, 2],
        candidate_types=["package"],
    )


def _find(pattern: str) -> Path:
    hits = sorted(glob.glob(str(APT_LISTS / pattern)))
    if not hits:
        sys.exit(f"no {pattern} under {APT_LISTS}; run: apt-get update -o Acquire::Languages=en")
    return Path(hits[0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packages", type=Path, help="Packages index (default: from apt lists)")
    parser.add_argument("--translations", type=Path, help="Translation-en index (default: from apt lists)")
    parser.add_argument("--release", default="bookworm")
    parser.add_argument("--version", type=int, choices=(1, 2), default=1, help="SKB version (default 1)")
    parser.add_argument("--out", type=Path, help="output directory (default: the shipped data/v<version>/skb)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = DATA / f"v{args.version}" / "skb"
    packages = args.packages or _find(f"*_dists_{args.release}_main_binary-amd64_Packages*")
    translations = args.translations or _find(f"*_dists_{args.release}_main_i18n_Translation-en*")
    skb = build(packages, translations, args.release, args.version)
    if args.out.exists():
        import shutil

        shutil.rmtree(args.out)
    skb.save(args.out)
    print(f"wrote {args.out}: {skb.counts()}")


if __name__ == "__main__":
    main()

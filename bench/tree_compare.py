#!/usr/bin/env python3
"""Fingerprint a directory tree and check a restored copy against it.

  tree_compare.py stats ROOT          print "FILES BYTES" (regular files)
  tree_compare.py digest ROOT OUT     write ROOT's fingerprint to OUT (JSON)
  tree_compare.py check DIGEST ROOT   compare ROOT with a fingerprint:
                                      prints OK or MISMATCH, exit 0 or 1

A fingerprint holds, for every entry below ROOT: its type, permission bits,
and for files the size and SHA-256 of the content (symlinks: the target).
Timestamps and owners are not compared.
"""

import hashlib
import json
import os
import stat
import sys

READ_PIECE = 1 << 20
SHOWN_DIFFERENCES = 10


def walk(root):
    """(relative path, lstat) for every entry below root, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in dirnames + sorted(filenames):
            path = os.path.join(dirpath, name)
            yield os.path.relpath(path, root), os.lstat(path)


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(READ_PIECE):
            digest.update(piece)
    return digest.hexdigest()


def fingerprint(root):
    entries = {}
    for relative, info in walk(root):
        mode = format(stat.S_IMODE(info.st_mode), "04o")
        path = os.path.join(root, relative)
        if stat.S_ISREG(info.st_mode):
            entries[relative] = ["file", mode, info.st_size, file_sha256(path)]
        elif stat.S_ISDIR(info.st_mode):
            entries[relative] = ["dir", mode]
        elif stat.S_ISLNK(info.st_mode):
            entries[relative] = ["symlink", os.readlink(path)]
        else:
            entries[relative] = ["other", mode]
    return entries


def stats(root):
    files = size = 0
    for _, info in walk(root):
        if stat.S_ISREG(info.st_mode):
            files += 1
            size += info.st_size
    return files, size


def differences(expected, actual):
    for path in sorted(expected.keys() | actual.keys()):
        if path not in actual:
            yield f"missing: {path}"
        elif path not in expected:
            yield f"unexpected: {path}"
        elif expected[path] != actual[path]:
            yield f"differs: {path}: expected {expected[path]}, restored {actual[path]}"


def main(argv):
    if len(argv) == 2 and argv[0] == "stats":
        print(*stats(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "digest":
        with open(argv[2], "w") as out:
            json.dump(fingerprint(argv[1]), out)
        return 0
    if len(argv) == 3 and argv[0] == "check":
        with open(argv[1]) as f:
            expected = json.load(f)
        if not os.path.isdir(argv[2]):
            print(f"MISMATCH: {argv[2]} does not exist or is not a directory")
            return 1
        found = list(differences(expected, fingerprint(argv[2])))
        if not found:
            print(f"OK: {len(expected)} entries match")
            return 0
        print(f"MISMATCH: {len(found)} differences in {argv[2]}")
        for line in found[:SHOWN_DIFFERENCES]:
            print("  " + line)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

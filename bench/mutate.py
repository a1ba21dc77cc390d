#!/usr/bin/env python3
"""Change about --fraction of a dataset's bytes, deterministically.

What a day of work does to a machine, roughly: regions of files rewritten in
place, a few bytes inserted into the middle of large files (shifting the rest,
which defeats fixed-size chunking), data appended to files, a few small files
deleted and new files added. The same tree and --seed give the same result.
"""

import argparse
import itertools
import os
import random
import shutil
import sys

from gen_dataset import KIB, MIB, TextGenerator, log_uniform, random_bytes

# How the byte budget (fraction x dataset size) is shared out.
OVERWRITE_SHARE = 0.45
APPEND_SHARE = 0.25
NEW_FILES_SHARE = 0.25
DELETE_SHARE = 0.05  # the bytes of the deleted small files

LARGE_FILE = 1 * MIB    # the smallest file that may get byte insertions
SMALL_FILE = 64 * KIB   # files that may be deleted
TEXT_EXTENSIONS = (".txt", ".md", ".log", ".csv", ".conf")
COPY_PIECE = 4 * MIB


def regular_files(root):
    """{relative path: size} for every regular file, walked in sorted order."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and not os.path.islink(path):
                files[os.path.relpath(path, root)] = os.path.getsize(path)
    return files


class Mutator:
    def __init__(self, root, seed):
        self.root = root
        self.rng = random.Random(f"mutate:{seed}")
        self.text = TextGenerator(random.Random(f"mutate-vocabulary:{seed}"))
        self.files = regular_files(root)
        self.new_dir = f"added-by-mutate-seed{seed}"

    def content(self, relative, size):
        if relative.endswith(TEXT_EXTENSIONS):
            return self.text.text(self.rng, size)
        return random_bytes(self.rng, size)

    def overwrite(self, budget):
        """Rewrite regions in place; larger files are hit more often."""
        names = list(self.files)
        cumulative_sizes = list(itertools.accumulate(self.files[n] for n in names))
        done = regions = 0
        while done < budget:
            name = self.rng.choices(names, cum_weights=cumulative_sizes)[0]
            size = self.files[name]
            length = min(size, budget - done, log_uniform(self.rng, 4 * KIB, 1 * MIB))
            if length <= 0:
                continue
            offset = self.rng.randrange(size - length + 1)
            with open(os.path.join(self.root, name), "r+b") as f:
                f.seek(offset)
                f.write(self.content(name, length))
            done += length
            regions += 1
        print(f"overwrote {regions} regions, {done} bytes")

    def insert(self):
        """Insert 1-64 bytes at 1-3 offsets in 3 of the 10 largest files."""
        by_size = sorted(self.files, key=lambda n: (-self.files[n], n))
        large = [n for n in by_size[:10] if self.files[n] >= LARGE_FILE]
        inserted = 0
        for name in self.rng.sample(large, min(3, len(large))):
            size = self.files[name]
            offsets = sorted(self.rng.randrange(size) for _ in range(self.rng.randint(1, 3)))
            pieces = [self.rng.randbytes(self.rng.randint(1, 64)) for _ in offsets]
            self._rewrite_with_insertions(name, offsets, pieces)
            added = sum(map(len, pieces))
            self.files[name] += added
            inserted += added
            print(f"inserted {added} bytes at {len(offsets)} offsets in {name}")
        if not large:
            print(f"no files of {LARGE_FILE // MIB} MiB or more: no insertions")
        return inserted

    def _rewrite_with_insertions(self, name, offsets, pieces):
        path = os.path.join(self.root, name)
        temporary = path + ".mutate-tmp"
        with open(path, "rb") as source, open(temporary, "wb") as out:
            position = 0
            for offset, piece in zip(offsets, pieces):
                copy_range(source, out, offset - position)
                out.write(piece)
                position = offset
            shutil.copyfileobj(source, out, COPY_PIECE)
        shutil.copymode(path, temporary)
        os.replace(temporary, path)

    def append(self, budget):
        names = list(self.files)
        done = appends = 0
        while done < budget:
            name = self.rng.choice(names)
            length = min(budget - done, log_uniform(self.rng, 256, 1 * MIB))
            with open(os.path.join(self.root, name), "ab") as f:
                f.write(self.content(name, length))
            self.files[name] += length
            done += length
            appends += 1
        print(f"appended {done} bytes to {appends} files")

    def delete(self, budget):
        small = [n for n, size in self.files.items() if size <= SMALL_FILE]
        self.rng.shuffle(small)
        done = deleted = 0
        for name in small:
            if done + self.files[name] > budget or deleted == 50:
                break
            os.remove(os.path.join(self.root, name))
            done += self.files.pop(name)
            deleted += 1
        print(f"deleted {deleted} small files, {done} bytes")

    def add(self, budget):
        directory = os.path.join(self.root, self.new_dir)
        if os.path.exists(directory):
            sys.exit(f"mutate.py: {directory} exists: this tree was already "
                     "mutated with this seed; use another --seed")
        os.makedirs(directory)
        done = number = 0
        while done < budget:
            number += 1
            extension = self.rng.choice((".txt", ".bin"))
            name = os.path.join(self.new_dir, f"new_{number:04d}{extension}")
            length = min(budget - done, log_uniform(self.rng, 4 * KIB, 8 * MIB))
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(self.content(name, length))
            done += length
        print(f"added {number} files, {done} bytes, in {self.new_dir}/")


def copy_range(source, out, length):
    while length > 0:
        piece = source.read(min(COPY_PIECE, length))
        if not piece:
            raise EOFError(f"{source.name} ended {length} bytes early")
        out.write(piece)
        length -= len(piece)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="dataset to change in place")
    parser.add_argument("--seed", type=int, default=2, help="random seed (default 2)")
    parser.add_argument("--fraction", type=float, default=0.05,
                        help="share of the dataset's bytes to change (default 0.05)")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        parser.error(f"{args.dir} is not a directory")
    if not 0 < args.fraction <= 1:
        parser.error("--fraction must be in (0, 1]")

    mutator = Mutator(args.dir, args.seed)
    total = sum(mutator.files.values())
    if total == 0:
        parser.error(f"{args.dir} holds no data to change")
    budget = int(total * args.fraction)
    print(f"mutating {args.dir}: {len(mutator.files)} files, {total} bytes, "
          f"budget {budget} bytes ({args.fraction:.1%}), seed {args.seed}")

    mutator.overwrite(int(budget * OVERWRITE_SHARE))
    mutator.insert()
    mutator.append(int(budget * APPEND_SHARE))
    mutator.delete(int(budget * DELETE_SHARE))
    mutator.add(int(budget * NEW_FILES_SHARE))


if __name__ == "__main__":
    sys.exit(main())
